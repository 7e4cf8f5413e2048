"""bandsolve.torch with user generators (issue 19, item 6), against mpmath."""

import numpy as np
import pytest
import reference as ref
from test_user_generators import _lecam, reference_knows_lecam  # noqa: F401 (a fixture, used by name)

import bandsolve as bs
from bandsolve.api import BandSolveError

torch = pytest.importorskip("torch")
import bandsolve.torch as bt  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)


@pytest.mark.usefixtures("reference_knows_lecam")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_user_lecam_in_float32_answers_where_numpy_does(dtype):
    """A user Le Cam (no df, no slope) raised BandSolveError in float32 and
    bfloat16 on every input: its table could not be built, because the
    estimated f'(inf) was inf and the conjugate overflowed at extreme p.
    numpy answers (0.9993505, 1.0006477) at log p = -0.1, delta = 1e-6."""
    lecam = bs.Divergence.from_generator("lecam", _lecam)
    logp = torch.tensor([-0.1, -1e-3, -3.0, -30.0], dtype=dtype)
    lower, upper = bt.band_from_logp(logp, 1e-6, lecam)
    for x, lo, hi in zip(logp.double().tolist(), lower.tolist(), upper.tolist()):
        for side, got in (("lower", lo), ("upper", hi)):
            truth = float(ref.bound("lecam", x, 1e-6, side, from_logp=True)[0])
            tol = max(1e-5 * min(truth, abs(truth - 1)), 16 * EPS32 * max(truth, 1.0))
            assert abs(got - truth) <= tol, (x, side, got, truth)


def test_torch_alpha_1e9_overflow_message_does_not_ask_for_a_smaller_delta():
    """alpha:1e9 at delta = 0.05 overflows float64 because a is huge, not
    because delta is: the message told the user to pass a smaller delta."""
    try:
        bt.band_from_logp(torch.tensor([-0.1]), 0.05, "alpha:1e9")
    except BandSolveError as exc:
        assert "smaller delta" not in str(exc)
        assert "very large a" in str(exc)
