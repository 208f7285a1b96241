"""bench/outer_lr_sweep.py, the outer-lr sweep of docs/results/outer-lr.md, on a grid small enough to run in
seconds: every (outer, lr, seed) is trained once by examples/diloco_torch.py's trainer, the table's mean and
interval and its paired difference from the best point are those of the runs it printed, a diverged run is
counted, --json holds every run and --tables prints the same tables from it, and the arguments the sweep sets
itself are refused in one line."""
import importlib.util
import json
import math
import re
import statistics
import subprocess
import sys

from conftest import SOURCE_DIR

SCRIPT = SOURCE_DIR / "bench" / "outer_lr_sweep.py"
TINY = ["--", "--rounds", "2", "--workers", "2", "--inner-steps", "2", "--batch", "8"]


def sweep(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_the_table_is_the_runs_it_printed(tmp_path):
    out = sweep("--tau", "2", "--outers", "cgad", "pa-cgad", "--lrs", "0.01", "1e9", "--baselines", "nesterov:0.7",
                "--seeds", "0", "1", "--json", str(tmp_path / "runs.json"), *TINY)
    assert out.returncode == 0, out.stderr[-2000:]
    finals = {}
    for outer, lr, seed, before, after, diverged in re.findall(
            r"^tau 2 (\S+) lr (\S+) seed (\d): held-out loss (\S+) -> (\S+)( diverged)?;", out.stdout, re.M):
        finals.setdefault((outer, float(lr)), {})[int(seed)] = float(after)
        assert bool(diverged) == (not float(after) < float(before)), out.stdout
    assert sorted(finals) == sorted([("cgad", 0.01), ("cgad", 1e9), ("pa-cgad", 0.01), ("pa-cgad", 1e9),
                                     ("nesterov", 0.7)])
    # An lr of 1e9 moves every parameter by about 1e9 in its first outer step: both seeds diverge, and the best
    # point is the better of the two Adam-family points at 0.01.
    best = min([("cgad", 0.01), ("pa-cgad", 0.01)], key=lambda point: sum(finals[point].values()))
    assert re.search(rf"^best: {best[0]} lr 0\.01; ", out.stdout, re.M), out.stdout
    # Student t's 0.975 quantile for one degree of freedom (two seeds) is 12.706. The runs' losses are printed to
    # 4 decimals (each off by <= 5e-5), so a mean or a difference recomputed from them is off by <= 1e-4 and,
    # printed, by <= 1.5e-4; two seeds' half-width is 12.706 |a - b| / 2, off by <= 12.706 * 2e-4 / 2 + 5e-5.
    mean_tol, half_tol = 1.5e-4, 12.706 * 2e-4 / 2 + 5e-5
    for (outer, lr), by_seed in finals.items():
        values = list(by_seed.values())
        name = rf"^\| {outer} \| {re.escape(f'{lr:g}')} \| "
        if not all(math.isfinite(v) for v in values):  # no mean of a run that ended in NaN or Inf: a dash
            assert re.search(name + r"— \| — \| 2/2 \| — \|$", out.stdout, re.M), out.stdout
            continue
        row = re.search(name + r"(\S+) ± (\S+) \| (\S+) – (\S+) \| \d/2 \| (.*) \|$", out.stdout, re.M)
        assert row, out.stdout
        mean, half, low, high = map(float, row.groups()[:4])
        assert math.isclose(mean, statistics.fmean(values), rel_tol=1e-9, abs_tol=mean_tol)
        assert math.isclose(half, 12.706 * statistics.stdev(values) / math.sqrt(2), rel_tol=1e-9, abs_tol=half_tol)
        assert (low, high) == (round(min(values), 4), round(max(values), 4))
        if (outer, lr) == best:
            assert row.group(5) == "(the best)"
            continue
        paired = [by_seed[s] - finals[best][s] for s in (0, 1)]
        mean, half = map(float, row.group(5).split(" ± "))
        assert math.isclose(mean, statistics.fmean(paired), rel_tol=1e-9, abs_tol=mean_tol)
        assert math.isclose(half, 12.706 * statistics.stdev(paired) / math.sqrt(2), rel_tol=1e-9, abs_tol=half_tol)
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert len(runs) == 10 and all(len(r["losses"]) == 3 for r in runs)
    # The tables of the runs' --json are the ones the sweep printed.
    again = sweep("--tables", str(tmp_path / "runs.json"))
    assert again.returncode == 0 and out.stdout.endswith(again.stdout), again.stderr
    # The same runs twice would pair a seed with itself: refused.
    twice = sweep("--tables", str(tmp_path / "runs.json"), str(tmp_path / "runs.json"))
    assert twice.returncode == 2 and "seed 0 of tau 2 cgad lr 0.01 2 times" in twice.stderr, twice.stderr


def test_the_arguments_the_sweep_sets_are_refused_in_one_line(tmp_path):
    (tmp_path / "other.json").write_text('[{"params": [1, 2]}]')
    for args, words in [(["--", "--outer-lr", "1"], "--outer-lr is set by the sweep"),
                        (["--json", str(tmp_path / "no" / "runs.json")], "does not exist"),
                        (["--tables", str(tmp_path / "other.json")], "is not a sweep's --json: KeyError"),
                        (["--seeds", "0", "0"], "--seeds names a value twice")]:
        out = sweep("--tau", "0", "--lrs", "0.01", "--seeds", "0", *args)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and words in out.stderr, out.stderr


def test_interval_is_the_student_t_one():
    spec = importlib.util.spec_from_file_location("outer_lr_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    values = [2.0, 2.5, 3.5]  # mean 8/3, sample sd sqrt(7/12); t(0.975, 2 df) = 4.303
    mean, half = module.interval(values)
    assert math.isclose(mean, 8 / 3) and math.isclose(half, 4.303 * math.sqrt(7 / 12) / math.sqrt(3))
    assert math.isnan(module.interval([1.0])[1])
