"""Regressions of issue 18 in the numpy core, each named after its break.

Every expected value comes from the independent mpmath reference
(tests/reference.py, 60+ digits) or from mpmath directly, never from the
package under test.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
import reference as ref

import bandsolve as bs


def _assert_bounds_exact(name, ps, delta, lower, upper, *, from_logp=False):
    for p, lo, hi in zip(np.atleast_1d(ps), np.atleast_1d(lower), np.atleast_1d(upper)):
        for side, value in (("lower", lo), ("upper", hi)):
            exact, _ = ref.bound(name, float(p), delta, side, from_logp=from_logp)
            assert ref.error_ratio(float(value), exact) <= 1.0, (name, p, delta, side, value,
                                                                   float(exact))


def _mp_alpha_binary(a, p, r):
    """g(p, r) for the alpha generator, straight from its formula at 60 digits."""
    with mp.workdps(60):
        a, p, r = mp.mpf(a), mp.mpf(p), mp.mpf(r)

        def f(u):
            return (u**a - 1 - a * (u - 1)) / (a * (a - 1))

        return p * f(r) + (1 - p) * f((1 - p * r) / (1 - p))


# --- item 8: 0 < |a| <= ~1e-16, where 1 - a rounds to 1 -------------------------
@pytest.mark.parametrize("a", [1e-17, 5e-17, -1e-17, -1e-16])
def test_alpha_with_a_below_float_resolution_is_not_silently_wrong(a):
    name = f"alpha:{a!r}"
    ps = np.array([1e-6, 0.08, 0.9])
    lower, upper = bs.band(ps, 0.05, name)
    _assert_bounds_exact(name, ps, 0.05, lower, upper)
    value = float(bs.binary_divergence(0.08, 2.2, name))
    exact = _mp_alpha_binary(a, 0.08, 2.2)
    assert abs(value - float(exact)) <= 1e-13 * float(exact)
