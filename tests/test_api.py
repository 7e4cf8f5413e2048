"""The public numpy API: shapes, dtypes, edges, and bad input."""

import math

import numpy as np
import pytest
import reference as ref
from problems import ALL_DIVERGENCES

import bandsolve as bs


def test_worked_example_tail_token():
    """p = 0.08: PPO lets it rise by 0.016, Band-KL at delta 0.05 by about 0.113."""
    _, upper = bs.band(0.08, 0.05, "kl")
    rise = 0.08 * (float(upper) - 1.0)
    truth = 0.08 * (ref.bound("kl", 0.08, 0.05, "upper")[0] - 1)
    assert rise == pytest.approx(float(truth), rel=1e-13)
    assert round(rise, 3) == 0.113
    assert 0.08 * 0.2 == pytest.approx(0.016)


@pytest.mark.parametrize("name, expected", [
    ("kl", math.exp(-0.3)), ("tv", 0.7), ("rkl", 1.0), ("chi2", 1.0),
    ("hellinger", (1 - 0.15) ** 2),
    # the textbook closed forms at p = 1 (neyman_chi2: 1 / (1 + delta))
    *((name, float(ref.closed_band(name, 1.0, 0.3)[0]))
      for name in ref.closed_band_names(ALL_DIVERGENCES))])
def test_p_equal_one_limits(name, expected):
    """At p = 1 the upper bound is 1 and the lower bound is the limit from the left."""
    lower, upper = bs.band(1.0, 0.3, name)
    assert upper == 1.0
    assert float(lower) == pytest.approx(expected, rel=1e-14)
    lo_l, hi_l = bs.band_from_logp(0.0, 0.3, name)
    assert (lo_l, hi_l) == (lower, upper)


@pytest.mark.parametrize("name", ALL_DIVERGENCES)
def test_p_equal_zero(name):
    lower, upper = bs.band(0.0, 0.05, name)
    assert (lower, upper) == (0.0, math.inf)
    assert bs.band(0.0, 0.05, name, max_ratio=10)[1] == 10.0
    assert bs.band_from_logp(-np.inf, 0.05, name)[1] == math.inf


def test_continuity_at_the_ends():
    for name in ALL_DIVERGENCES:
        lo1, hi1 = bs.band(1.0, 0.1, name)
        lo, hi = bs.band_from_logp(-1e-200, 0.1, name)
        # where f grows like u log u (rkl, jeffreys) the lower bound approaches
        # its limit only like 1/log(1/(1-p)): 1 - p = 1e-200 is still 2e-4 from
        # it, and there the bound must be the exact one instead
        truth, _ = ref.bound(name, -1e-200, 0.1, "lower", from_logp=True)
        if abs(float(truth) - float(lo1)) <= 1e-13:
            assert float(lo) == pytest.approx(float(lo1), abs=1e-12), name
        else:
            assert ref.error_ratio(float(lo), truth) <= 1.0, name
        assert float(hi) == pytest.approx(1.0, abs=1e-12)


def test_max_ratio_caps_only_the_upper_bound():
    p = np.array([1e-4, 0.08, 0.9])
    lo, hi = bs.band(p, 0.05, "kl")
    lo_c, hi_c = bs.band(p, 0.05, "kl", max_ratio=2.0)
    np.testing.assert_array_equal(lo_c, lo)
    np.testing.assert_array_equal(hi_c, np.minimum(hi, 2.0))


def test_shapes_broadcast_like_a_ufunc():
    p = np.linspace(0.01, 0.99, 6).reshape(2, 3)
    delta = np.array([[0.01], [0.1]])
    lo, hi = bs.band(p, delta)
    assert lo.shape == hi.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            lo_ij, hi_ij = bs.band(p[i, j], delta[i, 0])
            assert (lo[i, j], hi[i, j]) == (lo_ij, hi_ij)
    lo, hi = bs.band(0.3, [0.01, 0.1])
    assert lo.shape == (2,)


