#!/usr/bin/python3
"""The outer learning-rate tuning protocol of docs/results/tuning-protocol.md, run from `cgad simulate` sweeps.

For one driver (the `cgad simulate` flags that fix the problem: objective, depth, width, inner optimizer, outliers,
rounds), it runs the Adam family at tau = 0 with fp32 state on the tuning seeds over the lr grid, picks the lr of the
lowest mean final loss among the grid points where no tuning seed diverged or stalled (extending the grid past an
edge that wins), then checks that lr under each delay law and steps it down the grid until the tuning seeds' mean
final loss is below their mean initial loss. At tau = 0 Adam-Decay, CGAD (apply or skip) are the same optimizer
(sigma(0) = 1, the gate is 1), so one lr serves all three.

    simulate/experiments/tune_outer_lr.py --cgad build/apps/cgad/cgad --out tuned.json -- --size 64 --inner sgd ...
"""
import argparse
import json
import math
import shlex
import subprocess
import sys

GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]  # half-decade steps up to just above the default 0.02
TUNING_SEEDS = [1000, 1001, 1002, 1003]      # disjoint from every comparison seed set (0..15, 2000..2015)
DELAY_LAWS = {"heavy-tail": ["--delays", "heavy-tail", "--tau", "64"], "constant": ["--delays", "constant", "--tau", "8"]}
MAX_EXTENSIONS = 2


def grid_step(lr, direction):
    """The next point of the 1-3-10 grid above (+1) or below (-1) lr."""
    mantissa = round(lr / 10 ** math.floor(math.log10(lr) + 1e-9))
    step = (3 if mantissa == 1 else 10 / 3) if direction > 0 else (1 / 3 if mantissa == 3 else 0.3)
    return float(f"{lr * step:.1g}")


def summarize(sweep):
    """Mean final and initial loss over the tuning seeds of one `cgad simulate --json` sweep; None if any seed did
    not finish (diverged, stalled or unsupported: such an lr is not eligible)."""
    runs = sweep["runs"]
    if not runs or any(r["status"] != "finished" for r in runs):
        return None
    finals = [float.fromhex(r["final_loss"]) for r in runs]
    initials = [float.fromhex(r["initial_loss"]) for r in runs]
    return {"final_mean": sum(finals) / len(finals), "initial_mean": sum(initials) / len(initials)}


def pick(scored):
    """The rule: among eligible (lr, score) points, the lowest mean final loss; ties go to the smaller lr. Returns
    (lr, edge) where edge is -1/+1 when the winner is the smallest/largest point tried, else 0."""
    eligible = [(s["final_mean"], lr) for lr, s in scored.items() if s is not None]
    if not eligible:
        return None, -1
    best = min(eligible)[1]
    lrs = sorted(scored)
    return best, (-1 if best == lrs[0] else 1 if best == lrs[-1] else 0)


def simulate(cgad, driver, extra, lr):
    cmd = [cgad, "simulate", *driver, "--optimizer", "adam-decay", "--state", "fp32",
           "--seed", ",".join(map(str, TUNING_SEEDS)), "--lr", repr(lr), *extra, "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"tune_outer_lr: {shlex.join(cmd)} failed: {run.stderr.strip()}")
    return shlex.join(cmd), summarize(json.loads(run.stdout))


def tune(cgad, driver, log=print):
    record = {"driver": driver, "tuning_seeds": TUNING_SEEDS, "grid": {}, "commands": []}
    tau0 = ["--delays", "constant", "--tau", "0"]
    lrs = list(GRID)
    for extension in range(MAX_EXTENSIONS + 1):
        for lr in lrs:
            if repr(lr) not in record["grid"]:
                cmd, score = simulate(cgad, driver, tau0, lr)
                record["grid"][repr(lr)] = score
                record["commands"].append(cmd)
                log(f"tau=0 lr {lr:g}: {score}")
        best, edge = pick({float(k): v for k, v in record["grid"].items()})
        if best is None or edge == 0 or extension == MAX_EXTENSIONS:
            break
        lrs = [grid_step(best, edge)]
    record["tau0_lr"] = best
    record["tau0_edge"] = edge
    record["per_delay"] = {}
    for law, extra in DELAY_LAWS.items():
        lr, steps = best, []
        while lr is not None:
            cmd, score = simulate(cgad, driver, extra, lr)
            record["commands"].append(cmd)
            steps.append({"lr": lr, **(score or {"final_mean": None})})
            log(f"{law} lr {lr:g}: {score}")
            if score is not None and score["final_mean"] < score["initial_mean"]:
                break
            lower = grid_step(lr, -1)
            lr = lower if lower >= GRID[0] / 10 else None
        record["per_delay"][law] = {"lr": lr, "steps": steps}
    return record


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cgad", default="build/apps/cgad/cgad", help="the cgad binary")
    p.add_argument("--out", required=True, help="where the JSON record goes")
    p.add_argument("driver", nargs=argparse.REMAINDER, help="-- then the cgad simulate flags of the driver")
    args = p.parse_args(argv)
    driver = args.driver[1:] if args.driver[:1] == ["--"] else args.driver
    record = tune(args.cgad, driver, log=lambda s: print(s, file=sys.stderr))
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps({k: record[k] for k in ("tau0_lr", "tau0_edge")}
                     | {law: v["lr"] for law, v in record["per_delay"].items()}))


if __name__ == "__main__":
    main(sys.argv[1:])
