"""The cancellation-free building blocks and generators against mpmath."""

import math

import mpmath as mp
import pytest
import reference as ref

from bandsolve import BUILTIN_DIVERGENCES, alpha_divergence
from bandsolve._kernels import _special

EPS = 2.220446049250313e-16
ARGS = [-0.999999, -0.999, -0.6, -0.3, -0.25, -0.1, -1e-3, -1e-9, -1e-17, 0.0, 1e-17,
        1e-9, 1e-3, 0.1, 0.25, 0.3, 0.6, 1.0, 2.0, 10.0, 1e10, 1e200]


def _rel(a, b):
    return abs(a - b) / abs(b) if b != 0 else abs(a)


@pytest.mark.parametrize("x", ARGS)
def test_log1pmx(x):
    with mp.workdps(50):
        truth = mp.log1p(mp.mpf(x)) - mp.mpf(x)
        u = 1.0 + x if abs(x) < 0.5 else float(mp.mpf(1) + mp.mpf(x))
        got = _special.log1pmx(u, x)
        if x == 0.0:
            assert got == 0.0
        else:
            assert _rel(mp.mpf(got), truth) <= 16 * EPS


@pytest.mark.parametrize("y", [-30.0, -1.0, -0.5, -0.49, -0.1, -1e-8, 1e-8, 0.1, 0.49, 0.5, 2.0, 30.0])
def test_expm1mx(y):
    with mp.workdps(50):
        truth = mp.expm1(mp.mpf(y)) - mp.mpf(y)
        assert _rel(mp.mpf(_special.expm1mx(y)), truth) <= 8 * EPS


GENERATORS = list(BUILTIN_DIVERGENCES) + ["alpha:0.5", "alpha:2", "alpha:-1", "alpha:0.9"]
U_VALUES = [0.0, 1e-300, 1e-10, 0.05, 0.5, 0.75, 0.9, 1 - 1e-6, 1 - 1e-12, 1.0, 1 + 1e-12,
            1 + 1e-6, 1.1, 1.5, 2.0]


@pytest.mark.parametrize("name", GENERATORS)
def test_generator_values(name):
    """f(u) to a few ulp relative, from its textbook formula at 50 digits."""
    div = BUILTIN_DIVERGENCES.get(name) or alpha_divergence(float(name.split(":")[1]))
    f_mp, _ = ref.generator(name)
    for u in U_VALUES:
        x = u - 1.0
        got = div.f(u, x, div.parameter)
        with mp.workdps(50):
            truth = f_mp(mp.mpf(u))
        if mp.isinf(truth):
            assert got == math.inf, (name, u)
        else:
            assert _rel(mp.mpf(got), truth) <= 64 * EPS, (name, u, got, truth)


@pytest.mark.parametrize("name", GENERATORS)
def test_conjugate_is_v_f_of_inverse(name):
    div = BUILTIN_DIVERGENCES.get(name) or alpha_divergence(float(name.split(":")[1]))
    f_mp, slope_inf = ref.generator(name)
    for v in [0.0, 1e-200, 1e-8, 0.01, 0.2, 0.5]:
        got = div.f_conjugate(v, v - 1.0, div.parameter)
        with mp.workdps(50):
            truth = slope_inf if v == 0 else mp.mpf(v) * f_mp(1 / mp.mpf(v))
        if mp.isinf(truth):
            assert got == math.inf
        else:
            assert _rel(mp.mpf(got), truth) <= 64 * EPS, (name, v, got, truth)


@pytest.mark.parametrize("name", GENERATORS)
def test_derivative(name):
    div = BUILTIN_DIVERGENCES.get(name) or alpha_divergence(float(name.split(":")[1]))
    f_mp, _ = ref.generator(name)
    for u in [1e-3, 0.3, 0.9, 1.0 + 1e-9, 1.5, 2.0, 50.0]:
        got = div.df(u, u - 1.0, div.parameter)
        with mp.workdps(50):
            truth = mp.diff(f_mp, mp.mpf(u))
        assert abs(got - float(truth)) <= 1e-12 * max(1.0, abs(float(truth))), (name, u)
