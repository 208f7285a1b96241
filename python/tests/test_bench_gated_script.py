"""bench/torch_gated.py, Gated(X) against X (docs/results/performance.md, "Gated beside the step it wraps"), run on
one tiny tensor so that it cannot rot: every X it names is timed bare and gated, and a ratio printed for each. No
timing is asserted."""
import re
import subprocess
import sys

from conftest import SOURCE_DIR, peer, require_torch

SCRIPT = SOURCE_DIR / "bench" / "torch_gated.py"


def test_every_wrapped_optimizer_is_timed_bare_and_gated():
    require_torch((2, 4), "torch's fused CPU Adam")
    peer("bitsandbytes")
    out = subprocess.run([sys.executable, str(SCRIPT), "--layouts", "flat", "--size", "4096", "--threads", "1",
                          "--repeats", "2", "--steps", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("adam-fused", "adamw-for-loop", "sgd-nesterov", "bnb-adamw8bit"):
        line = re.search(rf"^1 thread\(s\), flat, {name}: bare .* ms, gated .* ms; gated/bare (\S+) \(per round "
                         rf"(\S+) / (\S+) / (\S+)\)$", out.stdout, re.M)
        assert line, f"{name} missing from:\n{out.stdout}"
        ratio, low, median, high = map(float, line.groups())
        assert 0 < ratio and 0 < low <= median <= high
