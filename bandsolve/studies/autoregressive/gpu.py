"""The transformer study on one GPU, at a size or learning rates of your choice.

    python -m bandsolve.studies.autoregressive.gpu [--size gpu|cpu|tiny] [--device cuda]
        [--primary-lr LR --high-lr LR] [--seeds N] [--steps N] [--resume DIR]
        [--out ar_gpu.csv] [--flops]

The same study as ``bandsolve repro``'s transformer study (:mod:`.study`:
every rule tuned on pilot seeds, the Holm family and the verdict of
:mod:`.endpoints`) on a larger model: ``--size gpu`` is 4 layers of width 128
(``--size cpu`` is the committed CPU study's configuration, ``--size tiny``
a seconds-long smoke run that decides nothing). Every replica of a task
trains in one batched model, so on a GPU each task holds all the seeds
(``chunk`` = seeds).

* **Precision.** Full float32: TF32 matrix products are switched off
  (``torch.backends.cuda.matmul.allow_tf32 = False``, cuDNN's too). A clip
  compares ratios near 1 with bounds as narrow as 1 +- 0.014 (Band-KL at
  delta 1e-4, p = 0.5) or 1 +- 0.02 (PPO's smallest eps); TF32's 10-bit
  mantissa puts an error of about 1e-3 on every logit, so on every ratio, a
  tenth of those widths; bf16's 8 bits, worse. The exact metrics are float64.
* **Cost.** ``--flops`` prints the floating-point operations the run will
  take, counted by ``torch.utils.flop_counter.FlopCounterMode`` on one
  supervised step and one GRPO step of one replica and scaled by the
  replicas and steps of the first pilot round and the study (grown grids
  add more); it runs nothing else.
* **Output.** ``--out`` gets one row per (learning rate, rule, seed, step)
  of the study seeds with every metric of :data:`.task.METRICS`, appended
  and flushed once per learning rate as its runs finish; beside it,
  ``<out>_summary.csv`` (written whole, atomically) holds the supervised fit,
  the pilot table, the tuned and matched knobs, the family's tests, the
  verdict and the run's device, time and torch. ``--resume DIR`` keeps each
  finished task in DIR, so a run cut short resumes where it stopped.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import sys
import time

from ..tables import history_rows
from .task import METRICS


def config_for(size: str, device: str = "cpu"):
    """The study at ``size``: "cpu" (the committed CPU study), "gpu" (4
    layers of width 128, all seeds in one task) or "tiny" (seconds; decides nothing)."""
    from . import configs

    if size == "cpu":
        return dataclasses.replace(configs.transformer(), device=device)
    if size == "gpu":
        return configs.gpu(device)
    if size == "tiny":
        return dataclasses.replace(configs.transformer_smoke(), device=device)
    raise ValueError(f"size must be gpu, cpu or tiny (got {size!r})")


def flop_estimate(config) -> dict[str, float]:
    """Floating-point operations of the run, counted by FlopCounterMode on one
    replica's supervised step and GRPO step (on the CPU: the count depends on
    the shapes alone) and scaled by the first pilot round's and the study's
    replicas and steps; a step's count is the difference of a two-step and a
    one-step run, so the evaluations before and after the loop are left out."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from ..rules import make_rule
    from . import grpo, tuning
    from .task import read_task, seed_rng
    from .transformer import pretrain

    def counted(function) -> int:
        with FlopCounterMode(display=False) as counter:
            function()
        return counter.get_total_flops()

    def fit(steps):
        return pretrain(config.task, dataclasses.replace(config.model, sft_steps=steps), 0, [0])

    # differences of two counts: one step's work, without the evaluations around the loop
    sft = counted(lambda: fit(2)) - counted(lambda: fit(1))
    net, _ = fit(1)
    with torch.no_grad():
        task = read_task(net.table(), config.task)

    def train(steps):
        grpo.train(net.tile(1), task, [make_rule("ppo", 0.2)], 1,
                   [seed_rng(0, 0, "grpo")], dataclasses.replace(config.task, steps=steps), 1e-4)

    step = counted(lambda: train(2)) - counted(lambda: train(1))
    pilot = 2 * config.pilot_seeds * sum(len(k.grid) for k in config.knobs)
    labels = 2 * len(tuning.RULES) + 1 + (len(tuning.RULES) - 2)  # tuned at both, matched
    study = config.seeds * labels
    seeds = config.pilot_seeds + config.seeds
    total = sft * config.model.sft_steps * seeds + step * config.task.steps * (pilot + study)
    return dict(sft_step=sft, grpo_step=step, replicas=pilot + study, total=total)


