"""The one-GPU transformer study (``python -m bandsolve.studies.autoregressive.gpu``)
in its CPU mode: its cost counted by FlopCounterMode against the model's own
arithmetic, its per-learning-rate CSV and its summary."""

from __future__ import annotations

import csv
import dataclasses
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")  # bandsolve.studies needs the repro extra

from bandsolve.studies.autoregressive import configs, gpu, tuning  # noqa: E402
from bandsolve.studies.autoregressive.task import METRICS  # noqa: E402


def _matmul_flops(task, model, tokens_prompt, tokens_answer, heads_first, heads_second):
    """2 x multiply-adds of the linear layers and the output head (attention's
    own products, a few percent at these widths, left out)."""
    D, L, V = model.width, model.layers, task.vocab
    linear = 2 * L * 12 * D * D  # qkv 3D^2, out D^2, MLP 8D^2
    return (tokens_prompt + tokens_answer) * linear + (heads_first + heads_second) * 2 * D * V


def test_the_flop_count_is_the_models_arithmetic():
    """FlopCounterMode's count of one supervised step and one GRPO step
    against the matrix products the model does (within the attention's
    share), and the total scaled by replicas and steps."""
    config = dataclasses.replace(configs.transformer_smoke(), model=dataclasses.replace(
        configs.transformer_smoke().model, width=64, heads=4, layers=2))
    task, model = config.task, config.model
    C, P, V, G, M = task.contexts, model.prompt, task.vocab, task.group, task.minibatches
    table = _matmul_flops(task, model, C * P, C * V, C, C * V)
    batch = C * G // M
    minibatch = _matmul_flops(task, model, C * P, batch, C, batch)
    got = gpu.flop_estimate(config)
    # the supervised step: one table forward and its backward (twice the forward)
    assert got["sft_step"] == pytest.approx(3 * table, rel=0.06)
    # a GRPO step: the table after it, and each mini-batch's forward and backward
    want = table + task.epochs * M * 3 * minibatch
    assert got["grpo_step"] == pytest.approx(want, rel=0.06)
    pilot = 2 * config.pilot_seeds * sum(len(k.grid) for k in config.knobs)
    study = config.seeds * (2 * len(tuning.RULES) + 1 + len(tuning.RULES) - 2)
    assert got["replicas"] == pilot + study
    assert got["total"] == pytest.approx(
        got["sft_step"] * model.sft_steps * (config.pilot_seeds + config.seeds)
        + got["grpo_step"] * task.steps * (pilot + study))


def test_the_gpu_size_is_a_larger_model_with_every_seed_in_one_task():
    config = gpu.config_for("gpu", "cpu")
    cpu = gpu.config_for("cpu", "cpu")
    assert config.model.width > cpu.model.width and config.chunk == config.seeds
    assert config.device == "cpu" and gpu.config_for("gpu", "cuda").device == "cuda"
    with pytest.raises(ValueError, match="size must be"):
        gpu.config_for("huge")


def test_the_cpu_mode_writes_one_row_per_run_seed_and_step_and_a_summary(tmp_path, capsys):
    out = tmp_path / "ar.csv"
    assert gpu.main(["--size", "tiny", "--device", "cpu", "--out", str(out),
                     "--resume", str(tmp_path / "kept")]) == 0
    printed = capsys.readouterr().out
    assert "floating-point operations" in printed
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    config = configs.transformer_smoke()
    with open(gpu.summary_path(str(out))) as fh:
        summary = list(csv.DictReader(fh))
    matched = sum(r["part"] == "matched" for r in summary)
    labels = {(r["lr"], r["rule"]) for r in rows}
    # each rule at both rates, PPO 0.2 and each matched-step rule at the primary one
    assert len(labels) == 2 * len(tuning.RULES) + 1 + matched
    assert len(rows) == len(labels) * config.seeds * config.task.steps
    assert set(METRICS) <= set(rows[0])
    for r in rows:
        assert 0 <= float(r["tail_mass"]) <= 1 and float(r["step_kl"]) >= -1e-12
        assert 0 <= float(r["entropy"]) <= math.log(config.task.vocab) + 1e-9
    parts = {r["part"] for r in summary}
    assert {"sft", "pilot", "tuned", "matched", "test", "verdict", "row", "run"} <= parts
    assert sum(r["part"] == "test" for r in summary) == 5
    # kept: a second run resumes every task and writes the same rows
    again = tmp_path / "again.csv"
    assert gpu.main(["--size", "tiny", "--device", "cpu", "--out", str(again),
                     "--resume", str(tmp_path / "kept")]) == 0
    assert again.read_text() == out.read_text()


def test_the_flops_option_runs_nothing(tmp_path, capsys):
    out = tmp_path / "never.csv"
    assert gpu.main(["--size", "tiny", "--device", "cpu", "--flops", "--out", str(out)]) == 0
    assert "floating-point operations" in capsys.readouterr().out and not out.exists()


def test_cuda_without_a_device_is_refused(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(SystemExit):
        gpu.main(["--out", str(tmp_path / "x.csv")])
