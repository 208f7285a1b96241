"""simulate/experiments/tune_outer_lr.py follows docs/results/tuning-protocol.md: the grid, the eligibility of a
point, the rule that picks the lr, the edge extension and the per-delay step-down, on real `cgad simulate` sweeps."""
import sys

from conftest import SOURCE_DIR, cgad_binary

sys.path.insert(0, str(SOURCE_DIR / "simulate" / "experiments"))
import tune_outer_lr as tune  # noqa: E402


def test_grid_steps_are_the_one_three_ten_grid():
    assert [tune.grid_step(lr, +1) for lr in tune.GRID] == [3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
    assert [tune.grid_step(lr, -1) for lr in tune.GRID] == [3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2]


def test_rule_picks_lowest_eligible_mean_and_flags_edges():
    s = lambda x: {"final_mean": x, "initial_mean": 1.0}
    # a diverged point is not eligible, and past it the grid is not extended
    assert tune.pick({1e-3: s(0.5), 3e-3: s(0.2), 1e-2: None}) == (3e-3, 0)
    assert tune.pick({1e-3: s(0.5), 3e-3: s(0.2)}) == (3e-3, +1)
    assert tune.pick({1e-3: s(0.5), 3e-3: s(0.2), 1e-2: s(0.3)}) == (3e-3, 0)
    assert tune.pick({1e-3: s(0.2), 3e-3: s(0.2), 1e-2: s(0.3)}) == (1e-3, -1)  # a tie goes to the smaller lr
    assert tune.pick({1e-3: None}) == (None, -1)


def test_a_seed_that_did_not_finish_makes_the_point_ineligible():
    run = lambda status: {"status": status, "final_loss": "0x1p-1", "initial_loss": "0x1p+0"}
    assert tune.summarize({"runs": [run("finished"), run("diverged")]}) is None
    assert tune.summarize({"runs": [run("finished"), run("finished")]}) == {"final_mean": 0.5, "initial_mean": 1.0}


def test_tuning_a_small_driver_records_a_choice_the_rule_would_make():
    driver = ["--objective", "teacher-student", "--size", "8", "--rounds", "12", "--jobs", "1"]
    record = tune.tune(cgad_binary(), driver, log=lambda s: None)
    scored = {float(k): v for k, v in record["grid"].items()}
    assert set(tune.GRID) <= set(scored)
    assert tune.pick(scored)[0] == record["tau0_lr"]
    assert len(record["commands"]) == len(scored) + sum(len(v["steps"]) for v in record["per_delay"].values())
    for law, chosen in record["per_delay"].items():
        last = chosen["steps"][-1]
        assert chosen["steps"][0]["lr"] == record["tau0_lr"]
        if chosen["lr"] is not None:  # the lr kept is the first one whose runs end below their start
            assert chosen["lr"] == last["lr"] and last["final_mean"] < last["initial_mean"]
            assert all(s["final_mean"] is None or s["final_mean"] >= s["initial_mean"] for s in chosen["steps"][:-1])
