"""The built-in divergences by name, and :func:`get_divergence`."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType

from ._record import Divergence, DivergenceLike
from .alpha import SAMPLES, alpha_divergence

__all__ = ["BUILTIN_DIVERGENCES", "BUILTIN_NAMES", "SAMPLE_NAMES", "get_divergence"]

#: The built-in divergences, one line each, in the order commands list them:
#: each is the ``DIVERGENCE`` of the module of its name in this package.
#: A literal, so that ``bandsolve.cli`` reads it for ``--help`` without
#: importing numba.
BUILTIN_NAMES = (
    "kl",
    "rkl",
    "tv",
    "chi2",
    "neyman_chi2",
    "hellinger",
    "js",
    "jeffreys",
    "le_cam",
)


def _load(name: str) -> Divergence:
    div = importlib.import_module(f"{__package__}.{name}").DIVERGENCE
    if div.name != name:
        raise RuntimeError(f"bandsolve.divergences.{name} holds a divergence named {div.name!r}")
    return div


#: Each built-in by name (``alpha:<a>`` is built on demand).
BUILTIN_DIVERGENCES: Mapping[str, Divergence] = MappingProxyType(
    {name: _load(name) for name in BUILTIN_NAMES})

#: The built-ins and the alpha family at its sample parameters: what
#: ``bandsolve verify`` sweeps and the tests run against every backend.
SAMPLE_NAMES = BUILTIN_NAMES + tuple(alpha_divergence(a).name for a in SAMPLES)


def get_divergence(spec: DivergenceLike) -> Divergence:
    """Resolve a registry name, ``"alpha:<a>"``, or a :class:`Divergence`.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones), or ``"alpha"``
        without a parameter.
    TypeError
        For anything that is neither a string nor a Divergence.
    """
    if isinstance(spec, Divergence):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"divergence must be a name or a Divergence (got {type(spec).__name__})")
    name = spec.strip().lower()
    if name in BUILTIN_DIVERGENCES:
        return BUILTIN_DIVERGENCES[name]
    if name.startswith("alpha"):
        head, sep, value = name.partition(":")
        if head == "alpha" and sep and value:
            if "_" in value:
                # float() reads "2_0" as 20: a typo for 2.0 or 0.5 ("0_5")
                # must not silently name another divergence
                raise ValueError(f"cannot read the alpha parameter in {spec!r} (write it "
                                 "without underscores, e.g. 'alpha:0.5')")
            try:
                a = float(value)
            except ValueError:
                raise ValueError(f"cannot read the alpha parameter in {spec!r}") from None
            return alpha_divergence(a)
        if head == "alpha":
            raise ValueError("the alpha divergence needs its parameter: write 'alpha:0.5' "
                             "or pass bandsolve.alpha_divergence(0.5)")
    known = ", ".join(sorted(BUILTIN_DIVERGENCES)) + ", alpha:<a>"
    raise ValueError(f"unknown divergence {spec!r}; known: {known}")