def _csv_writer(path: str):
    fh = open(path, "w", newline="")
    writer = csv.writer(fh)
    writer.writerow(["lr", "rule", "knob", "seed", "step", *METRICS])
    fh.flush()
    return fh, writer


def _summary(result, device: str, seconds: float) -> list[tuple]:
    import torch

    from . import claims

    rows: list[tuple] = []
    for phase, fits in result.fit.items():
        for i, fit in enumerate(fits):
            rows += [("sft", f"{phase} chunk {i} {k}", f"{v:.6g}") for k, v in fit.items()]
    for (w, rule, knob), row in result.pilot.items():
        rows.append(("pilot", f"lr {result.config.lr(w):g} {rule} {knob:g}",
                     " ".join(f"{k} {v:.6g}" for k, v in row.items())))
    rows += [("tuned", f"lr {result.config.lr(w):g} {rule}", f"{knob:g}")
             for (w, rule), knob in result.tuned.items()]
    rows += [("matched", rule, f"{knob:.6g}") for rule, knob in result.matched.items()]
    for name, t in result.tests.items():
        rows.append(("test", name, f"{t['mean']:+.4g} [{t['low']:+.4g}, {t['high']:+.4g}] d_z "
                                   f"{t['d']:+.2f} p {t['p']:.3g} Holm p "
                                   f"{result.adjusted[name]:.3g}"))
    rows.append(("verdict", result.verdict[0], claims.verdict_text(result)))
    rows += [("row", row, v[0]) for row, v in result.rows.items()]
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    rows += [("run", "device", name), ("run", "torch", torch.__version__),
             ("run", "date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
             ("run", "seconds", f"{seconds:.1f}"), ("run", "task cpu seconds",
                                                     f"{result.cpu_seconds:.1f}")]
    return rows


def summary_path(out: str) -> str:
    stem, ext = os.path.splitext(out)
    return f"{stem}_summary{ext or '.csv'}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("gpu", "cpu", "tiny"), default="gpu")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--primary-lr", type=float, help="the primary Adam learning rate")
    parser.add_argument("--high-lr", type=float, help="the higher Adam learning rate")
    parser.add_argument("--seeds", type=int, help="paired study seeds")
    parser.add_argument("--steps", type=int, help="GRPO steps")
    parser.add_argument("--resume", metavar="DIR", help="keep finished tasks in DIR and reuse "
                                                        "them (pickles: a folder you trust)")
    parser.add_argument("--out", default="ar_gpu.csv")
    parser.add_argument("--flops", action="store_true", help="print the cost and stop")
    args = parser.parse_args(argv)
    import torch

    from bandsolve._files import atomic_write, output_folder

    from ..jobs import Jobs
    from . import setting

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device; use --device cpu")
    config = config_for(args.size, args.device)
    changes = {k: v for k, v in (("primary_lr", args.primary_lr), ("high_lr", args.high_lr),
                                 ("seeds", args.seeds)) if v is not None}
    if args.steps is not None:
        changes["task"] = dataclasses.replace(config.task, steps=args.steps)
        changes["window"] = min(config.window, args.steps)
    try:
        config = dataclasses.replace(config, **changes)
    except ValueError as exc:
        parser.error(str(exc))
    flops = flop_estimate(config)
    print(f"{flops['replicas']} replicas (first pilot round and study): about "
          f"{flops['total']:.2g} floating-point operations ({flops['grpo_step']:.3g} per "
          f"replica-step, {flops['sft_step']:.3g} per supervised step and seed)", flush=True)
    if args.flops:
        return 0
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False  # ratios near 1 need full float32
        torch.backends.cudnn.allow_tf32 = False
    output_folder(os.path.dirname(os.path.abspath(args.out)), "--out's folder")
    fh, writer = _csv_writer(args.out)
    began = time.perf_counter()

    def write(which, runs):
        lr = config.lr(which)
        for label, (knob, history) in runs.items():
            writer.writerows(history_rows((f"{lr:g}", label, f"{knob:.6g}"), history, METRICS))
        fh.flush()  # once per learning rate: a run cut short keeps the rates that finished

    try:
        result = setting.run(config, Jobs(1, args.resume), on_rate_done=write)
    except KeyboardInterrupt:
        print(f"interrupted: the finished learning rates are in {args.out}"
              + (f", the finished tasks in {args.resume}" if args.resume else ""))
        return 130
    finally:
        fh.close()
    seconds = time.perf_counter() - began
    with atomic_write(summary_path(args.out), newline="") as out:
        csv.writer(out).writerows([("part", "name", "value"),
                                   *_summary(result, args.device, seconds)])
    print(f"{result.verdict[0]}; {seconds:.0f} s; summary in {summary_path(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
