"""bandsolve.certificate: certified intervals and KKT residuals in mpmath,
checked against closed forms and the independent reference in
tests/reference.py (neither shares code with the module under test)."""

import dataclasses
import math
import re

import mpmath as mp
import numpy as np
import pytest
import reference as ref

import bandsolve as bs
from bandsolve import certificate, convex, verify
from bandsolve.divergences import SAMPLE_NAMES


def _cert(res, side):
    return getattr(res, side + "_certificate").item()


@pytest.mark.parametrize("p, d", [(0.3, 0.05), (0.01, 0.1), (0.9, 0.5)])
def test_certificate_accepts_the_solvers_kl_bounds(p, d):
    res = convex.band(p, d, "kl")
    for side in ("lower", "upper"):
        cert = _cert(res, side)
        assert cert.passes(convex.ACCEPT_WIDTH), cert
        assert cert.kkt.worst() <= certificate.KKT_TOLERANCE
        exact, _ = ref.bound("kl", p, d, side)
        assert cert.contains(float(exact)), (side, float(exact), cert.bounds)
        lo, hi = cert.interval
        assert lo <= exact <= hi


@pytest.mark.parametrize("side", ["lower", "upper"])
@pytest.mark.parametrize("factor", [1 + 1e-6, 1 - 1e-6])
def test_certificate_rejects_a_bound_off_by_1e_6_of_its_margin(side, factor):
    p, d = 0.3, 0.05
    res = convex.band(p, d, "kl")
    r = float(getattr(res, side))
    wrong = 1.0 + (r - 1.0) * factor
    cert = certificate.certify(p, d, "kl", side, wrong, float(getattr(res, side + "_dual")))
    # still a proof: the interval holds the true bound, but it is wide
    exact, _ = ref.bound("kl", p, d, side)
    assert cert.interval[0] <= exact <= cert.interval[1]
    assert cert.width > 1e-7 and not cert.passes(1e-8)
    if factor > 1:  # beyond the root: infeasible, and the KKT check says so
        assert cert.kkt.primal > 1e-7


@pytest.mark.parametrize("side", ["lower", "upper"])
def test_certificate_rejects_a_flipped_dual_sign(side):
    p, d = 0.3, 0.05
    res = convex.band(p, d, "kl")
    cert = certificate.certify(p, d, "kl", side, float(getattr(res, side)),
                               -float(getattr(res, side + "_dual")))
    assert cert.kkt.dual > 0.5 and cert.kkt.stationarity > 1.0
    assert not cert.passes(1e-8)


@pytest.mark.parametrize("name", ref.closed_band_names(verify.DIVERGENCES))
def test_regression_convex_lower_bound_near_zero_is_certified(name):
    """Issue 9, item 6 (neyman_chi2): the lower bound 9.998e-5 came out 1.9e-4
    to 2.1e-4. Checked against the textbook's closed form."""
    p, d = 1e-5, 0.1
    truth = ref.closed_band(name, p, d)[0]
    for _ in range(3):
        res = convex.band(p, d, name)
        cert = _cert(res, "lower")
        lo, hi = cert.interval
        assert lo <= truth <= hi and cert.width < 1e-8
        assert abs(mp.mpf(float(res.lower)) - truth) <= 1e-8 * truth
    assert not cert.contains(float(truth) * (1 + 1e-6))
    assert cert.contains(float(bs.band(p, d, name)[0]))


def test_saturated_bounds_are_certified_points():
    # tv at p = 0.2, delta = 0.3: the lower bound saturates at 0 (delta >= p)
    cert = _cert(convex.band(0.2, 0.3, "tv"), "lower")
    assert cert.saturated and cert.interval == (0, 0) and cert.width == 0.0
    assert cert.kkt.worst() <= certificate.KKT_TOLERANCE
    # 1e-9 inside the end is not the end
    near = certificate.certify(0.2, 0.3, "tv", "lower", 1e-9)
    assert near.saturated and near.width > 1e200 and not near.passes(1e-3)


@pytest.mark.parametrize("name", verify.DIVERGENCES)
def test_every_builtin_divergence_has_a_certificate(name):
    assert certificate.mp_generator(name) is not None
    res = convex.band(0.3, 0.1, name)
    for side in ("lower", "upper"):
        cert = _cert(res, side)
        assert cert.passes(verify.TOLERANCES[name]), (side, cert)
        fast = bs.band(0.3, 0.1, name)[side == "upper"]
        assert cert.contains(float(fast), verify.FAST_SLACK)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("p, d", [(0.3, 0.1), (1e-4, 0.05), (0.999, 1.0)])
