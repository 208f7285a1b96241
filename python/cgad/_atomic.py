"""Writing a file atomically: the whole new file or the old one, never a truncated mix (a full disk, a killed
process), as the `cgad` command writes its outputs (docs/design.md §7).

    with cgad._atomic.replacing(path, "wb") as f:
        f.write(...)

The content goes to a temporary file in the destination's folder (os.replace is atomic only within one
filesystem), is flushed and fsynced, and replaces the destination; on any error the temporary file is removed and
the destination is as it was. A destination that is a link is written through: the file it names is replaced and
the link stays. The examples' output files (examples/atomic_file.py) and the parameter server's checkpoint
(cgad.torch.parameter_server) are written so."""
import contextlib
import glob
import os
import stat
import tempfile


@contextlib.contextmanager
def replacing(path, mode="w"):
    """The file to write (``mode`` "w" for text, "wb" for bytes), replacing ``path`` once the block ends."""
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            try:  # the replaced file keeps its permissions (mkstemp's are 0600)
                os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def remove_leftovers(folder, name="*"):
    """Removes what replacing() leaves behind when its process is killed mid-write: the temporary files of ``name``
    (a file name, or a glob of file names) in ``folder``. Only those: replacing()'s own ".NAME.XXXXXXXX.tmp"."""
    for leftover in glob.glob(os.path.join(glob.escape(folder), f".{name}.*.tmp")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(leftover)
