"""verl's plug-in registry loads bandsolve in every verl process: the entry
point must register ``bandpo`` without importing numba, the kernels or
bandsolve.torch, and the registered loss must be bandsolve's."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.trainers

pytest.importorskip("verl")

from bandsolve.integrations.verl import loads_entry_points  # noqa: E402

#: verl 0.9 imports the verl.plugins entry points; 0.8 (rLLM's pin) does not
entry_points = pytest.mark.skipif(not loads_entry_points(),
                                  reason="this verl loads no verl.plugins entry points")


def _run(code: str, **env: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=600, check=True,
                            env={k: v for k, v in {**os.environ, **env}.items() if v is not None})
    return result.stdout.strip()


def test_verl_use_external_modules_registers_bandpo():
    """verl 0.8 (rLLM's pin) loads the plug-in only through
    VERL_USE_EXTERNAL_MODULES; 0.9 accepts it too, with entry points off. The
    loss verl's registry returns then is bandsolve's, and runs."""
    out = _run("""
        import torch, verl
        from verl.trainer.ppo.core_algos import get_policy_loss_fn
        import bandsolve.integrations.verl as plugin
        loss_fn = get_policy_loss_fn("bandpo")
        old = torch.log(torch.tensor([[0.05, 0.5]], dtype=torch.float64))
        mask = torch.ones_like(old)
        config = {"clip_ratio_c": 3.0, "policy_loss": {"band_delta": 0.05}}
        loss, metrics = loss_fn(old, old + 0.4, mask, mask, "token-mean", config)
        print(loss_fn is plugin.compute_policy_loss_bandpo, "actor/band/clipfrac_upper" in metrics)
        """, VERL_USE_EXTERNAL_MODULES="bandsolve.integrations.verl", VERL_USE_EXTERNAL_PLUGINS="none")
    assert out == "True True"


@pytest.mark.skipif(loads_entry_points(), reason="this verl loads verl.plugins entry points")
def test_verl_without_an_entry_point_loader_does_not_register_bandpo_on_its_own():
    """On verl 0.8, import verl alone leaves bandpo out: the variable is needed
    (docs/verl.md), and doctor says so."""
    out = _run("""
        import verl
        from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
        registered = "bandpo" in POLICY_LOSS_REGISTRY  # before doctor imports the plug-in
        from bandsolve.integrations import verl as room
        entry = [c for c in room.doctor_checks() if c.name == "verl entry point"][0]
        print(registered, entry.ok, "VERL_USE_EXTERNAL_MODULES" in entry.fix)
        """, VERL_USE_EXTERNAL_MODULES=None)
    assert out.startswith("False False True"), out


@entry_points
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


@entry_points
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
        from bandsolve.integrations.verl import compute_policy_loss_bandpo
        ref, _ = compute_policy_loss_bandpo(old, new, adv, mask, "token-mean", config)
        print(float(loss) == float(ref), "actor/pg_clipfrac" in metrics)
        """)
    assert out == "True True"


@entry_points
def test_registration_that_fails_raises_and_is_logged_through_verls_loader():
    """verl's entry-point loader catches a failing plug-in and logs it at debug
    level only (a run would then train with the default loss): the failure is
    logged as an error, and the module itself raises."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.modules["verl.trainer.ppo.core_algos"] = None  # verl's registry cannot load
        import verl  # verl's own loader runs the entry point and swallows its exception
        try:
            import bandsolve.integrations.verl_entry_point
        except Exception as exc:
            print("raised", type(exc).__name__)
        """)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "raised RegistrationError" in result.stdout
    assert "could not register the policy loss 'bandpo' in verl" in result.stderr


def test_registration_that_does_not_resolve_raises():
    """A registry that takes the name but resolves it to something else (another
    plug-in, a verl that moved its registry) raises instead of training with it."""
    out = _run("""
        import verl
        from verl.trainer.ppo import core_algos
        from bandsolve.integrations import verl_entry_point
        core_algos.register_policy_loss = lambda name: (lambda fn: fn)  # registers nothing
        core_algos.POLICY_LOSS_REGISTRY.pop("bandpo")
        try:
            verl_entry_point.register(verl_entry_point.compute_policy_loss_bandpo)
        except verl_entry_point.RegistrationError as exc:
            print("raised:", exc)
        """)
    assert out.startswith("raised: bandsolve could not register the policy loss 'bandpo'")
    assert "Unsupported loss mode: bandpo" in out