def test_scalar_input_gives_0d_float64_arrays():
    lo, hi = bs.band(0.5, 0.1)
    assert isinstance(lo, np.ndarray) and lo.shape == () and lo.dtype == np.float64
    assert isinstance(hi, np.ndarray) and hi.shape == ()
    g = bs.binary_divergence(0.5, 1.2)
    assert g.shape == () and g.dtype == np.float64


def test_empty_arrays_give_empty_arrays():
    lo, hi = bs.band(np.empty((0, 3)), 0.1)
    assert lo.shape == hi.shape == (0, 3)
    lo, hi = bs.band_from_logp([], 0.1, "chi2")
    assert lo.shape == (0,)
    assert bs.binary_divergence([], 1.0).shape == (0,)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64, np.uint8])
def test_real_dtypes_are_accepted_and_results_are_float64(dtype):
    p = np.array([0, 1], dtype=dtype) if np.dtype(dtype).kind in "iu" else \
        np.array([0.25, 0.5], dtype=dtype)
    lo, hi = bs.band(p, 0.1)
    assert lo.dtype == hi.dtype == np.float64
    expect = bs.band(p.astype(np.float64), 0.1)
    np.testing.assert_array_equal(lo, expect[0])


def test_non_contiguous_input():
    p = np.linspace(0.01, 0.99, 20)[::3]
    lo, hi = bs.band(p, 0.1)
    np.testing.assert_array_equal(hi, bs.band(p.copy(), 0.1)[1])


@pytest.mark.parametrize("bad, match", [
    ([0.5, np.nan, np.nan], r"p contains NaN: 2 of 3 elements, the first at index \(1,\)"),
    ([0.5, np.inf], "p contains inf"),
    ([[0.5, 1.5], [-0.1, 0.2]], r"must lie in \[0, 1\]: 2 of 4 elements, the first at index \(0, 1\)"),
    (-1e-300, r"must lie in \[0, 1\]: got -1e-300"),
])
def test_bad_probabilities(bad, match):
    with pytest.raises(ValueError, match=match):
        bs.band(bad, 0.1)


# a batch large enough that a closed form checks p's range in its own pass
# (_validate.DEFERRED_RANGE_MIN), for every closed form and through FastBand
_LARGE = 1 << 16


@pytest.mark.parametrize("name", ["tv", "chi2", "hellinger", "neyman_chi2"])
@pytest.mark.parametrize("bad, index, match", [
    (np.nan, 7, r"p contains NaN: 1 of 65536 elements, the first at index \(7,\)"),
    (np.inf, 0, r"p contains inf: 1 of 65536 elements, the first at index \(0,\)"),
    (-np.inf, _LARGE - 1, r"p contains -inf: 1 of 65536 elements, the first at index \(65535,\)"),
    (1.0 + 2.0 ** -52, 100, r"must lie in \[0, 1\]: 1 of 65536 elements, the first at index \(100,\)"),
    (-5e-324, _LARGE - 1, r"must lie in \[0, 1\]: 1 of 65536 elements, the first at index \(65535,\)"),
])
def test_a_large_batch_whose_range_the_kernel_checks_raises_the_usual_error(name, bad, index,
                                                                             match):
    """Regression: the closed forms count p outside [0, 1] in their own pass
    over a large batch instead of a separate check; one bad element among
    65,536 must still raise the separate check's message, with and without
    out=, through band and FastBand, and never return bounds."""
    p = np.linspace(0.0, 1.0, _LARGE)  # both ends included: valid
    bs.band(p, 0.05, name)
    p[index] = bad
    out = (np.empty(_LARGE), np.empty(_LARGE))
    for call in (lambda: bs.band(p, 0.05, name), lambda: bs.band(p, 0.05, name, out=out),
                 lambda: bs.FastBand(name, 0.05).band(p)):
        with pytest.raises(ValueError, match=match):
            call()


