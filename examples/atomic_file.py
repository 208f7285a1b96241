"""Writing an example's output file atomically: the whole new file or the old one, never a truncated mix (a full
disk, a killed run), as the `cgad` command writes its outputs (docs/design.md §7).

    with atomic_file.replacing(path) as f:
        f.write(...)

The text goes to a temporary file in the destination's folder (os.replace is atomic only within one
filesystem), is flushed and fsynced, and replaces the destination; on any error the temporary file is removed and
the destination is as it was. A destination that is a link is written through: the file it names is replaced and
the link stays.
"""
import contextlib
import os
import stat
import tempfile


@contextlib.contextmanager
def replacing(path):
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
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
