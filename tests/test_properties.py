"""Invariants of the band, as hypothesis properties."""

import math

import numpy as np
import pytest
import reference as ref
from hypothesis import assume, given
from hypothesis import strategies as st
from problems import ALL_DIVERGENCES

import bandsolve as bs
from bandsolve.divergences import BUILTIN_DIVERGENCES

names = st.sampled_from(ALL_DIVERGENCES)
probs = st.one_of(st.floats(-300.0, 0.0).map(lambda e: 10.0**e), st.floats(0.0, 1.0),
                  st.floats(-16.0, -0.5).map(lambda e: 1.0 - 10.0**e))
deltas = st.floats(-8.0, 1.0).map(lambda e: 10.0**e)
CLOSED = [name for name, div in BUILTIN_DIVERGENCES.items() if div.has_closed_form]


@given(name=names, p=probs, delta=deltas)
def test_ordering_and_simplex(name, p, delta):
    lower, upper = bs.band(p, delta, name)
    assert 0.0 <= lower <= 1.0 <= upper
    if p > 0:
        assert upper <= 1.0 / p
    else:
        assert upper == math.inf and lower == 0.0


@given(name=names, p=probs, delta=deltas)
def test_bound_is_on_the_level_set(name, p, delta):
    """g_f(p, bound) == delta wherever the bound is not saturated."""
    assume(1e-150 < p < 1.0)
    lower, upper = bs.band(p, delta, name)
    for side, r in (("lower", float(lower)), ("upper", float(upper))):
        truth, saturated = ref.bound(name, p, delta, side)
        if saturated:
            continue
        # where the bound is so close to its end or to 1 that float64 cannot
        # resolve the level set, g is not informative
        # below 1e-6 a lower bound is guaranteed to 4 eps absolute only (the
        # tolerance), which no longer pins g to 1e-8 (neyman_chi2 at p = 3e-19)
        if side == "lower" and r < 1e-6 or abs(r - 1.0) < 1e-6:
            continue
        # near the simplex end g(p, r) depends on 1 - p r, which a float64 r
        # resolves only to eps / (1 - p r) (kl at p = 0.99, delta = 1 rounds
        # onto 1/p; neyman_chi2 at p = 1 - 3e-5, delta = 1 keeps 7 digits)
        if side == "upper" and 1.0 - p * r < 1e-6:
            continue
        g = float(bs.binary_divergence(p, r, name))
        assert g == pytest.approx(delta, rel=1e-8), (side, r)


@given(name=names, p=probs, delta=deltas)
def test_saturation_exactly_where_math_says(name, p, delta):
    """upper == 1/p iff g(p, 1/p) <= delta; lower == 0 iff g(p, 0) <= delta."""
    assume(0.0 < p < 1.0)
    lower, upper = bs.band(p, delta, name)
    for side, value, end in (("upper", upper, 1.0 / p), ("lower", lower, 0.0)):
        gap = ref.saturation_gap(name, p, delta, side)
        assume(abs(gap) > 1e-9)  # not a hair from the threshold
        if gap <= 0:
            assert value == end, (side, gap)
        else:
            # not saturated: the exact bound differs from the end, though the
            # float64 result may round onto it (e.g. kl's lower bound e^{-delta/p})
            truth, saturated = ref.bound(name, p, delta, side)
            assert not saturated
            assert ref.error_ratio(float(value), truth) <= 1


@given(name=names, p=probs, d1=deltas, d2=deltas)
def test_monotone_in_delta(name, p, d1, d2):
    d_small, d_big = sorted((d1, d2))
    lo_s, hi_s = bs.band(p, d_small, name)
    lo_b, hi_b = bs.band(p, d_big, name)
    # to rounding: bounds near r = 0 are exact to eps absolute (the tolerance)
    slack = 8 * np.finfo(float).eps
    assert lo_b <= lo_s + slack and hi_s <= hi_b * (1 + slack)


