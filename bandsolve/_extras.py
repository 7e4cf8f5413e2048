"""The optional extras, and the one clear error a missing one gives.

The core (numpy, scipy, numba) serves ``band``, ``band_from_logp``, the tables
and the torch adapter: all a trainer's environment gets. The verifier and the
figures need more, each behind an extra of pyproject.toml:

========  ==========================================  ===================================
extra     modules                                     used by
========  ==========================================  ===================================
verify    cvxpy, clarabel, mpmath, tqdm               bandsolve.verify, .convex, .certificate
plots     matplotlib, tqdm                            the figures
repro     both, and torch                             bandsolve.studies (``bandsolve repro``)
========  ==========================================  ===================================

Each of those packages calls :func:`require` once, first thing, so that a
missing extra is one :class:`MissingExtraError` naming the extra and the pip
line that installs it (pandas' ``import_optional_dependency``), not a
``ModuleNotFoundError`` from deep inside a solver.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys

__all__ = ["EXTRAS", "MissingExtraError", "pip_command", "require"]

#: the import names each extra provides (torch, part of ``repro``, is optional
#: there: the dynamics study says "not run" without it)
EXTRAS: dict[str, tuple[str, ...]] = {
    "verify": ("cvxpy", "clarabel", "mpmath", "tqdm"),
    "plots": ("matplotlib", "tqdm"),
    "torch": ("torch",),
}
EXTRAS["repro"] = tuple(dict.fromkeys(EXTRAS["verify"] + EXTRAS["plots"]))


class MissingExtraError(ImportError):
    """An optional extra of bandsolve is not installed; the message says which
    and how to install it."""


def _installed(module: str) -> bool:
    if module in sys.modules:  # None there: imports of it are refused
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` can be
    imported. ``feature`` names what needs it, for the message. Finds the
    modules without importing them (no cost when present)."""
    missing = [m for m in EXTRAS[extra] if not _installed(m)]
    if missing:
        raise MissingExtraError(
            f"{feature} needs bandsolve's '{extra}' extra ({', '.join(missing)} not installed): "
            f"{pip_command(extra)}")


def _install_source() -> tuple[str, bool] | None:
    """(url, editable) this bandsolve was installed from (its direct_url.json),
    or None: bandsolve is on no package index, so a fix must name it."""
    try:
        text = importlib.metadata.distribution("bandsolve").read_text("direct_url.json")
        info = json.loads(text) if text else None
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return None
    return info["url"], bool(info.get("dir_info", {}).get("editable"))


def pip_command(extra: str | None = None, force: bool = False) -> str:
    """The pip command that installs bandsolve (with ``extra``) again, from
    where it came: a bare "bandsolve[verl]" would look for it on an index.
    ``force``: reinstall bandsolve alone (``--force-reinstall --no-deps``),
    every installed dependency, a trainer's pins among them, left as it is."""
    flags = "--force-reinstall --no-deps " if force else ""
    spec = f"[{extra}]" if extra and not force else ""
    source = _install_source()
    if source is None:
        return f'pip install {flags}-e ".{spec}" (in the bandsolve checkout)'
    url, editable = source
    if editable and url.startswith("file://"):
        return f'pip install {flags}-e "{url[len("file://"):]}{spec}"'
    return f'pip install {flags}"bandsolve{spec} @ {url}"'
