#!/usr/bin/python3
"""The trap experiment of docs/results/paper-claims.md: per driver and delay law, Adam-Decay and CGAD (applying and
skipping zero-gated events) with fp32 state, bitsandbytes' 8-bit state (dynamic v map) and the zero-free v map, at
the outer lr docs/results/tuning-protocol.md chose; then the tables the verdict cites.

    trap_experiment.py run --cgad CGAD --tuned tuned.json --out DIR [--seed LIST] [--problem-seed N] [--laws L]
        -- DRIVER...
    trap_experiment.py tables|summary DIR...

`run` writes one `cgad simulate --json` file per sweep (the state axis fp32,q8 in one sweep, so the q8/fp32 sigma
ratio and its permutation test come from cgad's own statistics; the zero-free map and the skip policy are flags of a
sweep, not axes, so they are sweeps of their own). `tables` prints every cell, `summary`
the verdict's numbers per run and delay law, as the markdown the docs carry.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

from tune_outer_lr import DELAY_LAWS

SEEDS = ",".join(str(s) for s in range(16))
Q8 = ["--q8-semantics", "bnb", "--min-q8-size", "1024"]
SWEEPS = {  # name: (flags, delay laws it runs under)
    "dynamic": (["--optimizer", "adam-decay,cgad", "--state", "fp32,q8", *Q8, "--v-map", "dynamic"],
                ("heavy-tail", "constant")),
    "zero-free": (["--optimizer", "adam-decay,cgad", "--state", "q8", *Q8, "--v-map", "zero-free"],
                  ("heavy-tail", "constant")),
    # With tau <= 8 < tau_cut no gate is 0, so skipping is applying: only the heavy-tailed law can tell them apart.
    "skip": (["--optimizer", "cgad", "--on-zero-gate", "skip", "--state", "fp32,q8", *Q8], ("heavy-tail",)),
}


def run(args, driver):
    with open(args.tuned) as f:
        tuned = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    for law, extra in DELAY_LAWS.items():
        if law not in args.laws.split(","):
            continue
        lr = tuned["per_delay"][law]["lr"]
        if lr is None:
            sys.exit(f"trap_experiment: the protocol found no lr for {law} in {args.tuned}")
        for name, (flags, laws) in SWEEPS.items():
            if law not in laws:
                continue
            cmd = [args.cgad, "simulate", *driver, *flags, *extra, "--lr", repr(lr), "--seed", args.seed,
                   "--problem-seed", str(args.problem_seed), "--json"]
            path = os.path.join(args.out, f"{law}-{name}.json")
            print(shlex.join(cmd), file=sys.stderr)
            with open(path + ".tmp", "w") as out:
                subprocess.run(cmd, stdout=out, check=True)
            os.replace(path + ".tmp", path)
            with open(os.path.join(args.out, "commands.txt"), "a") as log:
                log.write(shlex.join(cmd) + "\n")


def tensor_traps(sweep, cell):
    """Per tensor over the cell's finished runs: mean v = 0 share, mean m = 0 share, mean share of steps past 5 lr,
    largest step / lr."""
    runs = [r for r in sweep["runs"] if r["status"] == "finished" and
            all(r[k] == cell[k] for k in ("method", "tau", "size", "state"))]
    out = {}
    for r in runs:
        for t in r.get("tensor_traps", []):
            acc = out.setdefault(t["name"], {"v0": 0.0, "m0": 0.0, "over5": 0.0, "max": 0.0, "n": 0})
            acc["v0"] += float.fromhex(t["v_zero_fraction"])
            acc["m0"] += float.fromhex(t["m_zero_fraction"])
            acc["over5"] += float.fromhex(t["step_over_5lr_fraction"])
            acc["max"] = max(acc["max"], float.fromhex(t["max_step_over_lr"]))
            acc["n"] += 1
    return {k: {"v0": a["v0"] / a["n"], "m0": a["m0"] / a["n"], "over5": a["over5"] / a["n"], "max": a["max"]}
            for k, a in out.items()}


def fmt(x):
    return "–" if x is None else f"{x:.3g}"


def tables(dirs):
    print("| run | law | sweep | method | state | final loss [95 %] | σ [95 %] | 8-bit tensors: v=0 / m=0 share, "
          "largest step/η | σ tests (ratio, p) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in dirs:
        for law in DELAY_LAWS:
            for name in SWEEPS:
                path = os.path.join(d, f"{law}-{name}.json")
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    sweep = json.load(f)
                tests = {}
                for c in sweep["sigma_comparisons"]:
                    tests.setdefault(c["cell"], []).append(f"{c['axis']} {c['sigma_ratio']:.2f}, p {c['p_value']:.2g}")
                for i, cell in enumerate(sweep["cells"]):
                    traps = tensor_traps(sweep, cell)
                    q8 = [f"{n} {t['v0']:.2g}/{t['m0']:.2g}, {t['max']:.3g}" for n, t in traps.items()
                          if cell["state"] == "q8" and (n.startswith("W") or n == "w3")]
                    lo, hi = cell["final_loss_mean_ci95"]
                    slo, shi = cell["final_loss_stddev_ci95"]
                    note = f" ({cell['note']})" if cell["note"] else ""
                    print(f"| {os.path.basename(d.rstrip('/'))} | {law} | {name} | {cell['method']} | {cell['state']} | "
                          f"{fmt(cell['final_loss_mean'])} [{fmt(lo)}, {fmt(hi)}]{note} | "
                          f"{fmt(cell['final_loss_stddev'])} [{fmt(slo)}, {fmt(shi)}] | {'; '.join(q8) or '–'} | "
                          f"{'; '.join(tests.get(i, [])) or '–'} |")


def load(d, law, name):
    path = os.path.join(d, f"{law}-{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def find(sweep, method, state):
    """The index and cell of (method, state) in a sweep (one tau and size per sweep here)."""
    for i, c in enumerate(sweep["cells"]):
        if c["method"] == method and c["state"] == state:
            return i, c
    raise KeyError((method, state))


def test(sweep, i, axis):
    for c in sweep["sigma_comparisons"]:
        if c["cell"] == i and c["axis"] == axis:
            return f"{c['sigma_ratio']:.2f} (p {c['p_value']:.2g})"
    return "–"


def summary(dirs):
    """One row per (run, delay law): the verdict's numbers. Trap columns are the first 8-bit matrix's (W1), largest
    step over every tensor; sigma ratios with their permutation p from cgad's own sigma_comparisons."""
    print("| run | law | W1 v=0 share (q8) | largest step/η: q8 / zero-free | Adam-Decay loss: fp32 / q8 / zero-free | "
          "σ q8/fp32: Adam-Decay, CGAD | σ CGAD/Adam-Decay: fp32, q8 | σ skip: q8/fp32 |")
    print("|---|---|---|---|---|---|---|---|")
    for d in dirs:
        for law in DELAY_LAWS:
            dyn, zf, skip = (load(d, law, n) for n in SWEEPS)
            if dyn is None:
                continue
            ia, ad_q8 = find(dyn, "adam-decay", "q8")
            _, ad_fp = find(dyn, "adam-decay", "fp32")
            ic, _ = find(dyn, "cgad", "q8")
            icf, _ = find(dyn, "cgad", "fp32")
            traps = tensor_traps(dyn, ad_q8)
            zf_traps = tensor_traps(zf, find(zf, "adam-decay", "q8")[1]) if zf else {}
            biggest = lambda t: max((x["max"] for x in t.values()), default=float("nan"))
            zf_loss = fmt(find(zf, "adam-decay", "q8")[1]["final_loss_mean"]) if zf else "–"
            skip_test = test(skip, find(skip, "cgad", "q8")[0], "state") if skip else "–"
            print(f"| {os.path.basename(d.rstrip('/'))} | {law} | {traps['W1']['v0']:.3g} | "
                  f"{biggest(traps):.3g} / {biggest(zf_traps):.3g} | {fmt(ad_fp['final_loss_mean'])} / "
                  f"{fmt(ad_q8['final_loss_mean'])} / {zf_loss} | {test(dyn, ia, 'state')}, {test(dyn, ic, 'state')} | "
                  f"{test(dyn, icf, 'method')}, {test(dyn, ic, 'method')} | {skip_test} |")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--cgad", default="build/apps/cgad/cgad")
    r.add_argument("--tuned", required=True, help="tune_outer_lr.py's record for this driver")
    r.add_argument("--out", required=True)
    r.add_argument("--seed", default=SEEDS, help="comparison run seeds (default 0..15)")
    r.add_argument("--problem-seed", type=int, default=0)
    r.add_argument("--laws", default=",".join(DELAY_LAWS), help="the delay laws to run (default all)")
    r.add_argument("driver", nargs=argparse.REMAINDER)
    t = sub.add_parser("tables")
    t.add_argument("dirs", nargs="+")
    m = sub.add_parser("summary")
    m.add_argument("dirs", nargs="+")
    args = p.parse_args(argv)
    if args.command == "run":
        run(args, args.driver[1:] if args.driver[:1] == ["--"] else args.driver)
    elif args.command == "tables":
        tables(args.dirs)
    else:
        summary(args.dirs)


if __name__ == "__main__":
    main(sys.argv[1:])
