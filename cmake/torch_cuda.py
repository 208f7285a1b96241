"""What a wheel build of cgad needs to know about the torch it will run beside (cmake/CgadWheelCuda.cmake runs this
with the build's interpreter; docs/gpu.md, "Installing the Python package for a GPU"). Prints key=value lines:

  torch=<version> | torch=none      the importable torch, or none (e.g. pip's build isolation hides it)
  cuda=<major.minor> | cuda=none    torch.version.cuda: the CUDA torch was built with, none for a CPU torch
  cudart=<path>                     the libcudart.so.<major> torch loads: torch/lib's own copy, else the first
                                    nvidia/*/lib/ one on sys.path (the NVIDIA runtime wheel torch requires), the
                                    places and the order torch's own loader takes
  module_rpath=<dir>                that library's folder relative to where the module is installed, this
                                    interpreter's platlib/cgad (with torch in the same environment:
                                    ../nvidia/cu13/lib; the module's RPATH is $ORIGIN/<dir>, as torch's own are)
  command_rpath=<dir>               the same relative to the scripts directory (the `cgad` command's)
  archs=<list>                      the CUDA architectures as CMAKE_CUDA_ARCHITECTURES takes them: from
                                    TORCH_CUDA_ARCH_LIST when set (torch's extension builds read the same), else
                                    torch.cuda.get_arch_list() (what torch's wheel was built for; needs no GPU)

Exits 0 whatever torch is; a CUDA torch whose runtime or architectures cannot be found exits 1 with the reason."""
import os
import pathlib
import re
import sys
import sysconfig


def cuda_architectures(spec):
    """TORCH_CUDA_ARCH_LIST's "8.0 9.0+PTX" (spaces or semicolons) or get_arch_list's sm_80/compute_90 names as
    CMake's 80-real;90-real;90-virtual: SASS for each listed architecture, PTX only where asked for."""
    archs = []
    for item in re.split(r"[;\s]+", spec.strip()):
        if not item:
            continue
        torch_style = re.fullmatch(r"(\d+)\.(\d+)([a-z]?)(\+PTX)?", item)
        wheel_style = re.fullmatch(r"(sm|compute)_(\d+[a-z]?)", item)
        if torch_style:
            number = torch_style[1] + torch_style[2] + torch_style[3]
            archs.append(f"{number}-real")
            if torch_style[4]:
                archs.append(f"{number}-virtual")
        elif wheel_style:
            archs.append(f"{wheel_style[2]}-{'real' if wheel_style[1] == 'sm' else 'virtual'}")
        else:
            raise ValueError(f"not a CUDA architecture: {item!r} (expected e.g. 9.0, 9.0+PTX, sm_90 or compute_90)")
    if not archs:
        raise ValueError("no CUDA architecture listed")
    return ";".join(dict.fromkeys(archs))


def runtime_library(torch_dir, major):
    """The CUDA runtime torch uses: a copy in torch/lib (a build that bundles it), else the NVIDIA wheel's on
    sys.path (nvidia/cu13/lib for CUDA 13, nvidia/cuda_runtime/lib for CUDA 12)."""
    name = f"libcudart.so.{major}"
    candidates = sorted((torch_dir / "lib").glob(f"{name}*"))
    for entry in sys.path:
        candidates += sorted(pathlib.Path(entry or ".").glob(f"nvidia/*/lib/{name}"))
    if not candidates:
        raise LookupError(f"torch is built with CUDA {major} but no {name} is in torch/lib or nvidia/*/lib on "
                          "sys.path (install torch with its NVIDIA dependencies)")
    return candidates[0].resolve()


def main():
    try:
        import torch
    except ModuleNotFoundError:
        print("torch=none\ncuda=none")
        return 0
    except Exception as e:  # a torch that is there but does not load: no guess is made about it
        print(f"torch cannot be imported: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"torch={torch.__version__}")
    cuda = torch.version.cuda
    print(f"cuda={cuda or 'none'}")
    if not cuda:
        return 0
    torch_dir = pathlib.Path(torch.__file__).resolve().parent
    try:
        cudart = runtime_library(torch_dir, cuda.split(".")[0])
        archs = cuda_architectures(os.environ.get("TORCH_CUDA_ARCH_LIST") or " ".join(torch.cuda.get_arch_list()))
    except (LookupError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1
    print(f"cudart={cudart}")
    print(f"module_rpath={os.path.relpath(cudart.parent, pathlib.Path(sysconfig.get_path('platlib'), 'cgad'))}")
    print(f"command_rpath={os.path.relpath(cudart.parent, sysconfig.get_path('scripts'))}")
    print(f"archs={archs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
