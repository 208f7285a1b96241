#!/usr/bin/python3
"""The outer learning-rate sweep of docs/results/outer-lr.md: examples/diloco_torch.py's trainer (its model, text,
workers and staleness), run once per outer optimizer, outer lr and seed in this one process, and the final
held-out loss of each grid point as the mean over the seeds with a 95 % Student-t interval.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 nice -n 10 python bench/outer_lr_sweep.py --tau 4 \
        --outers cgad adam-decay adam pa-cgad --lrs 1e-3 1e-2 1e-1 --baselines nesterov:0.7 --seeds 0 1 2 \
        --json sweep.json -- --rounds 60

    python bench/outer_lr_sweep.py --tables sweep.json other.json     # the tables of saved runs, together

Arguments after `--` go to diloco_torch.py (its --rounds, --workers, --width, ...), the same in every run; the
sweep sets --outer, --outer-lr, --tau, --seed and --quiet itself (`--outers` with no name runs the baselines
alone). A run diverged when its final held-out loss is not finite or not below its initial one; a grid point's
mean and interval are over all its seeds, and are not given (a dash) where a seed's loss is not finite. The best
point is the Adam-family point of lowest mean with no diverged seed; every point's difference from it is taken
seed by seed, and the stable points whose paired interval reaches 0 are listed as not above it.
"""
import collections
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import atomic_file  # noqa: E402  (examples/, put on the path above)
import diloco_torch  # noqa: E402
from example_args import Parser, check_output, entry_point, input_file, integer, real  # noqa: E402

# Student t's 0.975 quantile for 1..30 degrees of freedom (any statistics table); past 30 the normal's 1.96 is
# within 4 % of it (t = 2.040 at 31).
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


def read_runs(parser, path):
    """The runs a sweep's --json wrote; anything else is refused through parser.error."""
    try:
        with open(path) as f:
            runs = json.load(f)
        for r in runs:
            float(r["final"]), float(r["lr"]), int(r["tau"]), int(r["seed"]), bool(r["diverged"]), str(r["outer"])
            trainer(r)
        return runs
    except (OSError, ValueError, TypeError, KeyError) as e:
        parser.error(f"--tables {path} is not a sweep's --json: {type(e).__name__}: {e}")


def parse_args(argv):
    ours, theirs = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", nargs="+", metavar="JSON", type=input_file,
                   help="run nothing: print the tables of the runs that these --json files hold")
    p.add_argument("--tau", type=integer(at_least=0), help="diloco_torch.py's --tau")
    p.add_argument("--outers", nargs="*", default=["cgad"], choices=sorted(set(diloco_torch.OUTER) - set(BASELINES)),
                   help="the Adam-family outer optimizers swept over --lrs")
    p.add_argument("--lrs", nargs="*", type=real(above=0), default=[], help="their outer lrs")
    p.add_argument("--baselines", nargs="*", type=baseline, default=[], help="momentum outers at one lr each")
    p.add_argument("--seeds", nargs="+", type=integer(at_least=0, at_most=2 ** 32 - 1))
    p.add_argument("--json", help="write every run (its losses per round, counts, seconds) there")
    args = p.parse_args(ours)
    if args.tables:
        args.runs = [r for path in args.tables for r in read_runs(p, path)]
        seen = collections.Counter((r["tau"], trainer(r), r["outer"], r["lr"], r["seed"]) for r in args.runs)
        for (tau, _, outer, lr, seed), n in seen.items():
            if n > 1:  # a point's runs are told apart by their seed (table() pairs them by it)
                p.error(f"--tables hold seed {seed} of tau {tau} {outer} lr {lr:g} {n} times")
        return args
    if args.tau is None or not args.seeds:
        p.error("--tau and --seeds are needed (or --tables)")
    for option in ("outers", "lrs", "baselines", "seeds"):
        if len(set(getattr(args, option))) < len(getattr(args, option)):
            p.error(f"--{option} names a value twice")
    if not (args.outers and args.lrs) and not args.baselines:
        p.error("nothing to run: give --outers and --lrs, or --baselines")
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
    """The markdown table, one row per (outer, lr), and the best Adam-family point with those that do not differ
    from it. Each point is set beside the best seed by seed (the same seed is the same initialization, batches and
    delays for every lr): the paired difference's interval is far narrower than the two points' own, whose widths
    are mostly the seeds' shared spread."""
    finals = {point: {r["seed"]: r["final"] for r in runs} for point, runs in points.items()}
    eligible = [point for point, runs in points.items() if point[0] not in BASELINES
                and not any(r["diverged"] for r in runs)]
    best = min(eligible, key=lambda point: statistics.fmean(finals[point].values()), default=None)
    rows = ["| outer | lr | final held-out loss, mean ± 95 % | min – max | diverged | minus the best's, paired by "
            "seed |", "|---|---|---|---|---|---|"]
    near = []
    for point, runs in points.items():
        values = list(finals[point].values())
        diverged = sum(r["diverged"] for r in runs)
        cell = span = "—"
        paired = "(the best)" if point == best else "—"
        if all(math.isfinite(v) for v in values):
            cell, span = "{:.4f} ± {:.4f}".format(*interval(values)), f"{min(values):.4f} – {max(values):.4f}"
            if best is not None and point != best and finals[point].keys() == finals[best].keys():
                mean, half = interval([finals[point][s] - finals[best][s] for s in finals[best]])
                paired = f"{mean:+.4f} ± {half:.4f}"
                if point in eligible and mean - half <= 0:
                    near.append(point)
        rows.append(f"| {point[0]} | {point[1]:g} | {cell} | {span} | {diverged}/{len(runs)} | {paired} |")
    if best is not None:
        rows += ["", f"best: {best[0]} lr {best[1]:g}; not above it (paired interval reaching 0): "
                 + (", ".join(f"{o} {lr:g}" for o, lr in near) or "none")]
    return "\n".join(rows)


def trainer(run):
    """The diloco_torch.py arguments a run shares with every run of its sweep: its argv less what the sweep sets."""
    kept, argv = [], iter(run["argv"])
    for a in argv:
        if a in SET_HERE and a != "--quiet":
            next(argv, None)  # the option's value
        elif a != "--quiet":
            kept.append(a)
    return " ".join(kept)


def tables(runs):
    """table() for each τ and trainer arguments of the runs (those of one sweep, or of several --json files), rows
    by outer (the baselines last), then lr."""
    out = []
    outers = list(dict.fromkeys(r["outer"] for r in runs))
    for tau, args in sorted({(r["tau"], trainer(r)) for r in runs}):
        points = {}
        for r in sorted((r for r in runs if (r["tau"], trainer(r)) == (tau, args)),
                        key=lambda r: (r["outer"] in BASELINES, outers.index(r["outer"]), r["lr"])):
            points.setdefault((r["outer"], r["lr"]), []).append(r)
        out.append(f"tau {tau}, diloco_torch.py {args}:\n\n" + table(points))
    return "\n\n".join(out)


def main(argv):
    args = parse_args(argv)
    if args.tables:
        print(tables(args.runs))
        return 0
    runs = [run(args, outer, lr, seed) for outer in args.outers for lr in args.lrs for seed in args.seeds]
    runs += [run(args, outer, lr, seed) for outer, lr in args.baselines for seed in args.seeds]
    print(tables(runs))
    if args.json:
        with atomic_file.replacing(args.json) as f:
            json.dump(runs, f)
    return 0


if __name__ == "__main__":
    entry_point(main)
