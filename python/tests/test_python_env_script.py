"""scripts/python-env.sh refuses before rm or pip runs: --help prints its usage (exit 0), an unknown option or a
second folder is one line and exit status 2, a relative folder is the caller's (not the checkout's), and only a
folder the script made is replaced -- a user's own venv, or any other folder, is left as it is. No case installs
anything: pip is pointed at no index and no wheel, so a run that wrongly got past the guards would fail there."""
import os
import subprocess

import pytest

from conftest import SOURCE_DIR

SCRIPT = SOURCE_DIR / "scripts" / "python-env.sh"


def run(*args, cwd, download=True):
    """(status, stdout, stderr) of the script, offline: with `download`, the wheel check passes (consent to
    download) and pip, with no index, would fail at once; without, the script stops at the wheel check."""
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS=str(cwd / "no-wheels"), PIP_NO_INDEX="1")
    env.pop("CGAD_TORCH_DOWNLOAD", None)
    if download:
        env["CGAD_TORCH_DOWNLOAD"] = "1"
    out = subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


def user_venv(folder):
    """A venv the user made: pyvenv.cfg, an interpreter link, a file of theirs. Returns its files and contents."""
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / "bin" / "python").symlink_to("/usr/bin/python3")
    (folder / "mine.txt").write_text("the user's work\n")
    return snapshot(folder)


def snapshot(folder):
    return {p.relative_to(folder): (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def refused(status, stderr, *words):
    assert status == 2, stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("python-env: "), stderr
    for word in words:
        assert word in stderr, stderr


def test_help_prints_the_usage(tmp_path):
    status, out, err = run("--help", cwd=tmp_path)
    assert status == 0, err
    assert "scripts/python-env.sh [DIR]" in out and "scripts/python-env.sh --help" in out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,words", [
    (["--bogus"], ["unknown option '--bogus'"]),
    (["-x", "dir"], ["unknown option '-x'"]),
    (["one", "two"], ["one folder only", "'one'", "'two'"]),
    ([""], ["empty name"]),
])
def test_a_bad_argument_is_one_line_and_exit_status_2(tmp_path, args, words):
    refused(*run(*args, cwd=tmp_path)[::2], *words)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative to the caller"])
def test_a_users_venv_is_never_replaced(tmp_path, relative):
    folder = tmp_path / "cgad-test-user-venv"
    before = user_venv(folder)
    status, _, err = run("cgad-test-user-venv" if relative else str(folder), cwd=tmp_path)
    refused(status, err, str(folder), "was not made by scripts/python-env.sh")
    assert snapshot(folder) == before
    assert not (SOURCE_DIR / "cgad-test-user-venv").exists()


def test_a_folder_of_anything_else_is_never_replaced(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "table.csv").write_text("1,2\n")
    refused(*run(str(folder), cwd=tmp_path)[::2], str(folder), "was not made by")
    assert (folder / "table.csv").read_text() == "1,2\n"


@pytest.mark.parametrize("marker", [".cgad-python-env", ".cgad-requirements.sha256"])
def test_a_folder_the_script_made_passes_the_guard(tmp_path, marker):
    """Its own venv (a mark, or the stamp of an older run) is the script's to replace: it goes on to the wheel
    check, which stops it here (no wheel, no consent), with the folder still there."""
    folder = tmp_path / "venv"
    user_venv(folder)
    (folder / marker).write_text("stale\n")
    status, _, err = run(str(folder), cwd=tmp_path, download=False)
    refused(status, err, "no CPU wheel of torch")
    assert (folder / "mine.txt").exists()
