"""``python -m analysis.dynamics``: runs ``bandsolve.analysis.studies`` (the dynamics study).

The code lives in the package, so that it ships in the wheel (``bandsolve``
commands need it); this folder keeps the scripts' names in a checkout.
Outputs go to ``--out`` (default ``figures`` under the current directory).
"""

from bandsolve.analysis.studies import main

if __name__ == "__main__":
    raise SystemExit(main())
