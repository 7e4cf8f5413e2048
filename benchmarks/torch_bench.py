"""Benchmark of bandsolve.torch on one device, with baselines timed in the same run.

    python benchmarks/torch_bench.py --device cpu [--sizes 32768 524288] [--out FILE.md]
    python benchmarks/gpu_bench.py               # the GPU run: CUDA, the issue's sizes
    python benchmarks/gpu_bench.py --smoke       # a seconds-long CPU run of the same code

For each size N and dtype (float32, bfloat16) of a tensor of old
log-probabilities it times, for Band-KL at delta = 0.05 with max_ratio 10:

* ``bisection``: the paper's algorithm in torch: both bounds by bisection
  from [0, 1] and [1, 1/p], 50 iterations, and after each iteration a
  ``.item()`` that checks convergence (tol 1e-6): a host synchronisation per
  iteration, as in the original;
* ``clamp``: ``torch.clamp`` of the same tensor, the floor for any
  elementwise op that reads it and writes a result;
* ``eager``: ``bandsolve.torch.band_from_logp(x, 0.05, validate=False)``;
* ``table``: a prebuilt ``BandTable`` called eagerly;
* ``compiled``: the table call under ``torch.compile(fullgraph=True)``;
* ``compiled fn``: ``band_from_logp`` itself under ``torch.compile(fullgraph=True)``
  (on the CPU the numpy core as one op; off it the table fetched by one op,
  its evaluation fused in the graph);
* ``eager+out``: ``eager`` writing into preallocated ``out=`` tensors;
* ``eager+validate`` and ``table+validate``: ``eager`` and ``table`` with the
  default ``validate=True``, the check a trainer plug-in runs every step
  (asynchronous on a GPU, one read back on the CPU).

On the CPU ``eager`` is the numpy core (float32 and half through its fast
path); ``table`` runs op by op there and on a GPU (about a hundred ATen
kernels, nothing compiled), as ``eager`` does on a GPU.

Two times per variant, medians over ``--repeat`` runs after two warm-ups,
with the spread (fastest and slowest run) of the first: the device time
(CUDA events on a GPU, which also count the GPU idling while the host
dispatches; ``perf_counter`` on the CPU), and the host time per call, the
wall clock around one call between two synchronisations (on a GPU what a
call costs a step that waits for it; on the CPU the same as the first).
Ratios compare medians from this run only. The ``vs compiled`` column is
each variant against the compiled table. Each result is also checked
against the float64 numpy core (the worst error as a fraction of the
float32 tolerance).
"""

from __future__ import annotations

import argparse
import math
import pathlib
import platform
import statistics
import sys
import time

import numpy as np
import torch
from _report import verdict

import bandsolve as bs
from bandsolve.torch import BandTable, band_from_logp

DELTA = 0.05
MAX_RATIO = 10.0
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def bisection_band(logp: torch.Tensor, delta: float, iterations: int = 50, tol: float = 1e-6):
    """The paper's KL bisection in torch (both bounds), .item() check per iteration."""
    p = logp.float().exp()
    pc = 1.0 - p

    def kl(r):
        q = (p * r).clamp(1e-12, 1.0 - 1e-12)
        return p * torch.log(p / q) + pc * torch.log(pc / (1.0 - q))

    def bisect(lo, hi, upper):
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            inside = kl(mid) <= delta
            if upper:
                lo, hi = torch.where(inside, mid, lo), torch.where(inside, hi, mid)
            else:
                lo, hi = torch.where(inside, lo, mid), torch.where(inside, mid, hi)
            if (hi - lo).max().item() < tol:  # the host synchronisation
                break
        return lo if upper else hi

    upper = bisect(torch.ones_like(p), 1.0 / p, True).clamp(max=MAX_RATIO)
    lower = bisect(torch.zeros_like(p), torch.ones_like(p), False)
    return lower, upper


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timings(fn, device: torch.device, repeat: int):
    """(median ms, fastest, slowest, median host ms per call) of ``fn`` on ``device``."""
    for _ in range(2):
        fn()
    times, host = [], []
    for _ in range(repeat):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    for _ in range(repeat):
        _synchronise(device)
        start = time.perf_counter()
        fn()
        _synchronise(device)
        host.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times), max(times), statistics.median(host)


def _error_ratio(lower, upper, logp):
    """Worst error against the float64 numpy core, in units of the float32 tolerance."""
    ref_lo, ref_hi = bs.band_from_logp(logp.double().cpu().numpy(), DELTA, "kl",
                                       max_ratio=MAX_RATIO)
    worst = 0.0
    eps32 = float(np.finfo(np.float32).eps)
    for got, ref in ((lower, ref_lo), (upper, ref_hi)):
        g = got.double().cpu().numpy()
        tol = np.maximum(1e-5 * np.minimum(ref, np.abs(ref - 1)), 16 * eps32 * np.maximum(ref, 1))
        worst = max(worst, float(np.max(np.abs(g - ref) / tol)))
    return worst


