"""benchmarks/gpu_ar_study.py: the autoregressive study on a small transformer
(issue 30, item 5), in its --tiny CPU mode."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")  # bandsolve.studies needs the repro extra

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("gpu_ar_study",
                                                  ROOT / "benchmarks" / "gpu_ar_study.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_ar_study"] = module
    spec.loader.exec_module(module)
    return module


gar = _load()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gar") / "gpu_ar_study.csv"
    torch.set_num_threads(1)
    result = gar.run(gar.tiny_config(), str(out), log=lambda *_: None)
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    with Path(gar._summary_path(str(out))).open() as fh:
        summary = list(csv.DictReader(fh))
    return result, rows, summary


def test_the_exact_metrics_match_a_brute_force_enumeration_of_every_answer():
    config = gar.tiny_config()
    task = config.study.task
    model, prompts, tree_task, _, _ = gar.pretrain(
        dataclasses.replace(config, model=dataclasses.replace(config.model, sft_steps=5)),
        seeds=2, stream=7)
    with torch.no_grad():
        first, second = gar.tree(model, prompts, task.vocab)
    np.testing.assert_allclose(first.exp().sum(-1).numpy(), 1.0, atol=1e-5)
    np.testing.assert_allclose(second.exp().sum(-1).numpy(), 1.0, atol=1e-5)
    metrics = gar.exact_metrics(first, second, tree_task)
    # the same tree read off the model one answer at a time, by its own forward pass
    V, (R, C, P) = task.vocab, prompts.shape
    p1, p2 = first.double().exp().numpy(), second.double().exp().numpy()
    pay, ok2 = tree_task.pay.numpy(), tree_task.ok2.numpy()
    for r in range(R):
        reward, entropy = [], []
        for c in range(C):
            seq = torch.tensor([list(prompts[r, c]) + [a] for a in range(V)])[None]
            batch = seq.expand(R, -1, -1)
            with torch.no_grad():
                logp = torch.log_softmax(model(batch)[r], -1).double().numpy()
            # causal: the first token's distribution does not see the first token
            np.testing.assert_allclose(np.exp(logp[:, P - 1]), np.broadcast_to(p1[r, c], (V, V)),
                                       atol=1e-5)
            np.testing.assert_allclose(np.exp(logp[:, P]), p2[r, c], atol=1e-5)
            joint = np.array([[p1[r, c, a] * p2[r, c, a, b] for b in range(V)] for a in range(V)])
            assert math.isclose(joint.sum(), 1.0, abs_tol=1e-6)  # float32 logits
            reward.append(sum(joint[a, b] * pay[r, c, a] * ok2[r, c, a, b]
                              for a, b in itertools.product(range(V), range(V))))
            entropy.append(-(joint * np.log(joint)).sum())
        assert math.isclose(float(metrics["reward"][r]), np.mean(reward), rel_tol=1e-9)
        assert math.isclose(float(metrics["entropy_sequence"][r]), np.mean(entropy),
                            rel_tol=1e-6)  # the tree renormalises float32 probabilities


def test_the_task_read_off_the_fitted_model_has_a_zipf_head_and_a_rare_paying_tail():
    config = gar.tiny_config()
    _, _, tree_task, _, fit = gar.pretrain(config, seeds=2, stream=0)
    task = config.study.task
    assert (tree_task.pay == task.head_pay).sum(-1).eq(1).all()  # one head per context
    assert tree_task.tail.sum(-1).eq(len(task.tail_ranks)).all()
    assert tree_task.ok2.sum(-1).eq(task.keep).all()
    # the supervised stage gave a Zipf head: the head is likely, each tail token rare
    zipf = np.arange(1, task.vocab + 1) ** -task.zipf
    zipf /= zipf.sum()
    assert fit["head_p"] > 0.5 * zipf[0] and fit["tail_p"] < 0.1 < fit["head_p"]


def test_a_replica_trains_as_it_would_alone():
    """The replica axis shares nothing: PPO's run is the same beside no clip."""
    config = gar.tiny_config()
    config = dataclasses.replace(config, study=dataclasses.replace(
        config.study, task=dataclasses.replace(config.study.task, steps=2)))
    pretrained = gar.pretrain(config, seeds=2, stream=3)
    ppo = ("ppo", gar.make_rule("ppo", 0.0))
    alone = gar.train_setting(config, [ppo], 3e-2, 2, 3, pretrained)["ppo"]
    beside = gar.train_setting(config, [("no-clip", gar.make_rule("no-clip", 0.0)), ppo],
                               3e-2, 2, 3, pretrained)["ppo"]
    for key in ("reward", "tail_mass", "step_kl", "clipfrac"):
        np.testing.assert_allclose(beside[key], alone[key], rtol=1e-4, atol=1e-6)


def test_tiny_mode_writes_every_row_of_probabilities(tiny_run):
    result, rows, _ = tiny_run
    study = gar.tiny_config().study
    per_setting_pilot = (1 + 2 * len(study.pilot_deltas)) * study.pilot_seeds
    per_setting_study = 6 * study.seeds
    extra = 2 * study.seeds * len(study.fixed_at)
    expected = study.task.steps * (len(study.adam_lrs) * (per_setting_pilot + per_setting_study)
                                   + extra)
    assert len(rows) == expected
    assert {r["phase"] for r in rows} == {"pilot", "study"}
    for r in rows:
        tail, head, reward = (float(r[k]) for k in ("tail_mass", "head_mass", "reward"))
        assert 0 <= tail <= 1 and 0 <= head <= 1 and tail + head <= 1 + 1e-9
        assert 0 <= reward <= study.task.tail_pay * (tail + 1e-9) + study.task.head_pay * head
        assert 0 <= float(r["entropy"]) <= math.log(study.task.vocab) + 1e-9
        assert float(r["entropy_sequence"]) >= float(r["entropy"]) - 1e-9
        assert float(r["step_kl"]) >= -1e-9 and 0 <= float(r["clipfrac"]) <= 1


def test_the_rules_differ_in_clip_share(tiny_run):
    result, rows, _ = tiny_run
    study = gar.tiny_config().study
    top = ("adam", max(study.adam_lrs))
    clip = {name: result["results"][(top, name)]["clipfrac"] for name in
            ("no-clip", "ppo", "band-kl", "band-tv")}
    assert np.all(clip["no-clip"] == 0)  # nothing bounds it
    assert clip["ppo"].max() > 0
    assert not np.allclose(clip["ppo"], clip["band-kl"])
    assert not np.allclose(clip["band-kl"], clip["band-tv"])


def test_the_summary_holds_the_family_and_a_verdict(tiny_run):
    result, _, summary = tiny_run
    tests = [r for r in summary if r["part"] == "test"]
    assert [r["name"] for r in tests] == list(gar.FAMILY)
    adjusted = np.array([result["adjusted"][n] for n in gar.FAMILY])
    raw = np.array([result["tests"][n]["p"] for n in gar.FAMILY])
    assert np.all(adjusted >= raw - 1e-12) and np.all(adjusted <= 1)
    verdicts = [r for r in summary if r["part"] == "verdict"]
    assert len(verdicts) == 1 and verdicts[0]["name"] == result["verdict"][0]
    assert verdicts[0]["name"] in ("reproduces", "contradicted", "not reproduced at this scale")


def test_the_cli_refuses_cuda_without_a_device(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(SystemExit):
        gar.main(["--out", str(tmp_path / "x.csv")])


def test_an_out_under_a_file_is_refused_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(NotADirectoryError, match="a-file"):
        gar.run(gar.tiny_config(), str(blocker / "x.csv"), log=lambda *_: None)
