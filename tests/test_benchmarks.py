"""The GPU benchmark script runs end to end in its CPU smoke mode."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_bench_smoke(tmp_path):
    out = tmp_path / "bench.md"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_bench.py"), "--smoke",
                             "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    text = out.read_text()
    for variant in ("bisection", "clamp", "eager", "table", "compiled"):
        assert f"| {variant} |" in text
    # every bandsolve variant is within the float32 tolerance of the numpy core
    for line in text.splitlines():
        if any(f"| {v} |" in line for v in ("eager", "table", "compiled")):
            assert float(line.rstrip(" |").rsplit("|", 1)[1]) <= 1.0, line
