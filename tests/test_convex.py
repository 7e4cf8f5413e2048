"""The cvxpy backend: agreement with the fast backend, the full-vocabulary
program, certificates, errors, and the verify command."""

import json
import math

import numpy as np
import pytest
import reference as ref
from hypothesis import given, settings
from hypothesis import strategies as st

import bandsolve as bs
from bandsolve import certificate, convex, verify

NAMES = verify.DIVERGENCES


def _assert_agrees(name, convex_values, fast_values, vocabulary=False):
    tol = verify.vocabulary_tolerance(name) if vocabulary else verify.tolerance(name)
    err = verify.discrepancy(convex_values, fast_values)
    assert np.all(err <= tol), (name, float(np.max(err)), tol)


def _assert_fast_inside_convex_certificate(name, p, delta):
    """The fast bound lies inside the interval that certifies the convex one.

    Falsifiable at the fast bound's own accuracy (the interval is proved in
    mpmath and is 1e-7 wide at most), unlike a solver-dependent tolerance on
    the difference of the two. A program no solver rung solves is a result
    (``res.failures``), not a crash: the fast value is then certified on its
    own, which still proves or refutes it.
    """
    res = convex.band(p, delta, name, on_failure="nan")
    _assert_fast_inside_certificates(name, p, delta, res)


def _assert_fast_inside_certificates(name, p, delta, res):
    """Each fast bound lies inside the proved interval of ``res``'s
    certificate, or, where the solver's value has none, of its own: a rung
    that fell back to a less accurate solver is judged by what its
    certificate proves (its width reports the solver's error), never by its
    raw value."""
    fast = dict(zip(("lower", "upper"), bs.band(p, delta, name)))
    for side, cert in (("lower", res.lower_certificate), ("upper", res.upper_certificate)):
        value = float(fast[side])
        cert = cert[()] if cert is not None else None
        if cert is None or not cert.certified:
            cert = certificate.certify(p, delta, name, side, value)
        assert cert.contains(value), (name, p, delta, side, value, cert.bounds, res.failures)


@settings(max_examples=25)
@given(name=st.sampled_from(NAMES), log_p=st.floats(-5.0, -1e-3),
       near_one=st.booleans(), delta=st.floats(0.005, 1.0))
def test_convex_band_agrees_with_fast_band(name, log_p, near_one, delta):
    p = 1 - 10.0**log_p if near_one else 10.0**log_p
    _assert_fast_inside_convex_certificate(name, p, delta)


@pytest.mark.parametrize("name, p, delta", ref.hard_points(NAMES))
def test_convex_band_agrees_with_fast_band_where_it_was_hard(name, p, delta):
    """The points each divergence records as hard for the convex programs
    (``Divergence.hard_points``; issue 18), replayed."""
    _assert_fast_inside_convex_certificate(name, p, delta)


def test_convex_band_shapes_edges_and_certificates():
    p = np.array([[0.0, 0.2], [0.6, 1.0]])
    res = convex.band(p, 0.3, "tv")
    assert res.lower.shape == res.upper.shape == (2, 2)
    assert (res.lower[0, 0], res.upper[0, 0]) == (0.0, math.inf)
    assert res.upper[1, 1] == 1.0 and res.lower[1, 1] == pytest.approx(0.7, rel=1e-7)
    # tv at p = 0.2, delta = 0.3: upper 1 + 0.3/0.2 = 2.5 (interior: the
    # divergence constraint binds, its multiplier is positive); lower
    # saturates at 0 (delta >= p: the simplex binds, the multiplier vanishes)
    assert res.upper[0, 1] == pytest.approx(2.5, rel=1e-7)
    assert res.upper_dual[0, 1] > 1e-3
    assert res.lower[0, 1] == pytest.approx(0.0, abs=1e-7)
    assert abs(res.lower_dual[0, 1]) < 1e-6
    saturated = res.lower_certificate[0, 1]
    assert saturated.saturated and saturated.interval == (0, 0) and saturated.width == 0.0
    assert res.upper_certificate[0, 1].passes(convex.ACCEPT_WIDTH)
    assert res.solve_seconds > 0


