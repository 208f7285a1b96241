"""bench/torch_peers.py, the benchmark of cgad's step against the real CPU optimizers (docs/results/performance.md),
run on tiny tensors so that it cannot rot: every contender it names is timed, the ratios are the ones its JSON
promises, and the state bytes it reports are those of the optimizers' state. No timing is asserted."""
import json
import math
import subprocess
import sys

from conftest import SOURCE_DIR, peer, require_torch

SCRIPT = SOURCE_DIR / "bench" / "torch_peers.py"


def run(*args):
    out = subprocess.run([sys.executable, str(SCRIPT), "--threads", "1", "--repeats", "2", "--min-seconds", "0",
                          "--json", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def check_rows(result, layouts):
    rows = result["results"]
    for row in rows:
        assert 0 < row["min_s"] <= row["median_s"] <= row["max_s"] and math.isfinite(row["max_s"]), row["name"]
        assert len(row["samples_s"]) == 2
    for layout, size in layouts.items():
        mine = [r for r in rows if r["layout"] == layout]
        assert {r["parameters"] for r in mine} == {size}
        twin = next(r for r in mine if r["name"].startswith("roofline"))
        assert twin["ratio_to_roofline"] == 1.0
        peers = [r for r in mine if r["name"].startswith(("torch.", "bitsandbytes.", "torchao."))]
        # The yardstick is the fastest real peer: it has ratio 1, no other peer more.
        assert max(r["speedup_over_best_peer"] for r in peers) == 1.0
    return rows


def test_fp32_state_against_torch_adam():
    result = run("--state", "fp32", "--size", "4096", "--tensors", "4", "--layouts", "flat,split", "--passes")
    rows = check_rows(result, {"flat": 4096, "split": 4096})
    names = {r["name"] for r in rows}
    assert {"torch.optim.Adam(foreach=False)", "torch.optim.AdamW(foreach=True)", "cgad.torch.Adam(state=fp32)",
            "cgad.torch.CGAD(state=fp32, staleness=1)", "pass: cgad's refusal scan of Δ alone"} <= names
    assert result["config"]["step_bytes_per_param"] == 28
    for r in rows:
        if r["name"].startswith(("cgad.torch", "torch.optim.Adam(")):
            # exp_avg and exp_avg_sq in float32, and a 0-dim float32 step, per tensor
            tensors = r["tensors"]
            assert r["state_bytes"] == 8 * r["parameters"] + 4 * tensors, r["name"]


def test_q8_state_against_bitsandbytes_and_torchao():
    require_torch((2, 4), "the 8-bit peers (bitsandbytes 0.50, torchao 0.18)")
    peer("bitsandbytes")
    peer("torchao")
    result = run("--state", "q8", "--params", "bf16", "--size", "8192", "--layouts", "flat")
    rows = check_rows(result, {"flat": 8192})
    by_name = {r["name"].split(" (")[0]: r for r in rows}
    assert {"cgad.torch.Adam(state=q8, q8_semantics=cgad)", "cgad.torch.Adam(state=q8, q8_semantics=bnb)",
            "cgad.torch.Adam(state=q8, v_map=zero-free)", "bitsandbytes.optim.Adam8bit",
            "torchao.optim.AdamW8bit", "torchao.optim.AdamW4bit"} <= set(by_name)
    # 8192 elements: two uint8 codes per element and one float32 absmax per 256-element block and moment, plus
    # cgad's 0-dim step; bitsandbytes also keeps its two 256-entry float32 maps with the state.
    blocks = 8192 // 256
    assert by_name["cgad.torch.Adam(state=q8, q8_semantics=cgad)"]["state_bytes"] == 2 * 8192 + 2 * 4 * blocks + 4
    assert by_name["bitsandbytes.optim.Adam8bit"]["state_bytes"] >= 2 * 8192 + 2 * 4 * blocks
    # torchao's 4-bit state packs two codes a byte: less than its 8-bit state.
    assert by_name["torchao.optim.AdamW4bit"]["state_bytes"] < by_name["torchao.optim.AdamW8bit"]["state_bytes"]
