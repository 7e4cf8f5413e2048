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


def test_benchmark_history_cases_run(tmp_path):
    """Each case of the pytest-benchmark history runs once (timing disabled),
    so that the file a contributor runs before and after a change works."""
    pytest.importorskip("pytest_benchmark")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                             str(ROOT / "benchmarks" / "test_history.py"), "--benchmark-disable"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]


def test_gpu_study_runs_tiny_on_the_cpu_and_writes_its_csv(tmp_path):
    out = tmp_path / "gpu_study.csv"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_study.py"), "--tiny",
                             "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    import csv

    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    names = {(r["part"], r["name"], r["dtype"]) for r in rows}
    for dtype in ("float32", "bfloat16"):
        assert ("cost", "bisection", dtype) in names and ("cost", "band_from_logp", dtype) in names
    assert ("cost", "decoder forward+backward", "bfloat16") in names
    assert all(float(r["value"]) > 0 for r in rows if r["part"] == "cost")
    assert any(r["part"] == "sequence run" and r["name"].startswith("band-kl") for r in rows)
    assert any(r["part"] == "sequence endpoint" and r["name"].endswith("band-kl vs ppo")
               for r in rows)
