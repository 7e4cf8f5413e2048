"""float64 accuracy of the numpy core at the edges of the simplex and of
float64: next to p = 1, 1 - p subnormal, alpha with |a| huge or next to 1,
false overflows at huge delta (issue 18), each test named after its break.

Every expected value comes from the independent mpmath reference
(tests/reference.py, 60+ digits) or from mpmath directly, never from the
package under test.
"""

from __future__ import annotations

from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
import reference as ref

import bandsolve as bs
from bandsolve.divergences import BUILTIN_NAMES


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


# --- item 7: binary_divergence formed 1 - p r in float64 ------------------------
_BINARY_NAMES = [*BUILTIN_NAMES, "alpha:0.5", "alpha:-1.5", "alpha:0.999"]


def _mp_binary_exact_inputs(name, p, r):
    """g at 80 digits for the float64 inputs p and r taken exactly (None off the simplex)."""
    with mp.workdps(80):
        pp, rr = mp.mpf(p), mp.mpf(r)
        if pp * rr > 1:
            return None
        return ref.binary(name, pp, 1 - pp, rr, (1 - pp * rr) / (1 - pp))


def test_binary_divergence_next_to_simplex_end_does_not_cancel():
    assert float(bs.binary_divergence(0.3, 3.333333333333333, "kl")) == pytest.approx(
        float(_mp_binary_exact_inputs("kl", 0.3, 3.333333333333333)), rel=4e-15)
    # r = fl(1/p) with p fl(1/p) < 1 exactly: finite, was inf
    value = float(bs.binary_divergence(3e-200, 1 / 3e-200, "kl"))
    assert value == pytest.approx(float(_mp_binary_exact_inputs("kl", 3e-200, 1 / 3e-200)),
                                  rel=4e-15)


@pytest.mark.parametrize("name", _BINARY_NAMES)
def test_binary_divergence_accuracy_next_to_simplex_end(name):
    """The documented accuracy, 4e-15 relative (measured worst 8.5e-16), where
    r lies 1 to 1e6 ulp below 1/p."""
    rng = np.random.default_rng(18)
    ps = np.concatenate([10 ** rng.uniform(-300, -1e-3, 12), 1 - 10 ** rng.uniform(-15, -1, 6)])
    for p in ps:
        r = 1 / p
        for _ in range(3):
            r = np.nextafter(r, 0)
            exact = _mp_binary_exact_inputs(name, p, r)
            if exact is None or exact == 0:
                continue
            value = float(bs.binary_divergence(p, r, name))
            assert abs(value - float(exact)) <= 4e-15 * float(exact), (p, r, value, float(exact))
        r = (1 / p) * (1 - 1e-10)
        exact = _mp_binary_exact_inputs(name, p, r)
        value = float(bs.binary_divergence(p, r, name))
        assert abs(value - float(exact)) <= 4e-15 * float(exact), (p, r, value, float(exact))


# --- item 10: BandSolveError outside the documented region ----------------------
@pytest.mark.parametrize("name", ["alpha:1e9", "alpha:-1e9"])
def test_alpha_huge_parameter_false_overflow_at_ordinary_delta(name):
    """u^a overflowed before the division by a (a - 1) ~ 1e18 brought f back
    into range: p = 1e-300, delta = 0.05 raised "overflows float64"."""
    ps = np.array([1e-300, 1e-200, 1e-6, 0.3, 0.9])
    lower, upper = bs.band(ps, 0.05, name)
    _assert_bounds_exact(name, ps, 0.05, lower, upper)


# --- items 3 and 4: band_from_logp with 1 - p subnormal -------------------------
@pytest.mark.parametrize("name", ["rkl", "alpha:1.000001", "alpha:1.001", "alpha:0.99",
                                  "alpha:0.999999"])
