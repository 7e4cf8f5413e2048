"""GPU benchmark of bandsolve.torch (issue 4): N = 32,768, 524,288 and
8,388,608 tokens, float32 and bfloat16, eager, table and compiled, with and
without validation, against the paper's bisection and a plain clamp, all timed
in one run (under 5 minutes on one GPU).

    python benchmarks/gpu_bench.py [--out benchmarks/gpu.md]
    python benchmarks/gpu_bench.py --smoke     # the same code on the CPU, in seconds

Targets at 524,288 tokens: >= 100x faster than the bisection, within 5x of
the clamp. See torch_bench.py for what each variant is.

Issue 33's target (the eager CUDA path within 5x of a clamp at 524,288
tokens): the report ends with that verdict per dtype. Eager CUDA calls run
the table op by op since issue 41 (nothing compiles on a first call); each
variant has its device time (CUDA events) and its host time per call (wall
clock between two synchronisations). ``bash benchmarks/device/torch.sh``
runs it at 32,768 and 524,288 tokens after the CUDA tests:

    python benchmarks/gpu_bench.py --sizes 32768 524288 --out /tmp/gpu_bench.md
"""

from torch_bench import main

if __name__ == "__main__":
    raise SystemExit(main(default_device="cuda", default_sizes=(32768, 524288, 8388608)))
