"""The built-in divergences by name, and :func:`get_divergence`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import chi2, hellinger, js, kl, neyman_chi2, rkl, tv
from ._record import Divergence, DivergenceLike
from .alpha import alpha_divergence

__all__ = ["BUILTIN_DIVERGENCES", "get_divergence"]

#: Each family module's ``DIVERGENCE``, by name (``alpha:<a>`` is built on demand).
BUILTIN_DIVERGENCES: Mapping[str, Divergence] = MappingProxyType({
    module.DIVERGENCE.name: module.DIVERGENCE
    for module in (kl, rkl, tv, chi2, neyman_chi2, hellinger, js)
})


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
