"""``python -m analysis.bounds``: runs ``bandsolve.analysis.bounds``.

The code lives in the package, so that it ships in the wheel (``bandsolve``
commands need it); this folder keeps the scripts' names in a checkout.
Outputs go to ``--out`` (default ``figures`` under the current directory).
"""

from bandsolve.analysis.bounds import main

if __name__ == "__main__":
    for path in main():
        print(path)