def test_every_builtin_fast_bound_is_certified_directly(name, p, d):
    """The certificate serves every built-in, with or without its convex
    programs: the fast bounds lie in intervals proved at 50 digits."""
    for side, fast in zip(("lower", "upper"), bs.band(p, d, name)):
        cert = certificate.certify(p, d, name, side, float(fast))
        assert cert.certified and cert.passes(1e-9), (side, cert)
        assert cert.contains(float(fast), verify.FAST_SLACK), (side, cert)


def test_builtins_without_convex_forms_are_left_out_of_verify_and_named_by_convex():
    missing = [name for name in SAMPLE_NAMES
               if bs.get_divergence(name).convex_generator is None]
    assert set(verify.DIVERGENCES) == set(SAMPLE_NAMES) - set(missing)
    # every built-in has convex forms (jeffreys since its scaled form): each,
    # stripped of them, stands for one that has none
    stripped = [dataclasses.replace(bs.get_divergence(name), name=f"{name}[no convex]",
                                    convex_generator=None, convex_perspective=None,
                                    convex_log=None, convex_scaled=None)
                for name in SAMPLE_NAMES]
    for div in [*map(bs.get_divergence, missing), *stripped]:
        with pytest.raises(ValueError, match=re.escape(f"{div.name}' has no convex form")):
            convex.band(0.3, 0.1, div)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("p, r", [(0.3, 1.7), (0.3, 0.4), (1e-4, 5000.0), (0.999, 0.2),
                                  (0.5, 1.0 + 1e-9)])
def test_certificate_generators_agree_with_the_reference(name, p, r):
    """Two independent mpmath implementations of g_f(p, r)."""
    gen = certificate.mp_generator(name)
    with mp.workdps(60):
        ours = certificate._Binary(gen, p, 0.1).value(mp.mpf(r))
        theirs = ref.binary(name, mp.mpf(p), 1 - mp.mpf(p), mp.mpf(r))
        assert abs(ours - theirs) <= mp.mpf(10) ** -40 * max(abs(theirs), mp.mpf(10) ** -30)


def test_user_divergence_reports_no_certificate():
    mine = bs.Divergence.from_generator("mine", lambda u: (u - 1.0) ** 2)
    cert = certificate.certify(0.3, 0.1, mine, "upper", 1.5, 1.0)
    assert not cert.certified and not cert.passes(1.0)
    assert cert.reason.startswith("no certificate")
    assert cert.width == math.inf
    # a user's Divergence that reuses a built-in name is not mistaken for it
    impostor = bs.Divergence.from_generator("kl", lambda u: (u - 1.0) ** 2)
    assert certificate.mp_generator(impostor) is None


def test_full_vocabulary_certificate_and_kkt():
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    res = convex.simplex_band(pi, 1, 0.1, "kl")
    lo, hi = bs.band(0.2, 0.1, "kl")
    assert _cert(res, "lower").contains(float(lo)) and _cert(res, "upper").contains(float(hi))
    for kkt in res.vocabulary_kkt:
        assert kkt.worst() <= certificate.KKT_TOLERANCE


def test_vocabulary_kkt_rejects_a_non_optimal_point():
    """Moving mass between two other tokens keeps the sampled ratio but
    breaks stationarity (the worst case rescales the rest in proportion)."""
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    res = convex.simplex_band(pi, 1, 0.1, "kl")
    ratios = np.full(4, (1 - 0.2 * float(res.upper)) / 0.8)
    ratios[1] = float(res.upper)
    good = certificate.vocabulary_kkt(pi, 1, 0.1, "kl", "upper", ratios,
                                      float(res.upper_dual), _mass_dual(pi, ratios, res))
    ratios[0] += 0.01 / 0.1
    ratios[2] -= 0.01 / 0.3
    bad = certificate.vocabulary_kkt(pi, 1, 0.1, "kl", "upper", ratios,
                                     float(res.upper_dual), _mass_dual(pi, ratios, res))
    assert good.worst() < 1e-6 < 1e-3 < bad.stationarity


def _mass_dual(pi, ratios, res):
    """nu from the stationarity row of an other token: 0 = pi_b (nu + lambda f'(w_b))."""
    w = ratios[0]
    return -float(res.upper_dual) * (1 - 1 / w)
