"""A prepared GPU study (issue 17, item 8): under 7 minutes on one GPU, its CSV
written row by row as it goes, so a run cut short keeps what finished.

    python benchmarks/gpu_study.py [--out benchmarks/gpu_study.csv]
    python benchmarks/gpu_study.py --tiny      # the same code on the CPU, in seconds

1. The paper's cost claim: its KL bisection (``torch_bench.bisection_band``)
   against ``bandsolve.torch.band_from_logp`` on 32,768 tokens in float32 and
   bfloat16, set beside the forward and backward pass of a randomly
   initialised decoder shaped like a 1.5B model (28 layers, width 1536, 12
   heads; one sequence of 32,768 tokens split into 8 x 4,096) whose
   log-probabilities the band would be computed from.
2. The sequence task with a wrong head (``bandsolve.studies.sequence``)
   scaled up: every rule and control at 16 seeds at once, one process per
   core (the policy is tiny, so the host's cores run it), a row per finished
   run, then the pre-registered endpoints as paired differences. Sized from
   a run measured on one CPU core here (about 16 s of CPU per 150-step run,
   5 s per supervised fit): 160 runs on 16 cores take about 3 minutes. Not
   yet timed on the GPU machine itself.

Rows: part, name, dtype, tokens, ms (median of the repeats) or the study's
summary numbers.

This script runs no RL on the GPU. The autoregressive study of issue 30
(GRPO under Adam on a randomly initialised small transformer, with the
tabular study's rules, Holm family and verdict) is
``python -m bandsolve.studies.autoregressive.gpu``; see docs/reproduce.md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os

import torch
from torch_bench import DELTA, bisection_band, timings

from bandsolve.torch import band_from_logp


@dataclasses.dataclass(frozen=True)
class GpuStudyConfig:
    device: str = "cuda"
    tokens: int = 32768
    layers: int = 28
    width: int = 1536
    heads: int = 12
    sequence_length: int = 4096
    vocab: int = 151_936
    repeat: int = 20
    sequence_seeds: int = 16
    sequence_steps: int = 150
    sequence_width: int = 32
    sequence_sft_steps: int = 300
    #: processes for the sequence runs (0: one per core)
    sequence_jobs: int = 0


TINY = GpuStudyConfig(device="cpu", tokens=512, layers=1, width=32, heads=2,
                      sequence_length=64, vocab=100, repeat=2, sequence_seeds=2,
                      sequence_steps=2, sequence_width=16, sequence_sft_steps=2,
                      sequence_jobs=1)


class _Writer:
    """Appends rows and flushes each one."""

    FIELDS = ("part", "name", "dtype", "tokens", "value", "unit")

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._fh = open(path, "w", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=self.FIELDS)
        self._writer.writeheader()

    def row(self, **values):
        self._writer.writerow(values)
        self._fh.flush()
        print(", ".join(f"{k}={v}" for k, v in values.items()), flush=True)

    def close(self):
        self._fh.close()


def cost_claim(config: GpuStudyConfig, write) -> None:
    device = torch.device(config.device)

    def measure(fn):  # the median of the repeats (the timer also gives min and max)
        return timings(fn, device, config.repeat)[0]

    for dtype in (torch.float32, torch.bfloat16):
        logp = torch.log(torch.rand(config.tokens, device=device).clamp(min=1e-6)).to(dtype)
        name = str(dtype).removeprefix("torch.")
        # the paper's bisection works in float32 whatever the input
        write(part="cost", name="bisection", dtype=name, tokens=config.tokens,
              value=measure(lambda: bisection_band(logp.float(), DELTA)), unit="ms")
        write(part="cost", name="band_from_logp", dtype=name, tokens=config.tokens,
              value=measure(lambda: band_from_logp(logp, DELTA, validate=False)), unit="ms")
    layer = torch.nn.TransformerEncoderLayer(config.width, config.heads, 4 * config.width,
                                             dropout=0.0, batch_first=True)
    body = torch.nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
    decoder = torch.nn.ModuleDict(dict(
        embed=torch.nn.Embedding(config.vocab, config.width), body=body,
        head=torch.nn.Linear(config.width, config.vocab, bias=False))).to(device, torch.bfloat16)
    batch = max(config.tokens // config.sequence_length, 1)
    tokens = torch.randint(config.vocab, (batch, config.sequence_length), device=device)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(
        config.sequence_length, device=device, dtype=torch.bfloat16)

    def forward_backward():
        h = decoder["body"](decoder["embed"](tokens), mask=mask, is_causal=True)
        logp = torch.log_softmax(decoder["head"](h).float(), -1)
        logp.gather(-1, tokens[..., None]).mean().backward()

    write(part="cost", name="decoder forward+backward", dtype="bfloat16",
          tokens=batch * config.sequence_length, value=measure(forward_backward), unit="ms")


def sequence_at_scale(config: GpuStudyConfig, out_dir: str, write) -> None:
    """Every rule and control of the sequence task with a wrong head, at
    ``sequence_seeds`` seeds at once (one process per core: the policy is
    tiny, so the host's cores run it), a row per finished run, then the
    pre-registered endpoints as paired differences (Band-KL against PPO and
    Clip-Higher)."""
    from bandsolve.studies.sequence import claims, study, task
    from bandsolve.studies.tables import write_csv

    seq = task.SequenceConfig(width=config.sequence_width,
                                  sft_steps=config.sequence_sft_steps,
                                  seeds=config.sequence_seeds, steps=config.sequence_steps,
                                  eval_every=max(config.sequence_steps // 10, 1))

    def finished(label, seed, history):
        write(part="sequence run", name=f"{label} seed {seed}", dtype="", tokens="",
              value=f"{history['test/success'][-1]:.4f}", unit="final test success")

    result = study.run(seq, jobs=config.sequence_jobs or os.cpu_count() or 1, on_done=finished)
    write_csv(os.path.join(out_dir, "gpu_study_sequence.csv"), *result.table())
    for control in claims.CONTROLS:
        for endpoint, diff in claims.paired_endpoints(result.selected, seq, "band-kl",
                                                      control).items():
            value = "not comparable" if diff is None else (
                f"{diff['mean']:+.4f} [{diff['low']:+.4f}, {diff['high']:+.4f}] "
                f"d_z {diff['d']:+.2f} p {diff['p']:.2g}")
            write(part="sequence endpoint", name=f"{endpoint}: band-kl vs {control}",
                  dtype="", tokens="", value=value, unit=f"{seq.seeds} seeds, paired")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("benchmarks", "gpu_study.csv"))
    parser.add_argument("--tiny", action="store_true", help="the same code on the CPU, tiny")
    parser.add_argument("--skip-sequence", action="store_true")
    args = parser.parse_args(argv)
    config = TINY if args.tiny else GpuStudyConfig()
    if config.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device; use --tiny to run the same code on the CPU")
    writer = _Writer(args.out)
    try:
        cost_claim(config, writer.row)
        if not args.skip_sequence:
            sequence_at_scale(config, os.path.dirname(os.path.abspath(args.out)), writer.row)
    except KeyboardInterrupt:
        print("interrupted: the rows so far are in", args.out)
        return 130
    finally:
        writer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