def test_a_bad_large_batch_is_reported_before_a_bad_delta_or_out():
    """Regression: with p's range check left to the kernel, the other
    arguments are checked first; an invalid p must still be the error
    reported, as when p was checked first."""
    p = np.full(_LARGE, 0.5)
    p[3] = np.nan
    for call in (lambda: bs.band(p, -1.0, "tv"), lambda: bs.band(p, 0.05, "no-such"),
                 lambda: bs.band(p, 0.05, "tv", max_ratio=0.5),
                 lambda: bs.band(p, 0.05, "tv", out=(np.empty(3), np.empty(3))),
                 lambda: bs.band(p, 0.05, "tv", out=(p, np.empty(_LARGE)))):
        with pytest.raises(ValueError, match=r"p contains NaN: 1 of 65536 .*\(3,\)"):
            call()


@pytest.mark.parametrize("bad, match", [
    (0.1, r"must be <= 0 \(a log-probability\)"), (np.nan, "contains NaN"),
    (np.inf, r"contains \+inf")])
def test_bad_logp(bad, match):
    with pytest.raises(ValueError, match=match):
        bs.band_from_logp([-1.0, bad], 0.1)


@pytest.mark.parametrize("bad", [0.0, -0.1, np.nan, np.inf, -np.inf])
def test_bad_delta(bad):
    with pytest.raises(ValueError, match="delta"):
        bs.band(0.5, [0.1, bad])


@pytest.mark.parametrize("bad", ["0.5", [1 + 2j], True, np.array([True]),
                                 np.array([0.5], dtype=object), None])
def test_non_numeric_input_is_a_type_error(bad):
    with pytest.raises(TypeError, match="p must be a real number"):
        bs.band(bad, 0.1)


def test_unknown_divergence_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown divergence 'kullback'.*known: chi2"):
        bs.band(0.5, 0.1, "kullback")
    with pytest.raises(TypeError, match="divergence must be a name"):
        bs.band(0.5, 0.1, 3)


@pytest.mark.parametrize("spec", ["alpha", "alpha:0", "alpha:1", "alpha:nan", "alpha:x"])
def test_alpha_needs_a_valid_parameter(spec):
    with pytest.raises(ValueError, match="alpha"):
        bs.band(0.5, 0.1, spec)
    with pytest.raises(ValueError):
        bs.alpha_divergence(1.0)


def test_alpha_name_and_object_agree():
    assert bs.band(0.3, 0.1, "alpha:0.5") == bs.band(0.3, 0.1, bs.alpha_divergence(0.5))


@pytest.mark.parametrize("bad, exc", [(0.5, ValueError), (np.nan, ValueError),
                                      ("10", TypeError), (True, TypeError)])
def test_bad_max_ratio(bad, exc):
    with pytest.raises(exc, match="max_ratio"):
        bs.band(0.5, 0.1, max_ratio=bad)


def test_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="do not broadcast"):
        bs.band(np.ones(3) / 2, np.ones(4) / 10)


@pytest.mark.parametrize("name", ALL_DIVERGENCES)
def test_binary_divergence_against_mpmath(name):
    import mpmath as mp

    # r = 4 is 1/p exactly for p = 0.25; 400 digits resolve 1 - p r at p r = 1e-50
    for p, r in [(0.25, 0.0), (0.3, 0.5), (0.3, 1.0), (0.3, 2.0), (0.25, 4.0),
                 (1e-200, 1e150), (1.0, 0.4), (1 - 1e-9, 1.0000000001), (0.9, 1e-9)]:
        got = float(bs.binary_divergence(p, r, name))
        with mp.workdps(400):
            pp = mp.mpf(p)
            truth = ref.binary(name, pp, 1 - pp, mp.mpf(r))
        if mp.isinf(truth):
            assert got == math.inf
        else:
            assert got == pytest.approx(float(truth), rel=1e-12, abs=1e-300), (p, r)


