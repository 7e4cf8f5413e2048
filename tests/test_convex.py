"""The cvxpy backend: agreement with the fast backend, the full-vocabulary
program, certificates, errors, and the verify command."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bandsolve as bs
from bandsolve import convex, verify

NAMES = verify.DIVERGENCES


def _assert_agrees(name, convex_values, fast_values, scale=1.0):
    tol = scale * verify.TOLERANCES[name]
    err = verify.discrepancy(convex_values, fast_values)
    assert np.all(err <= tol), (name, float(np.max(err)), tol)


@settings(max_examples=25)
@given(name=st.sampled_from(NAMES), log_p=st.floats(-5.0, -1e-3),
       near_one=st.booleans(), delta=st.floats(0.005, 1.0))
def test_convex_band_agrees_with_fast_band(name, log_p, near_one, delta):
    p = 1 - 10.0**log_p if near_one else 10.0**log_p
    res = convex.band(p, delta, name)
    lo, hi = bs.band(p, delta, name)
    _assert_agrees(name, [res.lower, res.upper], [lo, hi])


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
    the vocabulary program gives the band of pi_old[index]."""
    pi, rng = _vocabulary(seed, n, kind)
    index = int(rng.integers(n))
    try:
        res = convex.simplex_band(pi, index, delta, name)
    except convex.ConvexSolveError:
        pytest.skip("the solvers could not certify this program (reported by verify)")
    lo, hi = bs.band(pi[index], delta, name)
    # the vocabulary program has more variables: allow 10x the 1-d tolerance
    _assert_agrees(name, [res.lower, res.upper], [lo, hi], scale=10.0)


def test_full_vocabulary_program_at_1000_tokens():
    pi, rng = _vocabulary(3, 1000, "peaked")
    index = int(np.argsort(pi)[500])
    res = convex.simplex_band(pi, index, 0.05, "kl")
    lo, hi = bs.band(pi[index], 0.05, "kl")
    _assert_agrees("kl", [res.lower, res.upper], [lo, hi], scale=10.0)


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


def test_solver_status_other_than_optimal_is_an_error(monkeypatch):
    monkeypatch.setitem(convex.SOLVER_LADDER, "CLARABEL", (("CLARABEL", dict(max_iter=1)),))
    with pytest.raises(convex.ConvexSolveError, match=r"kl: the program for .*delta = 0.05.*not 'optimal'"):
        convex.band(0.3, 0.05, "kl")


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
    assert "| `kl` |" in (tmp_path / "verify.md").read_text()
