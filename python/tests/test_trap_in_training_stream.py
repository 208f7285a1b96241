"""examples/trap_in_training.py's --stream: a path that is one of the run's inputs (the --text, or the --cgad file;
by the same path, a `./` path, a hard or a symbolic link) is refused before anything is written, and the stream is
written atomically, so a full disk leaves an earlier stream as it was and ends in one line and exit status 2."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

TINY = ["--width", "8", "--heads", "2", "--layers", "1", "--context", "8", "--batch", "4", "--workers", "2",
        "--inner-steps", "2", "--rounds", "6", "--min-q8-size", "0"]
TEXT = "/usr/share/common-licenses/GPL-3"


def run_example(args, cwd=None):
    return subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "trap_in_training.py"), *TINY, *args],
                          capture_output=True, text=True, cwd=cwd, env=dict(os.environ), timeout=120)


def one_line(run):
    lines = run.stderr.splitlines()
    return len(lines) == 1 and lines[0].startswith("trap_in_training: ")


@pytest.mark.parametrize("name", ["same", "dot", "hardlink", "symlink"])
def test_a_stream_that_is_the_text_is_refused_and_the_text_kept(tmp_path, name):
    text = tmp_path / "text.txt"
    shutil.copyfile(TEXT, text)
    before = text.read_bytes()
    stream = {"same": str(text), "dot": "./text.txt", "hardlink": str(tmp_path / "hard"),
              "symlink": str(tmp_path / "soft")}[name]
    if name == "hardlink":
        os.link(text, stream)
    elif name == "symlink":
        os.symlink(text, stream)
    run = run_example(["--text", str(text), "--stream", stream], cwd=tmp_path)
    assert run.returncode == 2 and one_line(run), run.stderr
    assert "--stream" in run.stderr and "input" in run.stderr
    assert text.read_bytes() == before


def test_a_stream_that_is_the_cgad_file_is_refused(tmp_path):
    cgad = tmp_path / "cgad"
    shutil.copyfile(TEXT, cgad)  # any file: it is refused before the study would run it
    before = cgad.read_bytes()
    run = run_example(["--cgad", str(cgad), "--stream", str(cgad)])
    assert run.returncode == 2 and one_line(run), run.stderr
    assert cgad.read_bytes() == before


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs: room for a small earlier stream, not for the run's (about 300 KB)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True,
                           text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root and mount rights needed): {mount.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_leaves_an_earlier_stream_intact(tiny_disk):
    stream = tiny_disk / "s.jsonl"
    earlier = b'{"params": [1, 2], "tensors": [2]}\n{"grad": [0.5, 0.25], "tau": 0}\n'
    stream.write_bytes(earlier)
    run = run_example(["--stream", str(stream)])
    assert run.returncode == 2 and one_line(run), run.stderr
    assert "No space left on device" in run.stderr
    assert stream.read_bytes() == earlier
    assert sorted(os.listdir(tiny_disk)) == ["s.jsonl"]  # no temporary file left behind


def test_a_stream_replaces_an_earlier_one_through_a_link(tmp_path):
    target = tmp_path / "real.jsonl"
    target.write_text("earlier\n")
    link = tmp_path / "link.jsonl"
    os.symlink(target, link)
    run = run_example(["--stream", str(link)])
    assert run.returncode == 0, run.stderr
    assert link.is_symlink() and target.read_text().startswith('{"params": ')