def test_p_equal_one_limit_without_and_with_finite_slope():
    res = convex.band(1.0, 0.2, "kl")  # f'(inf) = 1: r_lo(1) = exp(-delta)
    assert float(res.lower) == pytest.approx(math.exp(-0.2), rel=1e-7)
    assert float(convex.band(1.0, 0.2, "chi2").lower) == 1.0  # f'(inf) = inf


def _vocabulary(draw_seed, n, kind):
    rng = np.random.default_rng(draw_seed)
    logits = rng.normal(0, {"peaked": 4.0, "near-uniform": 0.05}[kind], n)
    pi = np.exp(logits - logits.max())
    return pi / pi.sum(), rng


@settings(max_examples=25)
@given(name=st.sampled_from(NAMES), n=st.integers(2, 50), seed=st.integers(0, 10**6),
       kind=st.sampled_from(["peaked", "near-uniform"]), delta=st.floats(0.01, 1.0))
def test_full_vocabulary_program_reduces_to_the_binary_band(name, n, seed, kind, delta):
    """The worst case over the whole simplex rescales the rest in proportion:
    the vocabulary program gives the band of pi_old[index]. Checked against
    the certificates, not the solver's raw value: each fast bound lies in the
    proved interval, and the program's value within the width its certificate
    reports; where that width is within the vocabulary tolerance, the value
    agrees with the band to it."""
    pi, rng = _vocabulary(seed, n, kind)
    index = int(rng.integers(n))
    try:
        res = convex.simplex_band(pi, index, delta, name)
    except convex.ConvexSolveError:
        pytest.skip("the solvers could not certify this program (reported by verify)")
    _assert_fast_inside_certificates(name, pi[index], delta, res)
    lo, hi = bs.band(pi[index], delta, name)
    tol = verify.vocabulary_tolerance(name)
    for value, fast, cert in ((res.lower, lo, res.lower_certificate[()]),
                              (res.upper, hi, res.upper_certificate[()])):
        if cert.passes(tol):
            assert verify.discrepancy(value, fast) <= tol, (name, float(value), float(fast))


def test_regression_vocabulary_program_that_fell_back_to_scs_is_judged_by_its_certificate():
    """A fresh clone's `python -m pytest` failed here: hypothesis drew rkl
    over 14 peaked tokens at delta = 1 (p = 1.985e-9), where the ladder's
    last rung (SCS) answers 30984454.24 against the band's 30945574.85, a
    discrepancy of 1.3e-3 against the tolerance 1e-6. The band is right
    (g(p, r_hi) = 1.0 = delta; 1.0013 at the solver's value) and the
    solver's certificate says so: its interval holds the band's bound and
    its width, 3.2e-3, reports the solver's error."""
    pi, rng = _vocabulary(676891, 14, "peaked")
    index = int(rng.integers(14))
    res = convex.simplex_band(pi, index, 1.0, "rkl")
    _assert_fast_inside_certificates("rkl", pi[index], 1.0, res)
    upper = res.upper_certificate[()]
    assert not upper.passes(verify.vocabulary_tolerance("rkl"))  # reported, not trusted


def test_full_vocabulary_program_at_1000_tokens():
    pi, rng = _vocabulary(3, 1000, "peaked")
    index = int(np.argsort(pi)[500])
    res = convex.simplex_band(pi, index, 0.05, "kl")
    lo, hi = bs.band(pi[index], 0.05, "kl")
    _assert_agrees("kl", [res.lower, res.upper], [lo, hi], vocabulary=True)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: convex.band([0.5, np.nan], 0.1), ValueError, "p contains NaN"),
    (lambda: convex.band(1.5, 0.1), ValueError, r"must lie in \[0, 1\]"),
    (lambda: convex.band(0.5, 0.0), ValueError, "delta must be positive"),
    (lambda: convex.band(0.5, 0.1, "nope"), ValueError, "unknown divergence"),
    (lambda: convex.band("0.5", 0.1), TypeError, "p must be a real number"),
    (lambda: convex.simplex_band([0.5, 0.6], 0, 0.1), ValueError, "sum to 1"),
    (lambda: convex.simplex_band([1.0, 0.0], 0, 0.1), ValueError, "positive"),
    (lambda: convex.simplex_band([0.5, 0.5], 2, 0.1), ValueError, "index"),
    (lambda: convex.simplex_band([[0.5, 0.5]], 0, 0.1), ValueError, "1-d"),
    (lambda: convex.simplex_band([0.5, 0.5], 0, -1.0), ValueError, "delta"),
])
def test_invalid_inputs_raise_the_numpy_apis_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_divergence_without_convex_form():
    mine = bs.Divergence.from_generator("mine", lambda u: (u - 1.0) ** 2)
    with pytest.raises(ValueError, match="no convex form"):
        convex.band(0.5, 0.1, mine)


