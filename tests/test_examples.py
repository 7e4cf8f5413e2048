"""The runnable examples, run as a user runs them (a subprocess, from an empty
directory), each in the trainer environment that has its trainer
(tests/trainer_envs.sh)."""

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.trainers

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _run(tmp_path, script, *args):
    # the checkout first, as pytest itself imports it (pyproject: pythonpath)
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_example_trl_grpo_tiny_runs_and_logs_the_band(tmp_path):
    pytest.importorskip("trl", minversion="1.0")  # verl's environment pins trl 0.27
    out = _run(tmp_path, "trl_grpo.py", "--tiny", "--output-dir", str(tmp_path / "out"))
    assert "band/clipfrac_upper" in out and "clip_ratio/region_mean" in out


def test_example_verl_dry_run_reaches_ppo_loss_with_bandpo(tmp_path):
    pytest.importorskip("verl")
    out = _run(tmp_path, "verl/dry_run_cpu.py")
    assert "loss_mode=bandpo" in out and "ppo_loss = " in out
    assert "actor/band/clipfrac_upper" in out


def test_example_skyrl_dry_run_reaches_the_registered_loss(tmp_path):
    pytest.importorskip("skyrl")
    out = _run(tmp_path, "skyrl/dry_run_cpu.py")
    assert "policy_loss_type=bandpo" in out and "band/clipfrac_upper" in out