@pytest.mark.parametrize("log_p", [-5e-324, -1e-320, -1e-315, -1e-310])
def test_band_from_logp_lower_bound_when_one_minus_p_is_subnormal(name, log_p):
    """The conjugate's argument (1 - p)/(1 - p + m) was itself subnormal and
    kept few bits: rkl was 1.7e7 tolerances off at log p = -5e-324 (the docs
    said 2e-8), alpha:1.000001 1.6e7."""
    for delta in (1e-6, 0.05, 50.0):
        lower, upper = bs.band_from_logp(log_p, delta, name)
        _assert_bounds_exact(name, [log_p], delta, lower, upper, from_logp=True)


# --- item 6: alpha:0.999999 did not converge ------------------------------------
@pytest.mark.parametrize("log_p", [-5e-324, -1e-320])
@pytest.mark.parametrize("delta", [1e-6, 0.05])
def test_alpha_just_below_one_converges_when_one_minus_p_is_subnormal(log_p, delta):
    """m/(1 - p) overflowed, f'(inf) = 1e6 stood in for f'(m/(1 - p)) ~ 737,
    and Newton's steps stalled: "root finder did not converge"."""
    name = "alpha:0.999999"
    lower, upper = bs.band_from_logp(log_p, delta, name)
    _assert_bounds_exact(name, [log_p], delta, lower, upper, from_logp=True)
    if (log_p, delta) == (-5e-324, 0.05):  # the exact figure
        assert float(lower) == pytest.approx(0.99993184085163569, rel=1e-15)


# --- item 11: docs/math.md on subnormal lower bounds ----------------------------
def test_math_md_does_not_claim_full_precision_for_subnormal_bounds():
    text = (Path(__file__).parent.parent / "docs" / "math.md").read_text(encoding="utf-8")
    assert "even when it is subnormal" not in text
    # the figures it quotes instead, against mpmath: a subnormal bound meets
    # the 4 eps absolute tolerance, not full relative precision
    lower = float(bs.band(7.05e-5, 0.05, "kl")[0])
    exact, _ = ref.bound("kl", 7.05e-5, 0.05, "lower")
    assert "2.09" in text and "3.59" in text
    assert f"{lower:.3g}" == "2.09e-309" and mp.nstr(exact, 3) == "3.59e-309"
    assert ref.error_ratio(lower, exact) <= 1.0
    assert float(bs.band(1e-4, 0.1, "kl")[0]) == 5e-324



@pytest.mark.parametrize("name, ps, delta", [
    ("alpha:5.839198478431584", [1e-300], 1e75),
    ("alpha:5.839198478431584", [1e-100], 1e90),
    ("alpha:5.839198478431584", [1e-120], 1e300),
    ("alpha:3", [1e-300, 0.3, 0.5, 0.9, 1.0], 1e300),
    ("alpha:7.5", [1e-200, 1e-5, 0.3], 1e50),
])
def test_alpha_above_one_tiny_p_huge_delta_is_solved_not_a_false_overflow(name, ps, delta):
    """Issue 18.5: f*(v) = v^(1-a) / (a(a-1)) + ... overflowed float64 at the
    root (v^(1-a) = 1e313 at p = 1e-300, delta = 1e75) although s f*(v), the
    term of g, is 1e77: "overflows float64" was raised where the answer is
    (0, 2.95e64). s f*(v) is now formed in the log domain."""
    lower, upper = bs.band(np.array(ps), delta, name)
    _assert_bounds_exact(name, ps, delta, lower, upper)


@pytest.mark.parametrize("delta", [1e200, 1e300])
def test_alpha_3_near_p_one_at_huge_delta_is_solved_not_a_false_overflow(delta):
    """Issue 18.10: alpha:3 at log p = -1e-300 with delta >= 1e200 raised; g's
    perspective term there truly exceeds float64 (1e600), so an inf places the
    root as surely as a finite value. The answer is (1, 1/p) = (1, 1)."""
    lower, upper = bs.band_from_logp(-1e-300, delta, "alpha:3")
    _assert_bounds_exact("alpha:3", [-1e-300], delta, lower, upper, from_logp=True)