def test_binary_divergence_rejects_ratios_outside_the_simplex():
    with pytest.raises(ValueError, match="r must be >= 0"):
        bs.binary_divergence(0.5, -0.1)
    with pytest.raises(ValueError, match=r"r must be <= 1/p"):
        bs.binary_divergence(0.5, 2.1)
    # 1/p computed in floating point is accepted
    assert np.isfinite(bs.binary_divergence(0.3, 1 / 0.3, "chi2"))


@pytest.mark.parametrize("name", ALL_DIVERGENCES)
def test_subnormal_p_gives_finite_ordered_bounds(name):
    """Regression: 1/p overflows for subnormal p, and 0 * inf made a NaN."""
    p = np.array([5e-324, 1e-310, 2.2e-308])
    lo, hi = bs.band(p, 0.1, name)
    assert np.all((0 <= lo) & (lo <= 1) & (1 <= hi))
    assert not np.isnan(hi).any()


def test_warm_start_tables_are_reused_per_divergence_and_delta():
    """A trainer calls with the same delta every step: the start tables are
    explicit state (a WarmStart the caller holds, issue 22), built once per
    (divergence, delta) and rebuilt for another; they give the bounds of
    the cold path, and no call fills a process-wide memo."""
    from bandsolve import _solve, _validate

    def request(delta, name, p):
        return _validate.band_request(p, delta, name)

    p = np.geomspace(1e-8, 1 - 1e-9, _solve.WARM_START_MIN_SIZE)
    warm = _solve.WarmStart()
    first = _solve.solve(request(0.05, "kl", p), warm)
    tables = warm.tables(bs.get_divergence("kl"), 0.05)
    again = _solve.solve(request(0.05, "kl", p), warm)
    assert warm.tables(bs.get_divergence("kl"), 0.05) is tables  # built once
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(first, bs.band(p, 0.05, "kl")):
        np.testing.assert_array_equal(a, b)
    other_delta = _solve.solve(request(0.2, "kl", p), warm)
    other_divergence = _solve.solve(request(0.05, "rkl", p), warm)
    # the other calls solved their own problems: the same as cold small batches
    for got, delta, name in ((other_delta, 0.2, "kl"), (other_divergence, 0.05, "rkl")):
        cold = [np.concatenate(parts) for parts in zip(*(
            bs.band(chunk, delta, name) for chunk in np.array_split(p, 4)))]
        for g, c in zip(got, cold):
            np.testing.assert_allclose(g, c, rtol=1e-12, atol=1e-15)
    assert not hasattr(bs.api, "_start_tables")  # no hidden global memo


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="longdouble is float64 on this platform")
@pytest.mark.parametrize("call, match", [
    (lambda: bs.band(np.longdouble(1) + np.longdouble(2) ** -60, 0.05), r"p must lie in \[0, 1\]"),
    (lambda: bs.band(np.array([0.5, -np.longdouble(10) ** -4000]), 0.05), r"index \(1,\)"),
    (lambda: bs.band_from_logp(np.longdouble(2) ** -1080, 0.05), "must be <= 0"),
    (lambda: bs.band(0.5, -np.longdouble(10) ** -4000), "must be positive"),
    (lambda: bs.binary_divergence(0.5, -np.longdouble(10) ** -4000, "kl"), "must be >= 0"),
])
def test_longdouble_out_of_range_is_rejected_before_rounding(call, match):
    """Rounding to float64 would carry these invalid values onto 1, -0.0 or
    0, inside the range: the range test runs in the input's own precision."""
    with pytest.raises(ValueError, match=match):
        call()