def run(device: str, sizes, repeat: int, with_compile: bool = True):
    dev = torch.device(device)
    table = BandTable.build("kl", DELTA, max_ratio=MAX_RATIO, device=dev)
    compiled = torch.compile(lambda x: table(x, validate=False), fullgraph=True) \
        if with_compile else None
    compiled_fn = torch.compile(lambda x: band_from_logp(x, DELTA, "kl", max_ratio=MAX_RATIO,
                                                         validate=False),
                                fullgraph=True) if with_compile else None
    rows = []
    gen = torch.Generator().manual_seed(0)
    for n in sizes:
        # log-uniform p in [1e-6, 1]: token probabilities spread over decades
        base = -torch.rand(n, generator=gen, dtype=torch.float64) * math.log(1e6)
        for dtype_name, dtype in DTYPES.items():
            x = base.to(dtype).to(dev)
            out = (torch.empty(n, device=dev), torch.empty(n, device=dev))
            variants = {
                "bisection": lambda: bisection_band(x, DELTA),
                "clamp": lambda: torch.clamp(x, -20.0, 0.0),
                "eager": lambda: band_from_logp(x, DELTA, "kl", max_ratio=MAX_RATIO,
                                                validate=False),
                "eager+out": lambda: band_from_logp(x, DELTA, "kl", max_ratio=MAX_RATIO,
                                                    validate=False, out=out),
                "table": lambda: table(x, validate=False),
                # the default, validate=True: a device-side assertion on a GPU
                # (no synchronisation), a read back on the CPU
                "eager+validate": lambda: band_from_logp(x, DELTA, "kl", max_ratio=MAX_RATIO),
                "table+validate": lambda: table(x),
            }
            if compiled is not None:
                variants["compiled"] = lambda: compiled(x)
                variants["compiled fn"] = lambda: compiled_fn(x)
            ms = {name: timings(fn, dev, repeat) for name, fn in variants.items()}
            errors = {name: _error_ratio(*variants[name](), x)
                      for name in ("eager", "table", "compiled", "compiled fn")
                      if name in variants}
            rows.append((n, dtype_name, ms, errors))
    return rows


def report(rows, device: str) -> str:
    lines = [f"Device: {device}; torch {torch.__version__}; {platform.machine()}, "
             f"{torch.get_num_threads()} CPU threads; Band-KL, delta = {DELTA}, "
             f"max_ratio = {MAX_RATIO}; median times",
             "",
             "| N | dtype | variant | ms | spread ms | host ms per call (synchronised) "
             "| vs bisection | vs clamp | vs compiled | error / fp32 tol |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n, dtype, ms, errors in rows:
        base = {name: t[0] for name, t in ms.items()}
        for name, (t, fastest, slowest, host) in ms.items():
            err = f"{errors[name]:.2f}" if name in errors else ""
            vs_compiled = f"{t / base['compiled']:.1f}x" if "compiled" in base else ""
            lines.append(f"| {n:,} | {dtype} | {name} | {t:.3f} | {fastest:.3f}-{slowest:.3f} | "
                         f"{host:.3f} | {base['bisection'] / t:.1f}x | {t / base['clamp']:.1f}x | "
                         f"{vs_compiled} | {err} |")
    return "\n".join(lines)


def eager_targets(rows, n=524288, limit=5.0) -> str:
    """Issue 33's target, one line per dtype: eager ``band_from_logp`` (and
    with ``out=``) at ``n`` tokens within ``limit`` times a clamp, from this
    run's medians; empty where ``n`` was not measured."""
    lines = []
    for size, dtype, ms, _ in rows:
        if size != n:
            continue
        for name in ("eager", "eager+out"):
            ratio = ms[name][0] / ms["clamp"][0]
            lines.append(f"- {name}, {dtype}, {n:,} tokens: {ratio:.1f}x a clamp "
                         f"(target <= {limit:g}x): {verdict(ratio, limit, digits=1)}")
    return "\n".join(lines)


def main(argv=None, *, default_device="cpu", default_sizes=(32768, 524288)):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=default_device)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(default_sizes))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--smoke", action="store_true",
                        help="a quick CPU run of the whole script (CI)")
    parser.add_argument("--out", help="also write the markdown table here")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile variants (minutes of compiling)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.device, args.sizes, args.repeat = "cpu", [4096], 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu or --smoke", file=sys.stderr)
        return 2
    rows = run(args.device, args.sizes, args.repeat, with_compile=not args.no_compile)
    text = report(rows, args.device)
    targets = eager_targets(rows)
    if targets:
        text += "\n\nIssue 33's eager target:\n\n" + targets
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