@given(name=names, p1=probs, p2=probs, delta=deltas)
def test_monotone_in_p(name, p1, p2, delta):
    """upper non-increasing and lower non-decreasing in p (to rounding)."""
    p_small, p_big = sorted((p1, p2))
    lo_s, hi_s = bs.band(p_small, delta, name)
    lo_b, hi_b = bs.band(p_big, delta, name)
    slack = 8 * np.finfo(float).eps
    assert hi_b <= hi_s * (1 + slack)
    assert lo_s <= lo_b + slack


@given(name=names, p=st.floats(1e-3, 1 - 1e-3), delta=deltas)
def test_mirror_identity(name, p, delta):
    """r_lo(p) = [1 - (1 - p) r_hi(1 - p)] / p, where it does not cancel badly."""
    lower, _ = bs.band(p, delta, name)
    _, upper_mirror = bs.band(1.0 - p, delta, name)
    mirrored = (1.0 - (1.0 - p) * upper_mirror) / p
    # the identity as written loses about eps / p; (1 - p) is exact only
    # up to rounding of 1 - p itself
    assert mirrored == pytest.approx(float(lower), abs=64 * np.finfo(float).eps / p)


@pytest.mark.parametrize("name", CLOSED)
@given(p=probs, delta=deltas)
def test_closed_forms_agree_with_root_finder(name, p, delta):
    closed = bs.get_divergence(name)
    generic = closed.without_closed_form()
    assert not generic.has_closed_form
    lo_c, hi_c = bs.band(p, delta, closed)
    lo_r, hi_r = bs.band(p, delta, generic)
    for got, truth_side, other in (("lower", lo_c, lo_r), ("upper", hi_c, hi_r)):
        r = float(other)
        tol = max(2e-12 * min(r, abs(r - 1)), 8 * np.finfo(float).eps * max(r, 1))
        assert abs(float(truth_side) - r) <= tol or (math.isinf(r) and math.isinf(truth_side)), got


def test_user_defined_divergence_matches_builtin():
    """A generator written by a user, without derivative or edge values, gives
    kl's band through the generic root finder."""
    import math as m

    def f(u):
        return u - 1.0 - m.log(u) if u > 0 else m.inf

    mine = bs.Divergence.from_generator("my_kl", f)
    assert mine.f_at_zero == math.inf
    assert mine.slope_at_infinity == pytest.approx(1.0, rel=1e-6)
    p = np.array([1e-9, 1e-3, 0.08, 0.5, 0.9, 0.999])
    lo_u, hi_u = bs.band(p, 0.05, mine)
    lo_k, hi_k = bs.band(p, 0.05, "kl")
    # the tolerance shape, 1e3 looser: f is written naively (it cancels
    # near u = 1) and f' is a central difference
    for got, want in ((lo_u, lo_k), (hi_u, hi_k)):
        tol = np.maximum(1e-9 * np.minimum(want, abs(want - 1)), 4e-16 * np.maximum(want, 1))
        assert np.all(abs(got - want) <= tol), (got, want)


def test_user_defined_divergence_with_linear_term_and_saturation():
    """u log u has f'(1) = 1: the linear part is removed, the band is rkl's."""
    import math as m

    def f(u):
        return u * m.log(u) if u > 0 else 0.0

    def df(u):
        return m.log(u) + 1.0

    mine = bs.Divergence.from_generator("ulogu", f, df=df, slope_at_infinity=math.inf)
    assert mine.f_at_zero == pytest.approx(1.0)  # after removing u - 1
    p = np.array([0.01, 0.3, 0.7, 0.95])
    for d in (0.05, 2.0):  # 2.0 saturates rkl's upper bound for p > e^-2
        lo_u, hi_u = bs.band(p, d, mine)
        lo_r, hi_r = bs.band(p, d, "rkl")
        np.testing.assert_allclose(lo_u, lo_r, rtol=1e-10)
        np.testing.assert_allclose(hi_u, hi_r, rtol=1e-10)


def test_user_generator_must_vanish_at_one():
    with pytest.raises(ValueError, match="f\\(1\\) = 0"):
        bs.Divergence.from_generator("bad", lambda u: u * u)
