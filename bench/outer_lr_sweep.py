#!/usr/bin/python3
"""The outer learning-rate sweep of docs/results/outer-lr.md: examples/diloco_torch.py's trainer (its model, text,
workers and staleness), run once per outer optimizer, outer lr and seed in this one process, and the final
held-out loss of each grid point as the mean over the seeds with a 95 % Student-t interval.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 nice -n 10 python bench/outer_lr_sweep.py --tau 4 \
        --outers cgad adam-decay adam pa-cgad --lrs 1e-3 1e-2 1e-1 --baselines nesterov:0.7 --seeds 0 1 2 \
        --json sweep.json -- --rounds 60

Arguments after `--` go to diloco_torch.py (its --rounds, --workers, --width, ...), the same in every run; the
sweep sets --outer, --outer-lr, --tau, --seed and --quiet itself. A run diverged when its final held-out loss is
not finite or not below its initial one; a grid point's mean and interval are over all its seeds, and are not
given (a dash) where a seed's loss is not finite. The best point is the Adam-family point of lowest mean with no
diverged seed; the points whose interval overlaps the best's are listed as the range that worked as well.
"""
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import atomic_file  # noqa: E402  (examples/, put on the path above)
import diloco_torch  # noqa: E402
from example_args import Parser, check_output, entry_point, integer, real  # noqa: E402

# Student t's 0.975 quantile for 1..30 degrees of freedom (any statistics table); past 30 the normal's 1.96 is
# within 2 % of it.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
SET_HERE = ("--outer", "--outer-lr", "--tau", "--seed", "--quiet")
BASELINES = ("nesterov", "sdm")


def interval(values):
    """(mean, half-width of its 95 % t-interval) of two or more values; the half-width is NaN for one value."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    t = T975[len(values) - 2] if len(values) - 1 <= len(T975) else 1.96
    return mean, t * statistics.stdev(values) / math.sqrt(len(values))


def baseline(text):
    name, _, lr = text.partition(":")
    if name not in BASELINES or not lr:
        raise ValueError(text)
    return name, real(at_least=0)(lr)


baseline.__name__ = "baseline (nesterov:LR or sdm:LR)"


def parse_args(argv):
    ours, theirs = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tau", type=integer(at_least=0), required=True, help="diloco_torch.py's --tau")
    p.add_argument("--outers", nargs="+", default=["cgad"], choices=sorted(set(diloco_torch.OUTER) - set(BASELINES)),
                   help="the Adam-family outer optimizers swept over --lrs")
    p.add_argument("--lrs", nargs="+", type=real(above=0), required=True, help="their outer lrs")
    p.add_argument("--baselines", nargs="*", type=baseline, default=[], help="momentum outers at one lr each")
    p.add_argument("--seeds", nargs="+", type=integer(at_least=0, at_most=2 ** 32 - 1), required=True)
    p.add_argument("--json", help="write every run (its losses per round, counts, seconds) there")
    args = p.parse_args(ours)
    for option in SET_HERE:
        if any(a == option or a.startswith(option + "=") for a in theirs):
            p.error(f"{option} is set by the sweep; give diloco_torch.py's other arguments after --")
    if args.json is not None:
        check_output(p, "--json", args.json, [diloco_torch.TEXT])
    args.trainer = theirs
    return args


def run(args, outer, lr, seed):
    argv = ["--outer", outer, "--outer-lr", repr(lr), "--tau", str(args.tau), "--seed", str(seed), "--quiet",
            *args.trainer]
    losses, counts, seconds = diloco_torch.train(diloco_torch.parse_args(argv))
    final = losses[-1]
    diverged = not (math.isfinite(final) and final < losses[0])
    print(f"tau {args.tau} {outer} lr {lr:g} seed {seed}: held-out loss {losses[0]:.4f} -> {final:.4f}"
          f"{' diverged' if diverged else ''}; {seconds:.1f} s", flush=True)
    return dict(outer=outer, lr=lr, seed=seed, tau=args.tau, argv=argv, losses=losses, final=final,
                diverged=diverged, counts=counts, seconds=seconds)


def table(points):
    """The markdown table, one row per (outer, lr), and the best Adam-family point with those that overlap it."""
    rows = ["| outer | lr | final held-out loss, mean ± 95 % | min – max | diverged |", "|---|---|---|---|---|"]
    stats = []
    for (outer, lr), runs in points.items():
        finals = [r["final"] for r in runs]
        diverged = sum(r["diverged"] for r in runs)
        if all(math.isfinite(f) for f in finals):
            mean, half = interval(finals)
            cell, span = f"{mean:.4f} ± {half:.4f}", f"{min(finals):.4f} – {max(finals):.4f}"
            if outer not in BASELINES and not diverged:
                stats.append((mean, half, outer, lr))
        else:
            cell, span = "—", "—"
        rows.append(f"| {outer} | {lr:g} | {cell} | {span} | {diverged}/{len(runs)} |")
    if stats:
        mean, half, outer, lr = min(stats)
        near = ", ".join(f"{o} {x:g}" for m, h, o, x in stats if abs(m - mean) <= h + half)
        rows += ["", f"best: {outer} lr {lr:g} ({mean:.4f} ± {half:.4f}); intervals overlapping it: {near}"]
    return "\n".join(rows)


def main(argv):
    args = parse_args(argv)
    points = {}
    for outer in args.outers:
        for lr in args.lrs:
            points[(outer, lr)] = [run(args, outer, lr, seed) for seed in args.seeds]
    for outer, lr in args.baselines:
        points[(outer, lr)] = [run(args, outer, lr, seed) for seed in args.seeds]
    print(table(points))
    if args.json:
        with atomic_file.replacing(args.json) as f:
            json.dump([r for runs in points.values() for r in runs], f)
    return 0


if __name__ == "__main__":
    entry_point(main)
