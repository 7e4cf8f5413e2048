"""Stand-ins for the two CUDA-only packages OpenRLHF's modules import at their top.

OpenRLHF 0.11.2 requires flash-attn, which builds only against CUDA, and its
Ray trainer package imports vLLM (``openrlhf/trainer/ray/__init__.py`` imports
``vllm_engine``), which ships CUDA builds only. Neither is on the path that
computes the policy loss or runs the actor's training step on the CPU:

* ``openrlhf/models/ring_attn_utils.py`` imports ``flash_attn.bert_padding``
  and ``flash_attn.utils.distributed`` (used with ``--ds.packing_samples`` and
  ring attention only);
* ``openrlhf/trainer/ray/vllm_engine.py`` imports ``vllm``, ``vllm.inputs``
  and ``vllm.utils`` (used to start vLLM engines).

:func:`install` puts modules under those names into ``sys.modules`` where the
real package is not installed: each holds the names OpenRLHF imports, and
calling any of them raises. Where flash-attn or vLLM is installed (a GPU
machine), nothing is stood in for. ``flash_attn`` is no package here, so
OpenRLHF's ``log_probs_from_logits`` takes its own torch path (its ``try``
of ``flash_attn.ops.triton`` fails with ImportError, as without flash-attn).
"""

import importlib.machinery
import importlib.util
import sys
import types

#: module -> the names OpenRLHF 0.11.2 imports from it at module level
NAMES = {
    "flash_attn": (),
    "flash_attn.bert_padding": ("index_first_axis", "pad_input", "rearrange", "unpad_input"),
    "flash_attn.utils": (),
    "flash_attn.utils.distributed": ("all_gather",),
    "vllm": (),
    "vllm.inputs": ("TokensPrompt",),
    "vllm.utils": ("random_uuid",),
}


def _unavailable(module, name):
    def stand_in(*args, **kwargs):
        raise RuntimeError(f"{module}.{name} is a stand-in (tests/openrlhf_stand_ins.py): "
                           f"{module.split('.')[0]} needs CUDA")

    stand_in.__name__ = name
    return stand_in


def install() -> list:
    """Stand in for flash_attn and vllm where they are not installed; returns
    the top-level names stood in for (empty on a machine that has both)."""
    stood_in = []
    for top in ("flash_attn", "vllm"):
        if top in sys.modules or importlib.util.find_spec(top) is not None:
            continue
        stood_in.append(top)
        for module, names in NAMES.items():
            if module.split(".")[0] != top:
                continue
            stub = types.ModuleType(module)
            stub.__spec__ = importlib.machinery.ModuleSpec(module, None)
            for name in names:
                setattr(stub, name, _unavailable(module, name))
            sys.modules[module] = stub
        sys.modules[top].__version__ = "0+stand-in"  # type: ignore[attr-defined]
    return stood_in
