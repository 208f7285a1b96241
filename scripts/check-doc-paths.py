#!/usr/bin/env python3
"""The docs' file names are true (CTest `doc_paths_check`, label ci): every repository path the Markdown files name in
backticks exists, and every citation of a doc in the code's comments (`docs/<name>.md`, `docs/design.md §N`,
`docs/python.md, "Copies"`) names a doc, a section and a title that exist. A name in backticks is the repository's, and checked, when it starts at a top-level
entry of the repository (`fastpath/src/engine.cpp`: it must exist there; `core/gate.hpp`, a part's public
header, as core/include/cgad/core/gate.hpp), at an include path (`cgad/...`: under a
part's include/ or python/), at a folder the docs shorten (`detail/...`, `src/...`: the tail of a path), or is a bare
source file name (`step_planner.cpp`: some file has it). Other projects' files and what a build or a user makes are
not the repository's: paths outside those forms are not checked, and bare names of that kind are in FOREIGN.
Usage: check-doc-paths.py [SOURCE_DIR]; prints each bad name, exits 1 if there is one."""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
SKIPPED_DIRS = {".git", "__pycache__"}
SOURCE_NAMES = (".cpp", ".hpp", ".h", ".cu", ".py", ".pyi", ".cmake")  # a bare name with these is a file's
SHORTENED = ("detail", "src")  # folders the docs name from inside a part: checked as the tail of a path
CITING = (".cpp", ".hpp", ".h", ".cu", ".py", ".pyi", ".cmake", ".sh", ".toml", ".md")  # comments that cite docs
# Bare file names the docs give from other projects or from what a build, a run or a user makes.
FOREIGN = {"setup.py", "optimizer.py", "quant_utils.py", "mpfr.h", "gmp.h"}
# Names of the repository's form that docs/testing.md gives for a defect it records, and that are gone by design.
GONE = {
    "python/cgad.egg-info",  # what `pip install .` once left in the tree
    "detail/portable.hpp",   # portable.hpp's home before the public headers stopped including detail/
}


def walk():
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if rel.parts[0].startswith("build") or any(p in SKIPPED_DIRS for p in rel.parts):
            continue  # build trees (build/, build-venv/, ...) are made, not kept
        yield rel, path.is_dir()


def checked_name(span):
    """The path a backticked span names, if it is one this check is about, else None."""
    span = span.strip().rstrip(":,")
    name = re.sub(r"/(…|\.\.\.)$", "/", span).rstrip(".")  # `agent/…`: the folder agent/, checked as one
    if not re.fullmatch(r"[\w.\-/]+", name) or name.startswith(("-", "/", ".")) or "//" in name:
        return None
    return name if name.endswith("/") and name != span else name.rstrip("/")


def main():
    entries = list(walk())
    names = {str(rel) for rel, _ in entries}
    tails = set()
    for rel, _ in entries:
        parts = rel.parts
        for i in range(len(parts)):
            tails.add("/".join(parts[i:]))
    bad = []

    top = {rel.parts[0] for rel, _ in entries}
    basenames = {rel.name for rel, _ in entries}
    folders = {"/".join(rel.parts[i:]) for rel, is_dir in entries if is_dir for i in range(len(rel.parts))}
    includes = {"/".join(rel.parts[i:]) for rel, _ in entries for i, part in enumerate(rel.parts)
                if part == "cgad" and i > 0 and rel.parts[i - 1] in ("include", "python")}

    def problem(name):
        if name in GONE:
            return None
        if name.endswith("/"):  # a folder elided (`x/…`): a folder of that name, or that tail, exists
            return None if name.rstrip("/") in folders else "is the tail of no folder of the repository"
        first = name.split("/")[0]
        if first in top:
            # `core/gate.hpp` is the docs' and comments' short name of core/include/cgad/core/gate.hpp.
            header = f"{first}/include/cgad/{name}"
            return None if name in names or header in names else "names no file or folder of the repository"
        if first == "cgad" and "/" in name:
            return None if name in includes else "names no header or module under a part's include/ or python/"
        if first in SHORTENED and "/" in name:
            return None if name in tails else "is the tail of no path of the repository"
        if "/" not in name and name.endswith(SOURCE_NAMES) and name not in FOREIGN:
            return None if name in basenames else "names no file of the repository"
        return None

    for rel, is_dir in entries:
        if is_dir:
            continue
        text = (ROOT / rel).read_text(errors="replace") if rel.suffix in CITING or rel.name == "CMakeLists.txt" \
            else None
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if rel.suffix == ".md":
                for span in re.findall(r"`([^`\n]+)`", line):
                    name = checked_name(span)
                    why = name and problem(name)
                    if why:
                        bad.append(f"{rel}:{n}: `{name}` {why}")
            for doc in re.findall(r"\bdocs/[\w./-]*\w\.md\b", line):
                if doc not in names:
                    bad.append(f"{rel}:{n}: cites {doc}, which does not exist")
            for section in re.findall(r"\bdocs/design\.md,? §\s?(\d+)", line):
                if not design_section(int(section)):
                    bad.append(f"{rel}:{n}: cites docs/design.md §{section}, which it has not")
            # A part cited by its title (`docs/python.md, "Copies"`): the title is in that doc.
            for doc, title in re.findall(r"\b(docs/[\w./-]*\w\.md),? (?:§\s?\d+,? )?\(?\"([^\"]+)\"", line):
                if doc in names and title.replace("`", "") not in doc_text(doc):  # the doc text is read without backticks
                    bad.append(f"{rel}:{n}: cites {doc}, \"{title}\", a title that doc has not")
    for line in bad:
        print(line)
    print(f"check-doc-paths: {len(bad)} bad name(s)" if bad else "check-doc-paths: every named path exists")
    return 1 if bad else 0


_SECTIONS = None
_DOCS = {}


def doc_text(doc):
    if doc not in _DOCS:
        _DOCS[doc] = (ROOT / doc).read_text(errors="replace").replace("`", "")  # "Edits of opt.state" is a title
    return _DOCS[doc]


def design_section(number):
    global _SECTIONS
    if _SECTIONS is None:
        text = (ROOT / "docs" / "design.md").read_text()
        _SECTIONS = {int(m) for m in re.findall(r"^## (\d+)\.", text, flags=re.M)}
    return number in _SECTIONS


if __name__ == "__main__":
    sys.exit(main())
