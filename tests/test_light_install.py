"""A trainer's environment gets the light core only (issue 31, item 5).

In each trainer environment (tests/trainer_envs.sh): the verification and
plotting stack is not installed, ``import bandsolve.torch`` loads nothing
beyond torch, numpy and numba (and what they need), and what needs a missing
extra says which. Here, in the main environment: the import check is shown
to fail on a module that does load the verifier.
"""

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

TRAINERS = ("verl", "trl", "skyrl", "openrlhf")
IN_TRAINER_ENV = any(importlib.util.find_spec(t) is not None for t in TRAINERS)
trainer_env = pytest.mark.skipif(not IN_TRAINER_ENV, reason="needs a trainer's environment")

#: ``python -c`` this, then a module name: prints each top-level module the
#: import of that module adds beyond torch, numpy and numba, one a line.
#: Allowed: the standard library, bandsolve, modules made at run time (no
#: file: torch generates some), and every distribution torch, numpy and numba
#: require, recursively, with torch's optional ones (its extras: torch._dynamo
#: imports optree where OpenRLHF's environment has it). torch, numpy and
#: numba are imported first, and one function compiled, so that what they
#: load on their own (optional extras of theirs such as scipy) is not charged
#: to the module.
CHECK = textwrap.dedent("""
    import importlib, importlib.metadata as md, re, sys
    import numba, numpy, torch
    numba.njit(lambda x: x + 1)(1)

    def closure(roots, extras_of=()):
        seen, todo = set(), list(roots)
        while todo:
            name = todo.pop()
            key = re.sub(r"[-_.]+", "-", name).lower()
            if key in seen:
                continue
            seen.add(key)
            try:
                requires = md.requires(name) or ()
            except md.PackageNotFoundError:
                continue
            for line in requires:
                # a dependency's own extras are not installed, but torch's
                # (optree: torch._dynamo imports it where it is) are torch's
                if "extra ==" not in line or key in extras_of:
                    todo.append(re.split(r"[ ;<>=!~\\[(]", line.strip(), maxsplit=1)[0])
        return seen

    allowed = closure(["torch", "numpy", "numba"], extras_of=("torch",))
    providers = md.packages_distributions()
    before = {m.split(".")[0] for m in sys.modules}
    importlib.import_module(sys.argv[1])
    for top in sorted({m.split(".")[0] for m in list(sys.modules)} - before):
        if top in sys.stdlib_module_names or top == "bandsolve":
            continue
        if getattr(sys.modules.get(top), "__file__", None) is None:
            continue
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(top, [top])}
        if not dists & allowed:
            print(top)
""")


def _added_by(module: str) -> list:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", CHECK, module], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


def test_import_check_reports_a_module_that_loads_plots():
    """The check can fail: bandsolve.studies.theory.figure loads matplotlib, which
    none of torch, numpy and numba requires."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("torch")
    assert "matplotlib" in _added_by("bandsolve.studies.theory.figure")


@pytest.mark.parametrize("blocked, command, extra", [
    ("cvxpy", ["verify", "--out", ""], "verify"),
    ("mpmath", ["verify", "--out", ""], "verify"),
    ("matplotlib", ["repro", "--skip-dynamics"], "repro"),
])
def test_cli_command_without_its_extra_names_the_extra(blocked, command, extra):
    """A command whose extra is missing exits 2 with one line that names the
    extra and the pip line, before it does any work."""
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            f"from bandsolve.cli import main; sys.exit(main({command!r}))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 2, run.stderr
    assert f"needs bandsolve's '{extra}' extra ({blocked}" in run.stderr
    assert f"[{extra}]" in run.stderr and "pip install" in run.stderr


@pytest.mark.trainers
@trainer_env
@pytest.mark.parametrize("dist", ["cvxpy", "clarabel", "matplotlib"])
def test_trainer_environment_holds_no_verifier_or_plots(dist):
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution(dist)


@pytest.mark.trainers  # and in the main environment, which holds the verifier
def test_import_bandsolve_torch_adds_nothing_beyond_torch_numpy_numba():
    pytest.importorskip("torch")
    assert _added_by("bandsolve.torch") == []


@pytest.mark.trainers
@trainer_env
@pytest.mark.parametrize("module, extra", [("bandsolve.convex", "verify"),
                                           ("bandsolve.certificate", "verify"),
                                           ("bandsolve.verify", "verify"),
                                           ("bandsolve.studies.theory.figure", "repro"),
                                           ("bandsolve.studies.report", "repro")])
def test_missing_extra_names_the_extra_in_a_trainer_environment(module, extra):
    from bandsolve._extras import MissingExtraError

    with pytest.raises(MissingExtraError, match=rf"'{extra}' extra .*pip install"):
        importlib.import_module(module)
