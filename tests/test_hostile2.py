"""Regression tests for issue 19's leftovers and its second hostile pass,
each named after the break it catches, checked against mpmath or a closed
form (never against bandsolve itself)."""

import functools
import math

import mpmath as mp
import numpy as np
import pytest

import bandsolve as bs
from bandsolve.divergences import SAMPLE_NAMES

BUILT_IN = SAMPLE_NAMES
# log p where 1/fl(exp(log p)) rounds above e^(-log p) (found by search), over
# every scale, and the band where exp(log p) is subnormal
OVERSHOOTING_LOGP = np.array([-1.5306325389161855e-05, -37.54598973202707,
                              -0.18929267240687142, -708.5, -709.0, -709.7])


def _logp_sample():
    rng = np.random.default_rng(19)
    return np.concatenate([OVERSHOOTING_LOGP, -np.exp(rng.uniform(-30, 6.5, 400)),
                           -rng.uniform(708.4, 709.78, 40)])


@pytest.mark.parametrize("name", BUILT_IN + ("user_hellinger",))
def test_saturated_upper_from_logp_never_exceeds_the_simplex_cap(name):
    """The saturated upper bound from log p was 1/fl(exp(log p)): one ulp
    above e^(-log p) for about one log p in eight (and more where exp(log p)
    is subnormal), so p * upper > 1. It is now at most e^(-log p), within
    the accuracy tolerance of it."""
    div = bs.Divergence.from_generator("user_hellinger", lambda u: (math.sqrt(u) - 1.0) ** 2) \
        if name == "user_hellinger" else name
    logp = _logp_sample()
    _, upper = bs.band_from_logp(logp, np.finfo(np.float64).max, div)
    mp.mp.dps = 40
    for x, u in zip(logp, upper):
        cap = mp.exp(-mp.mpf(float(x)))
        assert mp.mpf(float(u)) <= cap, (name, x, u)
        assert mp.mpf(float(u)) >= cap * (1 - 4 * mp.mpf(2) ** -52), (name, x, u)


def test_interior_upper_from_logp_never_exceeds_the_simplex_cap():
    """Close to saturation, the interior bound min(1 + m/p, 1/p) took the
    same over-rounded cap."""
    logp = _logp_sample()
    mp.mp.dps = 40
    for delta in (0.5, 5.0, 50.0):
        _, upper = bs.band_from_logp(logp, delta, "rkl")
        for x, u in zip(logp, upper):
            assert mp.mpf(float(u)) <= mp.exp(-mp.mpf(float(x))), (delta, x, u)


LINEAR_GENERATORS = {
    "2 (u - 1)": lambda u: 2.0 * (u - 1.0),
    "-(u - 1)": lambda u: 1.0 - u,
    "0": lambda u: 0.0 * u,
    "1e100 (u - 1)": lambda u: 1e100 * (u - 1.0),
}


@pytest.mark.parametrize("label", sorted(LINEAR_GENERATORS))
def test_linear_generator_gives_the_trivial_band_not_a_convexity_error(label):
    """from_generator refused f(u) = 2 (u - 1) as "not convex" (Romberg's
    f'(1) = 2.0000000000004 left noise that the convexity test read as a
    kink). A linear f generates the zero divergence, so every ratio the
    simplex allows, [0, 1/p], is in the band at every delta > 0."""
    div = bs.Divergence.from_generator("linear", LINEAR_GENERATORS[label])
    p = np.array([0.0, 1e-300, 1e-5, 0.3, 1 - 1e-12, 1.0])
    for delta in (5e-324, 1e-6, 0.1, 1e300):
        lower, upper = bs.band(p, delta, div)
        assert np.all(lower == 0.0)
        with np.errstate(divide="ignore"):
            np.testing.assert_array_equal(upper, 1.0 / p)  # saturated: exactly fl(1/p)
        lower, upper = bs.band_from_logp(np.array([-1e-300, -0.5, -700.0]), delta, div)
        assert np.all(lower == 0.0)
        for x, u in zip((-1e-300, -0.5, -700.0), upper):
            assert mp.mpf(float(u)) <= mp.exp(-mp.mpf(x)) * (1 + mp.mpf(2) ** -53)
            assert mp.mpf(float(u)) >= mp.exp(-mp.mpf(x)) * (1 - 4 * mp.mpf(2) ** -52)
    assert np.all(bs.binary_divergence(0.3, [0.0, 1.0, 1 / 0.3], div) == 0.0)


