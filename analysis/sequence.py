"""``python -m analysis.sequence``: the sequence part of the dynamics study
(``bandsolve.analysis.studies``, ``--part sequence``).

The code lives in the package, so that it ships in the wheel (``bandsolve``
commands need it); this folder keeps the scripts' names in a checkout.
Outputs go to ``--out`` (default ``figures`` under the current directory).
"""

from bandsolve.analysis.studies import main

if __name__ == "__main__":
    raise SystemExit(main(["--part", "sequence", *__import__("sys").argv[1:]]))