def test_user_divergence_with_convex_form():
    import cvxpy as cp

    mine = bs.Divergence.from_generator("my_chi2", lambda u: (u - 1.0) ** 2,
                                        convex_generator=lambda w, a: cp.square(w - 1))
    res = convex.band(0.3, 0.1, mine)
    lo, hi = bs.band(0.3, 0.1, "chi2")
    _assert_agrees("chi2", [res.lower, res.upper], [lo, hi])


def test_solver_status_other_than_optimal_is_an_error():
    ladder = convex.SolverLadder((("CLARABEL", dict(max_iter=1)),))
    with pytest.raises(convex.ConvexSolveError, match=r"kl: the program for .*delta = 0.05.*not 'optimal'"):
        convex.band(0.3, 0.05, "kl", ladder=ladder)


def test_verify_small_sweep_and_report(tmp_path):
    rows = verify.run(divergences=("kl", "tv"), p_values=(0.01, 0.5, 1.0), deltas=(0.05,),
                      sizes=(2, 10), progress=False)
    assert [r.divergence for r in rows] == ["kl", "tv"]
    assert all(r.passed and r.solves > 0 for r in rows)
    table = verify.markdown(rows)
    assert table.count("| pass |") == 2


def test_verify_flags_a_discrepancy(monkeypatch):
    """The command can fail: a fast backend that is off by 1e-4 is caught."""
    true_band = bs.band

    def biased(p, delta, divergence="kl", **kw):
        lo, hi = true_band(p, delta, divergence, **kw)
        return lo, hi + 1e-4 * (hi - 1)

    monkeypatch.setattr(verify.api, "band", biased)
    rows = verify.run(divergences=("kl",), p_values=(0.3,), deltas=(0.05,), sizes=(2,),
                      progress=False)
    assert not rows[0].passed


def test_verify_default_sweep_passes(tmp_path):
    """The command's default sweep, as CI runs it (about 25 s)."""
    from bandsolve.cli import main

    assert main(["verify", "--quiet", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["passed"] and len(report["rows"]) == len(verify.DIVERGENCES)
    assert all(r["outside"] == 0 and r["uncertified"] == 0 and r["bounds"] > 0
               for r in report["rows"])
    assert "| `kl` |" in (tmp_path / "verify.md").read_text()


@pytest.mark.parametrize("name", ref.closed_band_names(NAMES))
def test_regression_lower_bound_near_zero_is_accurate(name):
    """Issue 9, item 6 (neyman_chi2): the lower bound 9.998e-5 came out
    1.9e-4..2.1e-4. Checked against the textbook's closed form."""
    truth = float(ref.closed_band(name, 1e-5, 0.1)[0])
    for _ in range(3):
        lower = float(convex.band(1e-5, 0.1, name).lower)
        assert abs(lower - truth) <= 1e-6 * truth


@pytest.mark.parametrize("name", ref.closed_band_names(NAMES))
@pytest.mark.parametrize("p, d", [(1e-5, 0.01), (1e-6, 1.0), (1e-3, 0.5), (0.3, 0.05)])
def test_small_lower_bounds_accurate_relative_to_themselves(name, p, d):
    import mpmath as mp

    truth = ref.closed_band(name, p, d)[0]
    lower = convex.band(p, d, name).lower
    assert abs(mp.mpf(float(lower)) - truth) <= 1e-6 * min(truth, 1 - truth)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("p, d", [(1 - 1e-6, 0.01), (1e-6, 0.05), (0.999, 1.0), (0.05, 0.9)])
def test_accuracy_in_the_new_measure_across_divergences(name, p, d):
    """p near 1 (lower margins tiny), tiny p, near saturation: each bound is
    certified (an interval proved in mpmath) to the divergence's tolerance in
    units of min(r, |r - 1|), and the mpmath reference lies in it."""
    res = convex.band(p, d, name)
    for side in ("lower", "upper"):
        exact, _ = ref.bound(name, p, d, side)
        cert = getattr(res, side + "_certificate").item()
        assert cert.certified and cert.width <= verify.TOLERANCES[name], (side, cert)
        assert cert.contains(float(exact)), (side, float(exact), cert.bounds)


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if bs.get_divergence(n).convex_scaled is not None])
@pytest.mark.parametrize("p, d", [(3.4e-4, 0.01), (1e-3, 0.1), (1.7626003261754542e-06, 1e-4)])
def test_regression_scaled_form_certifies_lower_bounds_far_below_one(name, p, d):
    """jeffreys, in its ratio and perspective forms alone: 5.9 min(r, |r - 1|)
    off at p = 3.4e-4, delta = 0.01 (r = 2e-13), uncertified at p = 1e-3,
    delta = 0.1 (r = 4e-44); the third point (r = 2.3e-25) runs the scaled
    form with its negligible u log u and mass coefficients set to 0."""
    res = convex.band(p, d, name)
    cert = res.lower_certificate.item()
    truth, _ = ref.bound(name, p, d, "lower")
    assert float(truth) < 1e-12
    assert cert.passes(verify.tolerance(name)), cert
    assert cert.interval[0] <= truth <= cert.interval[1]
    assert verify.discrepancy(res.lower, float(truth)) <= verify.tolerance(name)


