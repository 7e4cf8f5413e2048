"""The studies reproduce on another machine (issue 43): the same code and
seeds write the same CSV bytes, whatever the thread count, the number of
processes or the CPU's own vector kernels.

The committed quick run (``figures/dynamics_*.csv``) was made on another
machine; a run in a fresh process, with another thread count and on this
machine's kernels, must give its rows byte for byte. The stress test is the
hard case: 32 updates per batch make it chaotic, so one ulp of difference in
torch's kernels (AVX-512 against AVX2) reaches the printed digits.
"""

import csv
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the stress test's rules this test reruns: "constant" is the first whose
#: rows moved under this machine's AVX-512 kernels (step 29 of seed 2)
RULES = ("constant", "band-kl")

_RUN = """
import csv, sys
import torch
torch.set_num_threads(2)  # not the committed run's: each run takes one thread anyway
from bandsolve.studies.jobs import Jobs
from bandsolve.studies.stress import study
result = study.run(study.smoke_config(), Jobs({processes}, pinned=True), rules={rules!r})
header, rows = result.table()
csv.writer(sys.stdout).writerows([header, *rows])
"""


def _rows(text: str, rules) -> list[list[str]]:
    rows = list(csv.reader(text.splitlines()))
    return [rows[0]] + [r for r in rows[1:] if r[0] in rules]


@pytest.mark.parametrize("processes", [1, 2])
def test_regression_a_fresh_process_writes_the_committed_stress_rows_byte_for_byte(processes):
    """A fresh run of the committed quick stress test differed from the
    committed CSV from the last digit (0.00879023 against 0.00879022) up: the
    runs used whatever vector kernels the CPU offered. Pinned (the report's
    runs), in this process (1) or in workers (2), the rows are the
    committed ones."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}  # the run pins them itself
    code = _RUN.format(processes=processes, rules=RULES)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=ROOT, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    committed = (ROOT / "figures" / "dynamics_stress.csv").read_text()
    fresh, expected = _rows(run.stdout, RULES), _rows(committed, RULES)
    assert len(expected) == 1 + len(RULES) * 5 * 60  # the smoke run's 5 seeds x 60 steps
    assert fresh == expected