def test_linear_generator_with_a_nonzero_edge_value_is_refused():
    with pytest.raises(ValueError, match="f is linear"):
        bs.Divergence.from_generator("linear", lambda u: 2.0 * (u - 1.0), slope_at_infinity=1.0)


def test_huge_generator_is_not_read_as_nan_and_gives_the_scaled_chi2_band():
    """f(u) = 1e100 (u - 1)^2 was refused as "NaN at u = 1.8e224": f'(1) was
    estimated as 1.6e84 (1 + 1e-3 is inexact, and f's size multiplied the
    error), and f(u) - f'(1) (u - 1) was inf - inf where both overflowed.
    It is 1e100 chi2, whose band is 1 +- sqrt(delta 1e-100 (1 - p) / p)."""
    div = bs.Divergence.from_generator("big_chi2", lambda u: 1e100 * (u - 1.0) ** 2)
    assert div.slope_at_infinity == math.inf and div.f_at_zero == 1e100
    p = np.array([1e-200, 1e-5, 0.3, 0.9, 1 - 1e-9])
    mp.mp.dps = 40
    for delta in (1e99, 1e100, 1e102):
        lower, upper = bs.band(p, delta, div)
        for pi, lo, up in zip(p, lower, upper):
            pm = mp.mpf(float(pi))
            s = mp.sqrt(mp.mpf(delta) / mp.mpf(10) ** 100 * (1 - pm) / pm)
            for got, want in ((lo, max(1 - s, 0)), (up, min(1 + s, 1 / pm))):
                assert abs(got - want) <= 1e-12 * max(want, 1), (delta, pi, got, want)


def test_huge_generator_that_overflows_at_the_root_is_a_clear_error():
    """Where f itself overflows float64 next to the root (1e100 (u - 1)^2 at
    u = 1e150), the solver names the overflow, never returns NaN."""
    div = bs.Divergence.from_generator("big_chi2", lambda u: 1e100 * (u - 1.0) ** 2)
    with pytest.raises(bs.BandSolveError, match="overflows float64"):
        bs.band(1e-300, 1e99, div)


@functools.cache
def _hand_rkl(with_df: bool):
    return bs.Divergence.from_generator(
        "hand_rkl", lambda u: u * math.log(u) - u + 1.0 if u > 0.0 else 1.0,
        df=(lambda u: math.log(u)) if with_df else None)


@pytest.mark.parametrize("with_df", [True, False])
@pytest.mark.parametrize("delta", [1e-3, 0.1, 10.0, 100.0])
def test_hand_written_rkl_answers_where_one_minus_p_is_subnormal(with_df, delta):
    """A hand-written rkl (f = u log u - u + 1) raised BandSolveError ("+inf
    next to the bounds") at log p = -1e-310, where the built-in answers:
    v f(1/v) at v below 1e-305 needs f past float64 (u log u overflows beyond
    u = 2.6e305). The conjugate now continues as its certified quadratic in
    log v there (exact for u log u), and the bound meets mpmath's."""
    import reference as ref

    logp = np.array([-5e-324, -1e-315, -1e-310, -3e-308, -1e-306])
    lower, upper = bs.band_from_logp(logp, delta, _hand_rkl(with_df))
    for x, lo in zip(logp, lower):
        truth, _ = ref.bound("rkl", float(x), delta, "lower", from_logp=True)
        assert ref.error_ratio(float(lo), truth) <= 1.0, (x, lo)
    assert np.all(upper == 1.0)


def test_generator_whose_conjugate_tail_is_not_quadratic_is_still_refused_clearly():
    """alpha = 1.001 written by hand: v f(1/v) ~ v^-0.001 / 0.001 has no
    certified quadratic tail in log v, so 1 - p subnormal stays a clear
    BandSolveError naming the overflow, never a NaN or a guess."""
    a = 1.001
    div = bs.Divergence.from_generator("hand_alpha", lambda u: (u**a - 1 - a * (u - 1)) / (a * (a - 1)))
    with pytest.raises(bs.BandSolveError, match="overflows float64"):
        bs.band_from_logp(-1e-310, 0.1, div)