def test_import_bandsolve_defers_numba_to_first_use():
    # trainers' plug-in registries import bandsolve in every process
    import subprocess
    import sys
    code = ("import sys, bandsolve; a = 'numba' in sys.modules; bandsolve.band; "
            "print(a, 'numba' in sys.modules, sorted(bandsolve.__all__) == sorted(dir(bandsolve))"
            " or set(bandsolve.__all__) <= set(dir(bandsolve)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=600).stdout.split()
    assert out == ["False", "True", "True"]


def test_on_failure_nan_returns_nan_only_where_a_bound_failed():
    """Issue 22, part 4: the kernels report failure per element (an int8
    status), and band(on_failure="nan") returns NaN there instead of raising.
    alpha:3 written by a user (no log-domain form, unlike the built-in since
    issue 18.5) at p = 1e-300, delta = 1e300 overflows g next to its upper
    bound (test_accuracy.py::test_regression_overflowing_g_raises_instead_of_a_wrong_bound);
    p = 0.3 beside it is unaffected."""
    user = bs.Divergence.from_generator("user_alpha_3", lambda u: (u**3 - 1 - 3 * (u - 1)) / 6)
    p = np.array([0.3, 1e-300])
    with pytest.raises(bs.BandSolveError, match="overflows float64"):
        bs.band(p, 1e300, user)
    lower, upper = bs.band(p, 1e300, user, on_failure="nan")
    alone = bs.band(0.3, 1e300, user)
    assert (lower[0], upper[0]) == (float(alone[0]), float(alone[1]))
    assert np.isnan(upper[1])
    lower, upper = bs.band_from_logp(np.log(p), 1e300, user, on_failure="nan")
    # from log p the simplex cap is e^(-log p) rounded down, not fl(1/p)
    alone = bs.band_from_logp(np.log(0.3), 1e300, user)
    assert np.isnan(upper[1]) and upper[0] == float(alone[1])
    with pytest.raises(ValueError, match="on_failure must be 'raise' or 'nan'"):
        bs.band(p, 0.1, on_failure="ignore")


@pytest.mark.parametrize("name", ["alpha:2_0", "alpha:0_5", "alpha:1_000"])
def test_alpha_parameter_with_underscores_is_refused_not_read_as_another_number(name):
    """float() reads "2_0" as 20, so "alpha:2_0" silently gave the band of
    alpha = 20 (upper 1.64 at p = 0.01, delta 0.5, where alpha:2 gives 10.9)."""
    with pytest.raises(ValueError, match="underscores"):
        bs.band(0.01, 0.5, name)


@pytest.mark.parametrize("name", ["alpha:1e200", "alpha:1e13", "alpha:-1e20"])
def test_alpha_parameter_beyond_the_verified_range_is_refused_up_front(name):
    """alpha:1e200 was parsed, then the root finder "did not converge" with a
    message about user generators; alpha:1e20 raised "+inf next to the bound"."""
    with pytest.raises(ValueError, match=r"\|a\| <= 1e\+12"):
        bs.band(0.5, 0.05, name)


def test_alpha_parameter_at_the_edge_of_the_range_is_accepted():
    lower, upper = bs.band(np.array([1e-6, 0.5]), 0.05, "alpha:1e12")
    assert np.all((0 <= lower) & (lower <= 1) & (1 <= upper))


def test_longdouble_delta_below_float64_range_names_the_cause_not_zero():
    # "delta must be positive: got 0.0" for a positive 1e-4000
    tiny = np.longdouble("1e-4000")
    if tiny == 0:
        pytest.skip("longdouble is float64 on this platform")
    with pytest.raises(ValueError, match="below float64's range"):
        bs.band(0.5, tiny)


def test_max_ratio_beyond_float64_is_no_cap_not_an_overflow_error():
    # max_ratio=10**400 raised a raw OverflowError
    assert bs.band(1e-3, 0.05, max_ratio=10**400)[1] == bs.band(1e-3, 0.05)[1]
    with pytest.raises(ValueError, match="max_ratio"):
        bs.band(0.5, 0.05, max_ratio=-10**400)


@pytest.mark.parametrize("argument", ["p", "delta"])
def test_numpy_masked_array_is_refused_not_its_mask_ignored(argument):
    masked = np.ma.masked_array([0.5, 2.0], mask=[False, True])
    args = {"p": 0.5, "delta": 0.05, argument: masked}
    with pytest.raises(TypeError, match="masked array"):
        bs.band(args["p"], args["delta"])
