"""Writing an example's output file atomically: the whole new file or the old one, never a truncated mix (a full
disk, a killed run), as the `cgad` command writes its outputs (docs/design.md §7).

    with atomic_file.replacing(path) as f:
        f.write(...)

cgad's own writer (python/cgad/_atomic.py, which the parameter server's checkpoint uses too): a temporary file in
the destination's folder, flushed and fsynced, then os.replace; on any error the temporary file is removed and the
destination is as it was. A destination that is a link is written through: the file it names is replaced and
the link stays.
"""
from cgad._atomic import replacing

__all__ = ["replacing"]