@pytest.mark.parametrize("name", ["alpha:2_0", "alpha:0_5", "alpha:1_000"])
def test_alpha_parameter_with_underscores_is_refused_not_read_as_another_number(name):
    """float() reads "2_0" as 20, so "alpha:2_0" silently gave the band of
    alpha = 20 (upper 1.64 at p = 0.01, delta 0.5, where alpha:2 gives 10.9)."""
    with pytest.raises(ValueError, match="underscores"):
        bs.band(0.01, 0.5, name)


@pytest.mark.parametrize("call", ["save", "evaluate_numpy", "to_arrays"])
def test_table_functions_given_a_non_table_raise_type_error_not_attribute_error(call, tmp_path):
    """table.save(None, path) and table.evaluate_numpy(None, logp) raised
    AttributeError ('NoneType' object has no attribute 'divergence')."""
    from bandsolve import table

    calls = {"save": lambda: table.save(None, tmp_path / "t.npz"),
             "evaluate_numpy": lambda: table.evaluate_numpy({"lower": 1}, np.array([-0.1])),
             "to_arrays": lambda: table.to_arrays("kl")}
    with pytest.raises(TypeError, match="must be a BandTableData"):
        calls[call]()
    assert not (tmp_path / "t.npz").exists()


@pytest.mark.parametrize("field, value", [("f_at_zero", "1"), ("slope_at_infinity", True),
                                          ("curvature_at_one", "x"), ("f_at_zero", [1.0])])
def test_edge_value_of_the_wrong_type_is_a_type_error(field, value):
    """f_at_zero="1" and slope_at_infinity=True were read as 1.0 (a bool is
    refused as a number everywhere else), curvature_at_one="x" raised float()'s
    ValueError."""
    with pytest.raises(TypeError, match=f"{field} of 'x' must be a real number"):
        bs.Divergence.from_generator("x", lambda u: (u - 1.0) ** 2, **{field: value})


def _loss_batch():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(3, 5, generator=g) * 3
    return torch, old + 0.1, old, torch.randn(3, 5, generator=g), torch.ones(3, 5)


@pytest.mark.parametrize("which", ["int old_log_prob", "numpy log_prob", "int advantages"])
def test_policy_loss_with_a_wrong_input_type_names_the_argument(which):
    """An int64 old_log_prob raised torch.finfo's "requires a floating point
    input type"; a numpy log_prob "all inputs must be on one device (got
    ['cpu', 'cpu'])"."""
    torch, new, old, adv, mask = _loss_batch()
    from bandsolve.torch.losses import policy_loss

    args = {"int old_log_prob": (new, old.long(), adv, mask),
            "numpy log_prob": (new.numpy(), old, adv, mask),
            "int advantages": (new, old, adv.long(), mask)}[which]
    with pytest.raises(TypeError, match=which.split()[1]):
        policy_loss(*args)


@pytest.mark.parametrize("value", ["3", True])
def test_policy_loss_config_dual_clip_of_the_wrong_type_is_a_type_error(value):
    """dual_clip="3" raised "'>' not supported between 'str' and 'float'"."""
    pytest.importorskip("torch")
    from bandsolve.torch.losses import PolicyLossConfig

    with pytest.raises(TypeError, match="dual_clip must be a number"):
        PolicyLossConfig(dual_clip=value)


def test_fast_path_upper_from_logp_never_exceeds_the_simplex_cap():
    """band_from_logp on 2^16 elements or more takes the fast path, whose
    upper bound (saturated or capped) is 1/p with p = exp(log p) rounded: on
    random log p, about half of kl's saturated bounds exceed e^(-log p)."""
    rng = np.random.default_rng(3)
    logp = -np.exp(rng.uniform(-30, 6.5, 1 << 16))
    _, upper = bs.band_from_logp(logp, 1e300, "kl")
    mp.mp.dps = 30
    over = [x for x, u in zip(logp[:2000], upper[:2000])
            if mp.mpf(float(u)) > mp.exp(-mp.mpf(float(x)))]
    assert not over, f"{len(over)} of 2000 above e^(-log p), e.g. log p = {over[0]!r}"
    # and a capped bound is the cap to within the API's 4 eps
    gaps = [float(1 - mp.mpf(float(u)) / mp.exp(-mp.mpf(float(x))))
            for x, u in zip(logp[:2000], upper[:2000])]
    assert min(gaps) >= 0.0
    near = [g for g in gaps if g < 1e-12]
    assert near and max(near) <= 4 * 2.0**-52, max(near)