def test_discrepancy_measure_handles_zero_inf_and_small_bounds():
    assert verify.discrepancy(2e-4, 1e-4) == pytest.approx(1.0)
    assert verify.discrepancy(0.0, 0.0) == 0.0 and verify.discrepancy(np.inf, np.inf) == 0.0
    assert verify.discrepancy(1e-12, 0.0) > 1e100  # saturation at 0 must be exact
    assert verify.discrepancy(1.0 + 2e-9, 1.0 + 1e-9) == pytest.approx(1.0, rel=1e-6)


def test_tolerances_are_the_divergences_own_unless_overridden():
    """verify kept a dict of tolerances by name beside the registry; each is
    now Divergence.verify_tolerance, which a Tolerances mapping may override."""
    from bandsolve.divergences import get_divergence

    for name in verify.DIVERGENCES:
        assert verify.TOLERANCES[name] == get_divergence(name).verify_tolerance > 0
        assert verify.vocabulary_tolerance(name) == max(
            10 * get_divergence(name).verify_tolerance, 1e-6)
    custom = verify.Tolerances({"kl": 5e-9}, vocabulary_factor=2.0, vocabulary_floor=0.0)
    assert custom["kl"] == 5e-9 and custom.vocabulary_for("kl") == 1e-8
    assert custom["tv"] == get_divergence("tv").verify_tolerance


def test_verify_unsolved_program_is_certified_in_mpmath_or_fails(monkeypatch):
    # an unverified program used to leave verify at PASS, exit 0
    def no_solver(self, p, delta, side, estimate):
        raise convex.ConvexSolveError("every rung ended 'optimal_inaccurate' (forced)")

    monkeypatch.setattr(convex.search.BoundSolver, "solve", no_solver)
    rows = verify.run(divergences=("kl",), p_values=(0.3,), deltas=(0.05,), sizes=(),
                      progress=False)
    assert rows[0].failures and rows[0].mpmath_only == 2 and rows[0].passed
    true_band = bs.band
    monkeypatch.setattr(verify.api, "band",
                        lambda p, d, name, **kw: tuple(b * 1.001 for b in true_band(p, d, name)))
    rows = verify.run(divergences=("kl",), p_values=(0.3,), deltas=(0.05,), sizes=(),
                      progress=False)
    assert rows[0].uncertified == 2 and not rows[0].passed


def test_verify_table_shows_the_digits_that_make_a_row_fail():
    """Regression: a certified width of 1.00001e-08 against a tolerance of
    1e-08 failed its row but printed as 1.0e-08, so the table could not say
    why; a size over its tolerance now prints with the digits that show it."""
    row = verify.Row("jeffreys", tolerance=1e-8, vocabulary_tolerance=1e-6,
                     band_max=6.8e-9, width_max=1.00001e-8, bounds=1)
    line = verify.markdown([row]).splitlines()[-1]
    assert "| 1.00001e-08 |" in line and "| 6.8e-09 |" in line and "FAIL" in line
