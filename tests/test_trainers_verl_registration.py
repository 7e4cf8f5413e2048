"""verl's plug-in registry loads bandsolve in every verl process: the entry
point must register ``bandpo`` without importing numba, the kernels or
bandsolve.torch, and the registered loss must be bandsolve's."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.trainers

pytest.importorskip("verl")


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=600, check=True)
    return result.stdout.strip()


def test_import_verl_registers_bandpo_without_importing_numba():
    out = _run("""
        import sys
        import verl
        from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
        print("bandpo" in POLICY_LOSS_REGISTRY,
              any(m == "numba" or m.startswith("numba.") for m in sys.modules),
              "bandsolve.torch" in sys.modules, "bandsolve.api" in sys.modules)
        """)
    assert out == "True False False False"


def test_registered_bandpo_is_bandsolves_loss_on_first_call():
    out = _run("""
        import torch, verl
        from omegaconf import OmegaConf
        from verl.trainer.ppo.core_algos import get_policy_loss_fn
        loss_fn = get_policy_loss_fn("bandpo")
        old = torch.log(torch.tensor([[0.05, 0.5, 0.9]], dtype=torch.float64))
        new = old + torch.tensor([[1.0, 0.2, -0.3]], dtype=torch.float64)
        adv = torch.tensor([[1.0, 1.0, -1.0]], dtype=torch.float64)
        mask = torch.ones_like(old)
        config = OmegaConf.create({"clip_ratio_c": 3.0, "policy_loss": {"band_delta": 0.05}})
        loss, metrics = loss_fn(old, new, adv, mask, "token-mean", config)
        from bandsolve.torch.verl import compute_policy_loss_bandpo
        ref, _ = compute_policy_loss_bandpo(old, new, adv, mask, "token-mean", config)
        print(float(loss) == float(ref), "actor/pg_clipfrac" in metrics)
        """)
    assert out == "True True"
