"""Regressions of the numpy core found by the high-precision review of issue 18,
each named after its break and checked against the independent mpmath
reference (tests/reference.py)."""

import math

import mpmath as mp
import pytest
import reference
from hypothesis import given
from hypothesis import strategies as st

import bandsolve as bs

BINARY_NAMES = ["kl", "rkl", "tv", "chi2", "neyman_chi2", "hellinger", "js", "alpha:0.5",
                "alpha:2", "alpha:-1"]


def _exact_binary(name, p, r):
    """g(p, r) for the float inputs taken as exact. 400 digits: 1 - p and
    1 - p r are then exact for every float64 p >= 1e-300 with 60 digits to
    spare. A p r above 1 by rounding (documented: clipped) is the end, u2 = 0."""
    with mp.workdps(400):
        p_, r_ = mp.mpf(p), mp.mpf(r)
        pc = 1 - p_
        u2 = max(1 - p_ * r_, mp.mpf(0)) / pc
        return reference.binary(name, p_, pc, r_, u2)


def test_binary_divergence_cancelled_one_minus_p_r_near_the_simplex_end():
    # 1 - p r formed as (1 - p) - p (r - 1) lost every digit: 25.1049 for 25.0173
    value = float(bs.binary_divergence(0.3, 3.333333333333333, "kl"))
    exact = float(_exact_binary("kl", 0.3, 3.333333333333333))
    assert value == pytest.approx(exact, rel=1e-12)


def test_binary_divergence_at_r_equal_fl_one_over_p_is_finite_not_inf():
    # fl(p r) rounded to 1 and the kernel took the simplex end: inf for 39.71
    p = 3e-200
    value = float(bs.binary_divergence(p, 1 / p, "kl"))
    assert math.isfinite(value)
    assert value == pytest.approx(float(_exact_binary("kl", p, 1 / p)), rel=1e-12)


@given(name=st.sampled_from(BINARY_NAMES), log_p=st.floats(-300.0, -1e-6),
       closeness=st.one_of(st.floats(-16.0, -1.0), st.just(None)),
       fraction=st.floats(0.0, 1.0))
def test_binary_divergence_relative_accuracy_against_mpmath(name, log_p, closeness, fraction):
    """The documented accuracy (docs/numpy.md): where g is finite and normal,
    |g - g_true| <= 1e-12 g_true, for r anywhere in [0, 1/p], including within
    1e-16 relative of the simplex end 1/p."""
    p = 10.0**log_p
    r = (1 / p) * (1 - 10.0**closeness) if closeness is not None else fraction / p
    r = min(r, 1 / p)
    value = float(bs.binary_divergence(p, r, name))
    exact = _exact_binary(name, p, r)
    if mp.isinf(exact):
        assert value == math.inf
    elif exact > 1e-300:
        assert abs(value - exact) <= 1e-12 * exact, (name, p, r, value, float(exact))


@pytest.mark.parametrize("a", [1e-17, -1e-17, 5e-17, 2.0**-55])
def test_alpha_parameter_whose_one_minus_a_rounds_to_one_is_refused_not_silently_wrong(a):
    # alpha:1e-17 gave upper 2 where the band (the kl limit) is 48781.8, and
    # NaN from binary_divergence
    with pytest.raises(ValueError, match="use divergence='kl'"):
        bs.band(1e-6, 0.08, f"alpha:{a!r}")
    with pytest.raises(ValueError, match="too close to 0"):
        bs.binary_divergence(0.08, 2.2, bs.alpha_divergence(a))


def test_alpha_parameter_just_above_the_refusal_matches_the_kl_limit():
    # a = 1e-16: 1 - a is representable; the band is kl's to O(a)
    for p in (1e-6, 0.08, 0.9):
        for side, value in zip(("lower", "upper"), bs.band(p, 0.05, "alpha:1e-16")):
            exact, _ = reference.bound("kl", p, 0.05, side)
            assert reference.error_ratio(float(value), exact) <= 1.0, (p, side)
