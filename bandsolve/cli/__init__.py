"""The ``bandsolve`` command line: ``bandsolve bounds | calibrate | verify | export | repro | doctor``.

One module per command, each with ``add(sub)``, which declares its arguments
and what it runs. :func:`main` imports only the module of the command it is
given (the others are listed by name and help alone), so ``bandsolve bounds``
loads the numpy API and nothing else: no cvxpy, mpmath, matplotlib or tqdm.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser", "builtin_divergences", "COMMANDS", "DEFAULT_OUT"]

#: where verify and repro write by default, under the current directory
DEFAULT_OUT = "bandsolve-output"

#: each command and its one-line help, in the order ``bandsolve --help`` lists them
COMMANDS = {
    "bounds": "print the band for some probabilities",
    "calibrate": "choose delta to match a clip rule",
    "verify": "check the fast bounds against certified convex programs",
    "export": "write a certified bound table (.npz or .pt)",
    "repro": "reproduce the paper's results at small scale",
    "doctor": "check this install: kernels, numba cache, torch and the verl / TRL plug-ins",
}


def builtin_divergences() -> tuple[str, ...]:
    """The registry's built-in divergence names
    (:data:`bandsolve.divergences.BUILTIN_NAMES`), read from its source so
    that ``--help`` imports neither numpy nor numba."""
    import ast
    from pathlib import Path

    source = (Path(__file__).parent.parent / "divergences" / "_registry.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "BUILTIN_NAMES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError("bandsolve.divergences._registry lost its BUILTIN_NAMES")


def aligned_table(header: str, cols: tuple[str, ...], rows: list, notes: tuple | list = ()) -> str:
    """``header``, then the columns ``cols`` right-aligned over ``rows`` (tuples
    of strings) under a rule of dashes, then ``notes``, one per line."""
    widths = [max(len(c), *(len(r[k]) for r in rows)) for k, c in enumerate(cols)]
    line = "  ".join(c.rjust(w) for c, w in zip(cols, widths))
    body = ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join([header, line, "-" * len(line), *body, *notes])


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bandsolve")
    except PackageNotFoundError:  # a source checkout on sys.path, not installed
        return "(not installed)"


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser for ``argv``: the command named there in full, the others by
    name and help only (``bandsolve --help`` lists them all)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    # the docstring's reST literals are for the API docs, not a terminal
    parser = argparse.ArgumentParser(prog="bandsolve",
                                     description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help in COMMANDS.items():
        if name == command:
            importlib.import_module(f"{__name__}.{name}").add(sub)
        else:
            sub.add_parser(name, help=help)
    return parser


#: the exit status of a command whose reader closed the pipe (``bandsolve
#: bounds ... | head -1``): a writer killed by SIGPIPE, 128 + 13, as coreutils'
#: ``seq`` or ``yes`` end there, so that a shell's ``pipefail`` reads it alike
EXIT_CLOSED_PIPE = 141


def _quiet_closed_pipe() -> int:
    """Point stdout at /dev/null, so that the interpreter's last flush of the
    unread output raises nothing more, and give :data:`EXIT_CLOSED_PIPE`."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_CLOSED_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    from ..api import BandSolveError

    try:
        result = args.run(args)
        sys.stdout.flush()  # inside the try: a closed pipe shows on this flush too
    except BrokenPipeError:
        return _quiet_closed_pipe()
    except (ValueError, TypeError, BandSolveError, OSError, ImportError) as exc:
        print(f"bandsolve: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)
