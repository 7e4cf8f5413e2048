"""The runnable examples, run as a user runs them (a subprocess, from an empty
directory), each in the trainer environment that has its trainer
(tests/trainer_envs.sh)."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.trainers

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _run(tmp_path, script, *args, path=()):
    # the checkout first, as pytest itself imports it (pyproject: pythonpath)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLES.parent), *map(str, path)])}
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


_CLIP_LINE = re.compile(r"clip fraction, mean of (\d+) steps: band .* (\d\.\d+); .* on the same "
                        r"ratios (\d\.\d+)")


def _band_and_fixed(out):
    """(steps, the band's mean clip fraction, the fixed clip's) from an
    example's last line."""
    found = _CLIP_LINE.search(out)
    assert found, out[-2000:]
    return int(found.group(1)), float(found.group(2)), float(found.group(3))


def test_example_trl_grpo_tiny_binds_and_the_band_is_not_trls_clip(tmp_path):
    """examples/trl_grpo.py --tiny printed clip fractions of 0 in all its 3
    steps (one update per generation but the first): now 4 updates per
    generation, the band binds, and its clip fraction differs from TRL's fixed
    [0.8, 1.2] on the same ratios."""
    pytest.importorskip("trl", minversion="1.0")  # verl's environment pins trl 0.27
    out = _run(tmp_path, "trl_grpo.py", "--tiny", "--output-dir", str(tmp_path / "out"))
    assert "band/clipfrac_upper" in out and "clip_ratio/region_mean" in out
    steps, band, fixed = _band_and_fixed(out)
    assert steps >= 4 and band > 0.0 and fixed > 0.0
    assert abs(band - fixed) > 0.05


def test_example_verl_dry_run_reaches_ppo_loss_and_the_band_binds_unlike_verls_clip(tmp_path):
    pytest.importorskip("verl")
    out = _run(tmp_path, "verl/dry_run_cpu.py")
    assert "loss_mode=bandpo" in out and "ppo_loss = " in out
    assert "actor/band/clipfrac_upper" in out
    steps, band, fixed = _band_and_fixed(out)
    assert steps >= 8 and band > 0.0 and fixed > 0.0
    assert abs(band - fixed) > 0.05


def test_example_skyrl_dry_run_reaches_the_loss_and_the_band_binds_unlike_skyrls_clip(tmp_path):
    pytest.importorskip("skyrl")
    out = _run(tmp_path, "skyrl/dry_run_cpu.py")
    assert "policy_loss_type=bandpo" in out and "band/clipfrac_upper" in out
    steps, band, fixed = _band_and_fixed(out)
    assert steps >= 8 and band > 0.0 and fixed > 0.0
    assert abs(band - fixed) > 0.05


def test_verl_grpo_scripts_data_step_exists_and_feeds_verls_own_gsm8k_scorer(tmp_path):
    """run_grpo.sh trained on GSM8K prepared by a step pip's verl does not ship
    (verl.examples.data_preprocess is not in the package): the step it names
    exists, and the rows it writes score through verl's own reward function."""
    pytest.importorskip("verl")
    import importlib.util

    import pandas as pd
    from datasets import Dataset
    from verl.utils.reward_score import default_compute_score

    script = EXAMPLES / "verl" / "prepare_gsm8k.py"
    assert "examples/verl/prepare_gsm8k.py" in (EXAMPLES / "verl" / "run_grpo.sh").read_text()
    assert importlib.util.find_spec("verl.examples") is None  # what the script replaces
    spec = importlib.util.spec_from_file_location("prepare_gsm8k", script)
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    solution = "She has 3 + 1,200 = <<3+1200=1203>>1,203 apples.\n#### 1,203"
    split = Dataset.from_dict({"question": ["How many apples?"], "answer": [solution]})
    (path,) = prepare.write({"train": split}, str(tmp_path))
    row = pd.read_parquet(path).iloc[0]
    assert row["prompt"][0]["role"] == "user" and "####" in row["prompt"][0]["content"]
    truth = row["reward_model"]["ground_truth"]
    assert truth == "1203"
    right = default_compute_score(row["data_source"], "so 1203 apples.\n#### 1203", truth)
    wrong = default_compute_score(row["data_source"], "so 1202 apples.\n#### 1202", truth)
    assert (float(right), float(wrong)) == (1.0, 0.0)


def test_example_openrlhf_tiny_binds_and_the_band_is_not_openrlhfs_clip(tmp_path):
    """examples/openrlhf/train_tiny.py, on a CPU with the documented stand-ins
    for flash-attn and vLLM (a sitecustomize installs them before the script
    imports OpenRLHF; where they are installed, nothing is stood in for)."""
    pytest.importorskip("openrlhf")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import openrlhf_stand_ins\nopenrlhf_stand_ins.install()\n")
    out = _run(tmp_path, "openrlhf/train_tiny.py", path=(pathlib.Path(__file__).parent, site))
    assert "loss: BandPolicyLoss" in out
    steps, band, fixed = _band_and_fixed(out)
    assert steps >= 8 and band > 0.0 and fixed > 0.0
    assert abs(band - fixed) > 0.05
