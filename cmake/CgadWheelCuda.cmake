# The CUDA part of a wheel build's module (pyproject.toml; docs/gpu.md, "Installing the Python package for a GPU";
# docs/design.md §7). `_cgad` runs inside torch's process on torch's pointers and streams, so where it has a CUDA
# backend that backend must use the CUDA runtime torch loads, for the architectures torch is built for. The rule,
# CGAD_CUDA (pyproject.toml passes the CGAD_CUDA environment variable, default auto):
#   off   no CUDA backend: nothing CUDA is compiled or linked, no nvcc is needed;
#   auto  the CUDA backend only when the build's interpreter imports a CUDA torch (torch.version.cuda set); pip's
#         build isolation hides the environment's torch, so an isolated `pip install .` is the CPU module;
#   on    the CUDA backend, and a build's interpreter without a CUDA torch is an error.
# With the backend: the module links torch's libcudart.so.<major> (cmake/torch_cuda.py finds it) with an RPATH
# relative to the environment, the kernels are compiled for torch's architectures, and nvcc's CUDA major must be
# torch's. The CMake build (scripts/build.sh, the `cgad` command, scripts/gpu-check.sh) is not a wheel build and keeps
# CGAD_ENABLE_CUDA's own rule: the machine's nvcc and its runtime.

# Sets, in the caller's scope, CGAD_WHEEL_CUDA (ON/OFF) and with ON: CGAD_WHEEL_CUDA_VERSION (torch.version.cuda),
# CGAD_WHEEL_CUDART (the runtime's path), CGAD_WHEEL_MODULE_RPATH and CGAD_WHEEL_COMMAND_RPATH (its folder from the
# installed module and command) and CGAD_WHEEL_CUDA_ARCHITECTURES. Stops the configure with the reason otherwise.
function(cgad_wheel_cuda mode python)
  string(TOLOWER "${mode}" mode)
  if(NOT mode MATCHES "^(auto|on|off)$")
    message(FATAL_ERROR "cgad: CGAD_CUDA must be auto, on or off, not '${mode}'")
  endif()
  set(CGAD_WHEEL_CUDA OFF PARENT_SCOPE)
  if(mode STREQUAL "off")
    message(STATUS "cgad: CGAD_CUDA=off: the module without a CUDA backend")
    return()
  endif()
  execute_process(COMMAND ${python} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/torch_cuda.py
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "cgad: CGAD_CUDA=${mode}: cannot tell which CUDA the torch of ${python} uses: ${err}")
  endif()
  foreach(key IN ITEMS torch cuda cudart module_rpath command_rpath archs)  # one line each (values hold ';')
    string(REGEX MATCH "(^|\n)${key}=([^\n]*)" _ "${out}")
    set(probe_${key} "${CMAKE_MATCH_2}")
  endforeach()
  if(probe_cuda STREQUAL "none")
    if(mode STREQUAL "on")
      message(FATAL_ERROR "cgad: CGAD_CUDA=on needs a CUDA torch importable by ${python}, found torch=${probe_torch} "
                          "(install the CUDA torch first and build with pip's --no-build-isolation)")
    endif()
    message(STATUS "cgad: CGAD_CUDA=auto and torch=${probe_torch} (no CUDA): the module without a CUDA backend")
    return()
  endif()
  message(STATUS "cgad: torch ${probe_torch} uses CUDA ${probe_cuda} (${probe_cudart}): the CUDA backend for "
                 "${probe_archs}")
  set(CGAD_WHEEL_CUDA ON PARENT_SCOPE)
  set(CGAD_WHEEL_CUDA_VERSION "${probe_cuda}" PARENT_SCOPE)
  set(CGAD_WHEEL_CUDART "${probe_cudart}" PARENT_SCOPE)
  set(CGAD_WHEEL_MODULE_RPATH "${probe_module_rpath}" PARENT_SCOPE)
  set(CGAD_WHEEL_COMMAND_RPATH "${probe_command_rpath}" PARENT_SCOPE)
  set(CGAD_WHEEL_CUDA_ARCHITECTURES "${probe_archs}" PARENT_SCOPE)
endfunction()

# nvcc compiles against its own toolkit's headers and the module runs on torch's runtime: their CUDA majors (the
# runtime's soname) must agree.
function(cgad_wheel_check_nvcc nvcc nvcc_version torch_cuda)
  string(REGEX MATCH "^[0-9]+" nvcc_major "${nvcc_version}")
  string(REGEX MATCH "^[0-9]+" torch_major "${torch_cuda}")
  if(NOT nvcc_major STREQUAL torch_major)
    message(FATAL_ERROR "cgad: torch is built with CUDA ${torch_cuda} but ${nvcc} is CUDA ${nvcc_version}: set "
                        "CUDACXX to an nvcc of CUDA ${torch_major} (e.g. from the nvidia-cuda-nvcc wheel of that "
                        "release), or CGAD_CUDA=off for the module without a CUDA backend")
  endif()
endfunction()
