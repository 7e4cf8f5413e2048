"""bandsolve.torch with user-defined generators (issue 19, item 6): the
float32/bfloat16 table path for a generator whose formula overflows far out."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import bandsolve as bs  # noqa: E402
import bandsolve.torch as bt  # noqa: E402

LECAM = bs.Divergence.from_generator("lecam", lambda u: (1 - u) ** 2 / (2 * (1 + u)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_lecam_user_generator_low_precision_matches_the_numpy_core(dtype):
    # raised BandSolveError on every input: the table's solves met f(1/v)
    # overflowing in the conjugate, where numpy answered (0.9993505, 1.0006477)
    logp = torch.tensor([-0.1, -2.0, -1e-3], dtype=dtype)
    lower, upper = bt.band_from_logp(logp, 1e-6, LECAM)
    ref_lower, ref_upper = bs.band_from_logp(logp.double().numpy(), 1e-6, LECAM)
    for got, ref in ((lower, ref_lower), (upper, ref_upper)):
        got = got.double().numpy()
        tol = np.maximum(1e-5 * np.minimum(ref, np.abs(ref - 1)), 16 * 2.0**-23 * np.maximum(ref, 1))
        assert np.all(np.abs(got - ref) <= tol), (got, ref)


def test_overflow_message_for_a_fast_growing_generator_does_not_blame_delta_alone():
    # alpha:1e9 at delta = 0.05 was told to "pass a smaller delta"
    with pytest.raises(bs.BandSolveError) as error:
        bt.band_from_logp(torch.tensor([-0.1]), 0.05, "alpha:1e9")
    assert "grows too fast" in str(error.value)
