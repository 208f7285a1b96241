"""The examples' argument checks, shared: bad input ends in one line on stderr and exit status 2, as the `cgad`
command's does (docs/design.md §7, the `cgad` command), never a traceback from deep inside a run.

    p = Parser(description=...)
    p.add_argument("--timeout", type=real(above=0), default=120.0)
    p.add_argument("--rounds", type=integer(at_least=1), default=6)
    p.add_argument("--text", type=input_file, default=TEXT)

A number type refuses NaN and +-Inf (which pass a `<` check unnoticed) and a value outside its range, saying the
range in words and what was written; an input file must be a readable regular file.
"""
import argparse
import math
import os
import stat
import sys
from fractions import Fraction


class Parser(argparse.ArgumentParser):
    """argparse whose refusals are one line, `NAME: error: MESSAGE`, and exit status 2, as the `cgad` command's are
    (argparse's own prints the usage first, several lines). NAME is the script's name without `.py`, the name the
    examples' other messages start with."""

    def __init__(self, **kwargs):
        kwargs.setdefault("prog", os.path.splitext(os.path.basename(sys.argv[0]))[0])
        super().__init__(**kwargs)

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def _range_words(at_least, above, at_most):
    bounds = ((">=", at_least), (">", above), ("<=", at_most))
    return " and ".join(f"{op} {bound:g}" if isinstance(bound, float) else f"{op} {bound}"
                        for op, bound in bounds if bound is not None)


def real(at_least=None, above=None, at_most=None):
    """An argparse type: a finite float in the given range (bounds included for at_least/at_most)."""
    bounds = _range_words(at_least, above, at_most)
    want = "a finite number" + (f" {bounds}" if bounds else "")

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
        if not (math.isfinite(value) and (at_least is None or value >= at_least) and (above is None or value > above)
                and (at_most is None or value <= at_most)):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


def integer(at_least=None, at_most=None):
    """An argparse type: an integer in [at_least, at_most] (either end open when None)."""
    bounds = _range_words(at_least, None, at_most)
    want = "an integer" + (f" {bounds}" if bounds else "")

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
        if (at_least is not None and value < at_least) or (at_most is not None and value > at_most):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text}")
        return value

    parse.__name__ = "integer"
    return parse


def input_file(path):
    """An argparse type: a path naming a readable regular file (a link to one is followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"cannot read {path}: permission denied")
    return path


def check_output(parser, option, path, inputs):
    """Refuses (through parser.error) an output path that would destroy what the run reads or cannot be written:
    the same file as any of `inputs` (by device and inode, so a second name, a `./` path or a link to it is the
    same), a folder, or a path whose folder does not exist."""
    for other in inputs:
        if other is not None and os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other):
            parser.error(f"{option} {path} is the input {other}; writing it would destroy what the run reads")
    if os.path.isdir(path):
        parser.error(f"{option} {path} is a folder")
    folder = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(folder):
        parser.error(f"{option} {path}: its folder {folder} does not exist")


def available_memory():
    """Bytes the kernel reports it can give without swapping (/proc/meminfo's MemAvailable), or None where there is
    no such file (not Linux): the memory checks below are then skipped."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(parser, what, need):
    """Refuses (through parser.error) a run whose peak, estimated from below as `need` bytes, exceeds the memory available now,
    naming `what` set it, instead of letting it be killed, or swap, hours into its run."""
    have = available_memory()
    if have is not None and need > have:
        parser.error(f"{what} would need at least {need / 2 ** 30:.3g} GiB, more than the {have / 2 ** 30:.3g} GiB "
                     "available now")


def quadratic_count(width, count, widths=(1, 2, 3)):
    """count(width) for a count quadratic in the width -- the parameters of every example's model: width x width
    weights, width-long biases and embeddings, constants -- from count at three small widths (exact, by Lagrange's
    formula), so that a model too large to build is measured without building it."""
    total = Fraction(0)
    for i, w_i in enumerate(widths):
        term = Fraction(count(w_i))
        for j, w_j in enumerate(widths):
            if j != i:
                term *= Fraction(width - w_j, w_i - w_j)
        total += term
    return int(total)


def check_cgad(parser, build):
    """Refuses (through parser.error) what cgad refuses, before any work: `build()` makes the run's cgad optimizer
    with the run's values over a placeholder parameter, so that cgad's own checks (cgad.InputError: an --outer-lr
    or --alpha past cgad's range, a --tau-cut past 2^24) end the run in one line now, not in a traceback from a
    worker minutes into it."""
    from cgad import InputError
    try:
        build()
    except InputError as e:
        parser.error(str(e))


def entry_point(main):
    """The examples' entry point: exits with main(sys.argv[1:])'s status. A cgad.InputError that reaches it -- a
    value or a file cgad refuses that only the run finds -- is one line, `NAME: MESSAGE`, and exit status 2, as
    the `cgad` command's refusals are, not a traceback."""
    from cgad import InputError
    try:
        status = main(sys.argv[1:])
    except InputError as e:
        print(f"{os.path.splitext(os.path.basename(sys.argv[0]))[0]}: {e}", file=sys.stderr)
        sys.exit(2)
    sys.exit(status)


# A seed every example hands to torch.manual_seed, torch.Generator and random.Random, also after the arithmetic
# they do on it (seed * 1000 + k): torch takes at most 2^64 - 1.
SEED = integer(at_least=0, at_most=2 ** 32 - 1)


def read_corpus(parser, path, context, workers):
    """The text of a character-level example, read once; refuses (through parser.error) a --context the text
    cannot serve. The examples hold out the last tenth and shard the first nine tenths over the workers, and draw
    windows of context + 1 characters from each part: each part must hold context + 2 (torch.randint needs a
    nonempty range of window starts)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        parser.error(f"cannot read {path}: {e.strerror or e}")
    split = len(text) * 9 // 10
    shortest = min(split // workers, len(text) - split)  # a shard holds at least floor(split / workers)
    if shortest < context + 2:
        parser.error(f"--context must be at most {max(shortest - 2, 0)} for the text {path} and --workers {workers} "
                     f"(its shortest part, a worker's shard or the held-out tenth, holds {shortest} characters), "
                     f"got {context}")
    return text


# Seconds a distributed example may wait for one message, quorum or transfer: torch turns the timedelta into C++
# milliseconds (a huge float overflowed it with a traceback); 10^6 s, 11.6 days, is longer than any run here.
TIMEOUT = real(above=0, at_most=1e6)
