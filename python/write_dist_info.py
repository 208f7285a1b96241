"""Writes cgad-<version>.dist-info (METADATA, INSTALLER, top_level.txt) into a folder, from the repository's
pyproject.toml and VERSION, so that the CMake build tree (build/python) and `cmake --install` answer
importlib.metadata as a pip install does: the same version and the same requirements, from the same sources.
Run by python/CMakeLists.txt at configure time:  write_dist_info.py SOURCE_DIR OUT_DIR

No RECORD is written: files CMake installed are removed with CMake's install_manifest.txt, not by pip.
"""
import pathlib
import shutil
import sys
import tomllib


def main(source, out):
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    version = (source / "VERSION").read_text().strip()
    for stale in out.glob(f"{project['name']}-*.dist-info"):
        shutil.rmtree(stale)
    info = out / f"{project['name']}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}",
             f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}"]
    lines += [f"Requires-Dist: {r}" for r in project["dependencies"]]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r} ; extra == "{extra}"' for r in requirements]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("cmake\n")
    (info / "top_level.txt").write_text("cgad\n")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
