"""User-defined generators (Divergence.from_generator): what the package
estimates, where it refuses, and the wrong numbers of issue 18 (items 1 and 9),
each checked against the independent mpmath reference."""

import math

import numpy as np
import pytest
import reference

import bandsolve as bs

EPS = 2.0**-52


def lecam(u):
    """Le Cam's triangular discrimination, written plainly: (1 - u)^2 overflows
    near u = 1e154 although f(u)/u -> 1/2."""
    return (1 - u) ** 2 / (2 * (1 + u))


LECAM = bs.Divergence.from_generator("lecam", lecam)


def _within_user_tolerance(value, exact):
    """The documented user-generator accuracy: 1e-9 min(r, |r - 1|), 4 eps max(r, 1)."""
    exact = float(exact)
    return abs(value - exact) <= max(1e-9 * min(exact, abs(exact - 1)), 4 * EPS * max(exact, 1))


def test_user_generator_without_df_lecam_slope_at_infinity_not_inf_from_overflow():
    assert LECAM.slope_at_infinity == 0.5
    assert LECAM.f_at_zero == pytest.approx(0.5, rel=1e-14)


def test_user_generator_without_df_lecam_upper_at_tiny_p_not_one_over_p():
    # the slope read as inf gave upper = 1/p = 1e60; the bound is 2.0e54
    upper = float(bs.band(1e-60, 1e-6, LECAM)[1])
    exact, _ = reference.bound("lecam", 1e-60, 1e-6, "upper")
    assert _within_user_tolerance(upper, exact), (upper, float(exact))


def test_user_generator_without_df_lecam_tiny_delta_band_is_one_not_one_to_ten():
    # f'(1) estimated as 8e-12 instead of 0 gave (1, 10) for 1 +- 6e-20
    lower, upper = (float(b) for b in bs.band(0.1, 1e-40, LECAM))
    for side, value in (("lower", lower), ("upper", upper)):
        exact, _ = reference.bound("lecam", 0.1, 1e-40, side)
        assert _within_user_tolerance(value, exact), (side, value, float(exact))


def test_user_generator_without_df_lecam_lower_at_p_one():
    # p = 1 depends on the slope at infinity directly: lower 1.0 for 0.90476
    lower = float(bs.band(1.0, 0.05, LECAM)[0])
    exact, _ = reference.bound("lecam", 1.0, 0.05, "lower")
    assert _within_user_tolerance(lower, exact), (lower, float(exact))


def test_user_generator_without_df_lecam_batch_lower_near_p_one_is_not_subnormal():
    # a batch of 4096 (the warm-start path) gave lower 5e-324 for 1 - 3e-105
    p = np.full(4096, 0.9999999759212175)
    lower = bs.band(p, 2.76e-209, LECAM)[0]
    exact, _ = reference.bound("lecam", float(p[0]), 2.76e-209, "lower")
    assert all(_within_user_tolerance(float(v), exact) for v in lower)


def test_user_generator_slope_at_infinity_of_slowly_growing_f_is_inf():
    ulogu = bs.Divergence.from_generator("ulogu", lambda u: u * math.log(u) if u > 0 else 0.0)
    assert ulogu.slope_at_infinity == math.inf


def test_user_generator_whose_slope_cannot_be_read_is_refused_with_what_to_pass():
    # f is NaN far out, where f(u)/u would be read: the package cannot know
    # the limit and must not guess it
    far_nan = lambda u: (u - 1) ** 2 / (1 + u) if u < 1e100 else math.nan
    with pytest.raises(ValueError, match="pass slope_at_infinity"):
        bs.Divergence.from_generator("far-nan", far_nan)
    assert bs.Divergence.from_generator("far-nan", far_nan,
                                        slope_at_infinity=1.0).slope_at_infinity == 1.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(slope_at_infinity=math.nan), "slope_at_infinity"),
    (dict(slope_at_infinity=-1.0), "slope_at_infinity"),
    (dict(f_at_zero=-0.5), "f_at_zero"),
    (dict(f_at_zero=math.nan), "f_at_zero"),
])
def test_user_generator_nan_or_negative_edge_values_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bs.Divergence.from_generator("chi2-user", lambda u: (u - 1) ** 2, **kwargs)


def test_user_generator_not_convex_is_refused_at_construction():
    with pytest.raises(ValueError, match="not convex"):
        bs.Divergence.from_generator("sine", lambda u: math.sin(u - 1))


def _raises_between(low, high):
    def f(u):
        if low < u < high:
            raise ValueError("outside my domain")
        return (u - 1) ** 2
    return f


def test_user_generator_that_raises_where_the_root_lies_is_an_error_not_zero_zero():
    # a generator raising for 2 < u < 1e200 gave (0, 0), breaking lower <= 1 <= upper
    d = bs.Divergence.from_generator("raises", _raises_between(2.0, 1e200),
                                     slope_at_infinity=math.inf)
    for p in (0.01, np.full(5000, 0.01)):
        with pytest.raises(bs.BandSolveError, match="returned NaN or raised"):
            bs.band(p, 0.05, d)


def test_user_generator_that_raises_away_from_the_root_still_gives_the_exact_band():
    d = bs.Divergence.from_generator("raises-far", _raises_between(5.0, 1e200),
                                     slope_at_infinity=math.inf)
    lower, upper = bs.band(0.01, 0.05, d)
    assert float(lower) == 0.0
    exact, _ = reference.bound("chi2", 0.01, 0.05, "upper")
    assert _within_user_tolerance(float(upper), exact)


def test_user_generator_returning_nan_near_the_root_is_an_error_not_a_short_bound():
    # NaN for 20 < u < 30 gave upper 20.0 at p = 1e-4, where the root is 23.36
    d = bs.Divergence.from_generator(
        "nan-gap", lambda u: math.nan if 20 < u < 30 else (u - 1) ** 2, slope_at_infinity=math.inf)
    with pytest.raises(bs.BandSolveError, match="returned NaN or raised"):
        bs.band(1e-4, 0.05, d)


def test_user_generator_infinite_beyond_a_point_gets_a_message_naming_that_cause():
    d = bs.Divergence.from_generator("capped", lambda u: (u - 1) ** 2 if u <= 10 else math.inf)
    with pytest.raises(bs.BandSolveError, match="generator is \\+inf beyond some finite u"):
        bs.band(1e-4, 0.05, d)
