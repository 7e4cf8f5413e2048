"""``bandsolve doctor``: check that bandsolve and its trainer plug-ins work here.

verl imports every ``verl.plugins`` entry point on ``import verl`` and, when
one fails to import, logs it only at debug level (``verl/__init__.py``:
``logging.getLogger("verl").debug("Failed to load plugin ...")``). A broken
install of bandsolve's plug-in therefore reaches users as verl's
``ValueError: Unsupported loss mode: bandpo`` with no hint of the cause.
This module imports the plug-ins itself and reports the error text verl
swallows, beside the rest of what an install needs:

* the versions of bandsolve, Python and every dependency (optional extras
  absent, verify and plots among them, are reported, not failed);
* the numba kernels compile and give the closed-form TV band;
* numba's on-disk cache (writable or in-memory) and its threading layer;
* torch: version, CUDA, and ``bandsolve.torch.band`` on CPU (and CUDA);
* the verl plug-in: entry point declared, ``VERL_USE_EXTERNAL_PLUGINS``,
  ``import bandsolve.torch.verl``, ``bandpo`` in verl's loss registry;
* the TRL plug-in: ``import bandsolve.torch.trl``, and TRL's loss clamping
  with the attributes the plug-in sets;
* the SkyRL plug-in: ``import bandsolve.torch.skyrl`` (SkyRL itself needs
  Python 3.12 or later);
* the OpenRLHF plug-in: ``import bandsolve.torch.openrlhf`` (OpenRLHF's
  modules import flash-attn and vLLM, which install only with CUDA);
* for each installed trainer, whether its hook really serves the band: the
  loss verl's and SkyRL's registries return for ``bandpo`` (for OpenRLHF, the
  ``actor_loss_fn`` the plug-in puts on an ``ActorPPOTrainer``), run on two tokens
  where the band and a fixed clip disagree, must pass the one and stop the
  other (``... serves the band``; a FAIL says which way it went instead).

Each check is cheap and never raises. Importing this module imports neither
torch nor a trainer: they are imported inside the checks.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
import platform
import sys
import traceback
from collections.abc import Callable

from ._extras import pip_command as _pip
from ._files import check_writable_folder

__all__ = ["Check", "diagnose", "exit_code", "format_report"]

# Every check catches Exception on purpose (BLE001 below): a doctor that raises
# on the broken install it is meant to diagnose is no use.

# (distribution names to try, import name, extra that installs it or None if
# the package is a core dependency)
_PACKAGES = (
    (("numpy",), "numpy", None),
    (("scipy",), "scipy", None),
    (("numba",), "numba", None),
    (("cvxpy",), "cvxpy", "verify"),
    (("clarabel",), "clarabel", "verify"),
    (("mpmath",), "mpmath", "verify"),
    (("tqdm",), "tqdm", "verify"),
    (("matplotlib",), "matplotlib", "plots"),
    (("torch",), "torch", "torch"),
    (("verl",), "verl", "verl"),
    (("trl",), "trl", "trl"),
    (("transformers",), "transformers", "trl"),
    (("skyrl", "skyrl-train"), "skyrl", "skyrl"),
    (("openrlhf",), "openrlhf", "openrlhf"),
)
_OPTIONAL = {"cvxpy", "clarabel", "mpmath", "tqdm", "matplotlib", "torch", "verl", "trl",
             "transformers", "skyrl", "openrlhf"}

_VERL_PLUGIN = "bandsolve.torch.verl"
# what the entry point names: it registers bandpo and imports _VERL_PLUGIN on first use
_VERL_ENTRY_MODULE = "bandsolve.integrations.verl_entry_point"
_TRL_PLUGIN = "bandsolve.torch.trl"
_SKYRL_PLUGIN = "bandsolve.torch.skyrl"
_OPENRLHF_PLUGIN = "bandsolve.torch.openrlhf"
_ENTRY_POINT = "bandpo"


@dataclasses.dataclass(frozen=True)
class Check:
    """One line of the report.

    ``ok``: True passed, False failed, None not applicable (an optional
    package absent). A passed check with a ``fix`` is a warning.
    """

    name: str
    ok: bool | None
    detail: str
    fix: str = ""

    @property
    def status(self) -> str:
        if self.ok is None:
            return "--"
        if not self.ok:
            return "FAIL"
        return "WARN" if self.fix else "OK"

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "status": self.status}


# ----------------------------------------------------------------- helpers

def _import_module(name: str):
    """``importlib.import_module``; the one place checks import through (tests
    replace it to simulate a broken plug-in)."""
    return importlib.import_module(name)


def _version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None if absent."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _error_text(exc: BaseException) -> str:
    """``Type: message`` and where it was raised (the innermost frame)."""
    text = f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        frame = tb[-1]
        text += f" (at {frame.filename}:{frame.lineno})"
    return text


def _requirements() -> dict:
    """bandsolve's declared requirements by project name (e.g. verl ->
    SpecifierSet('<0.10,>=0.9')); empty where packaging is missing."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return {}
    found: dict = {}
    for line in importlib.metadata.requires("bandsolve") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() != "bandsolve" and str(req.specifier):
            found.setdefault(req.name.lower(), req.specifier)
    return found


def _guarded(name: str, fn: Callable[[], list]) -> list:
    """Run one check function; an unexpected exception becomes a FAIL line."""
    try:
        return list(fn())
    except Exception as exc:  # noqa: BLE001
        return [Check(name, False, f"the check itself failed: {_error_text(exc)}",
                      "report this at the bandsolve issue tracker with this output")]


def _guarded_check(name: str, fn: Callable[[], Check]) -> Check:
    """One check line; an exception in it becomes the line's FAIL, with its text."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return Check(name, False, f"running the registered loss failed: {_error_text(exc)}",
                     _pip(force=True) + "; if it persists, report it with this output")


# ------------------------------------------------------------------ checks

def _check_versions() -> list:
    import bandsolve

    checks = []
    installed = _version("bandsolve")
    where = os.path.dirname(os.path.abspath(bandsolve.__file__))
    if installed is None:
        checks.append(Check("bandsolve", True,
                            f"{bandsolve.__version__} imported from {where}, but no installed "
                            "distribution metadata: entry points (the verl plug-in) are missing",
                            _pip()))
    elif installed != bandsolve.__version__:
        checks.append(Check("bandsolve", True,
                            f"imported {bandsolve.__version__} from {where}, but the installed "
                            f"metadata says {installed}: a stale install",
                            _pip(force=True)))
    else:
        checks.append(Check("bandsolve", True, f"{installed} at {where}"))
    checks.append(Check("python", True, f"{platform.python_version()} ({sys.executable})"))

    specs = _requirements()
    for dists, module, extra in _PACKAGES:
        version: str | None = None
        dist = dists[0]
        for dist in dists:
            version = _version(dist)
            if version is not None:
                break
        if version is None:
            if module in _OPTIONAL:
                checks.append(Check(module, None, "not installed (optional)", _pip(extra)))
            else:
                checks.append(Check(module, False, "not installed (required)",
                                    _pip(force=True)))
            continue
        spec = specs.get(dist.lower())
        if spec is not None and not spec.contains(version, prereleases=True):
            fix = _pip(extra) if extra else f'pip install "{dist}{spec}"'
            if module in _OPTIONAL:
                checks.append(Check(module, True, f"{version}, outside the tested range "
                                                  f"{spec}", fix))
            else:
                checks.append(Check(module, False, f"{version}, bandsolve needs {spec}", fix))
        else:
            checks.append(Check(module, True, version))
    return checks


def _check_kernels() -> list:
    import numpy as np

    import bandsolve

    p, delta = 0.5, 0.05
    # TV's band is the closed form 1 -/+ delta / p (clipped to [0, 1/p])
    expected = (max(0.0, 1.0 - delta / p), min(1.0 / p, 1.0 + delta / p))
    lower, upper = bandsolve.band(p, delta, "tv")
    got = (float(lower), float(upper))
    if not np.allclose(got, expected, rtol=1e-12, atol=0.0):
        return [Check("numba kernels", False,
                      f"band(0.5, 0.05, 'tv') = {got}, expected {expected}",
                      f"{_pip(force=True)}; if it persists, report it with this output")]
    kl_lower, kl_upper = bandsolve.band(np.array([1e-3, 0.5, 0.999]), delta, "kl")
    sane = bool(np.all((kl_lower <= 1.0) & (kl_upper >= 1.0) & np.isfinite(kl_lower)))
    if not sane:
        return [Check("numba kernels", False, f"KL band out of shape: {kl_lower}, {kl_upper}",
                      f"{_pip(force=True)}; if it persists, report it with this output")]
    return [Check("numba kernels", True,
                  f"compiled; band(0.5, 0.05, 'tv') = ({got[0]:g}, {got[1]:g}) as the closed "
                  "form")]


def _kernel_dispatchers():
    """numba dispatchers of bandsolve's kernels (the ones behind ``band``)."""
    from numba.core.registry import CPUDispatcher

    from .divergences import BUILTIN_NAMES

    modules = [f"bandsolve._kernels.{name}" for name in ("_scan", "_solver", "_warm_start")]
    # the built-in generators and closed forms live with their families
    modules += [f"bandsolve.divergences.{name}" for name in (*BUILTIN_NAMES, "alpha")]
    for mod_name in modules:
        try:
            mod = _import_module(mod_name)
        except ImportError:
            continue
        for obj in vars(mod).values():
            obj = getattr(obj, "kernel", obj)
            if isinstance(obj, CPUDispatcher):
                yield obj


def _cache_dir_note(env_dir: str, path: str) -> str:
    """NUMBA_CACHE_DIR beside the cache path only where numba uses it: numba
    reads the variable once, at import, so one set later has no effect."""
    if not env_dir:
        return ""
    if os.path.abspath(path).startswith(os.path.abspath(env_dir)):
        return f" (NUMBA_CACHE_DIR={env_dir})"
    if os.path.exists(env_dir) and not os.path.isdir(env_dir):
        return f" (NUMBA_CACHE_DIR={env_dir} is not used: it is a file, not a folder)"
    if os.path.isdir(env_dir):  # a missing one numba would have made
        try:
            check_writable_folder(env_dir, f"NUMBA_CACHE_DIR={env_dir}")
        except OSError as exc:
            return f" (NUMBA_CACHE_DIR={env_dir} is not used: {exc})"
    return (f" (NUMBA_CACHE_DIR={env_dir} is set but not used: numba reads it at import; "
            "set it before Python starts)")


def _check_numba_cache() -> list:
    import numba

    checks = []
    env_dir = os.environ.get("NUMBA_CACHE_DIR", "")
    fix = ("set NUMBA_CACHE_DIR to a writable folder (e.g. export "
           "NUMBA_CACHE_DIR=$HOME/.cache/numba), or make the user cache folder "
           "writable: bandsolve never caches inside the installed package")
    disp = next(_kernel_dispatchers(), None)
    if disp is None:
        checks.append(Check("numba cache", False, "no compiled kernel found in bandsolve._kernels",
                            _pip(force=True)))
    else:
        cache = disp._cache
        path = getattr(cache, "_cache_path", None)
        if path is None:  # NullCache: jit() fell back to cache=False
            checks.append(Check("numba cache", True, "no writable cache folder: kernels compile "
                                                     "in memory, first call compiles each time "
                                                     "(slower start)", fix))
        else:
            probe = path if os.path.isdir(path) else os.path.dirname(path)
            writable = os.access(probe, os.W_OK)
            hits = sum(disp.stats.cache_hits.values())
            source = "loaded from the cache" if hits else "compiled this run"
            via = _cache_dir_note(env_dir, path)
            from ._kernels._cache import DISCARDED

            if DISCARDED:
                checks.append(Check("numba cache", True,
                                    f"{len(DISCARDED)} damaged cache entries discarded and "
                                    f"compiled again this run (the first: {DISCARDED[0]})",
                                    "nothing to do if it does not recur; if it does, check the "
                                    "disk holding the cache folder"))
            if writable:
                # NUMBA_CACHE_DIR asked for and not used is worth a warning
                unused = "not used" in via
                checks.append(Check("numba cache", True, f"{path}{via} writable; kernels "
                                                         f"{source}", fix if unused else ""))
            else:
                checks.append(Check("numba cache", True,
                                    f"{path}{via} not writable: first call compiles each "
                                    "time (slower start)", fix))

    configured = os.environ.get("NUMBA_THREADING_LAYER") or numba.config.THREADING_LAYER
    try:
        layer: str = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        layer = "not initialised (no parallel kernel ran)"
    detail = f"{layer} (asked for: {configured})"
    if layer == "omp" and configured not in ("omp", "threadsafe"):
        checks.append(Check("numba threading", True, detail + "; GNU OpenMP aborts children "
                                                             "forked after a parallel kernel",
                            "pip install tbb, or NUMBA_THREADING_LAYER=workqueue"))
    else:
        checks.append(Check("numba threading", True, detail))
    return checks


def _check_torch() -> list:
    if _version("torch") is None and importlib.util.find_spec("torch") is None:
        return [Check("torch runtime", None, "not installed (optional)", _pip("torch")),
                Check("torch band (cpu)", None, "torch not installed")]
    try:
        torch = _import_module("torch")
    except Exception as exc:  # noqa: BLE001
        return [Check("torch runtime", False, f"import torch failed: {_error_text(exc)}",
                      _pip("torch", force=True))]
    cuda = torch.cuda.is_available()
    if cuda:
        where = f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}"
    else:
        where = "no CUDA device"
    checks = [Check("torch runtime", True, f"{torch.__version__}; {where}")]
    try:
        bt = _import_module("bandsolve.torch")
    except Exception as exc:  # noqa: BLE001
        checks.append(Check("torch band (cpu)", False,
                            f"import bandsolve.torch failed: {_error_text(exc)}",
                            _pip("torch") + " (torch>=2.4)"))
        return checks
    devices = ["cpu"] + (["cuda"] if cuda else [])
    for device in devices:
        name = f"torch band ({device})"
        try:
            p = torch.tensor([0.5, 0.2], dtype=torch.float32, device=device)
            lower, upper = bt.band(p, 0.05, "tv")
            got = torch.stack([lower, upper]).double().cpu()
            want = torch.tensor([[0.9, 0.75], [1.1, 1.25]], dtype=torch.float64)
            if torch.allclose(got, want, rtol=1e-6, atol=1e-6):
                checks.append(Check(name, True, "band of a float32 tensor as the closed form"))
            else:
                checks.append(Check(name, False, f"band = {got.tolist()}, expected "
                                                 f"{want.tolist()}", _pip(force=True)))
        except Exception as exc:  # noqa: BLE001
            checks.append(Check(name, False, _error_text(exc),
                                "check that torch works on this device; report it with this "
                                "output"))
    if not cuda:
        checks.append(Check("torch band (cuda)", None, "no CUDA device"))
    return checks


# The probe each plug-in's registered loss runs on, through the trainer's own
# look-up: two tokens at ratio 1.5 with advantage +1, old p = 0.05 and 0.5.
# Band-KL at delta = 0.05 admits 1.5 at p = 0.05 (its upper bound is 2.98) and
# clips it at p = 0.5 (1.31); a fixed interval such as PPO's [0.8, 1.2] clips
# both, no clip neither. The gradient shows which the loss did.
_PROBE_P = (0.05, 0.5)
_PROBE_RATIO = 1.5
_PROBE_DELTA = 0.05


def _installed(trainer: str) -> bool:
    """Whether the trainer's distribution or its import package is present."""
    return _version(trainer) is not None or importlib.util.find_spec(trainer) is not None


def _probe_band(trainer: str, loss: Callable, fix: str) -> Check:
    """The check "TRAINER serves the band": :func:`_serves_band` on the
    trainer's own loss, any exception it raises reported as the check's."""
    name = f"{trainer} serves the band"
    return _guarded_check(name, lambda: _serves_band(name, loss, fix))


def _serves_band(name: str, loss: Callable, fix: str) -> Check:
    """Whether ``loss(old_log_prob, log_prob, advantages, mask)``, the loss a
    trainer's hook runs, applies the band: its gradient passes the token inside
    its band and stops the one beyond it (see the probe above)."""
    import math

    import numpy as np
    import torch

    import bandsolve

    _, upper = bandsolve.band(np.array(_PROBE_P), _PROBE_DELTA, "kl")
    if not upper[0] > _PROBE_RATIO > upper[1]:
        return Check(name, False, f"the probe's premise fails: Band-KL upper bounds {upper} at "
                                  f"p = {_PROBE_P}", _pip(force=True))
    old = torch.log(torch.tensor([_PROBE_P], dtype=torch.float64))
    new = (old + math.log(_PROBE_RATIO)).requires_grad_()
    ones = torch.ones_like(old)
    loss(old, new, ones, ones).backward()
    assert new.grad is not None
    moves = [bool(g != 0) for g in new.grad[0]]
    probe = (f"ratio {_PROBE_RATIO} at old p = {_PROBE_P[0]} (inside its band, upper "
             f"{upper[0]:.3g}) and p = {_PROBE_P[1]} (beyond it, upper {upper[1]:.3g})")
    if moves == [True, False]:
        return Check(name, True, f"the registered loss clips by the band: {probe}: the first "
                                 "token gets a gradient, the second none")
    reasons: dict[tuple[bool, ...], str] = {
        (False, False): "both tokens clipped, as a fixed interval like PPO's [0.8, 1.2] clips "
                        "them: the loss that runs is not the band",
        (True, True): "neither token clipped: the loss that runs clips nothing"}
    why = reasons.get(tuple(moves), f"gradient pattern {moves}: not the band's")
    return Check(name, False, f"{why} ({probe})", fix)


def _plugin_policy() -> tuple:
    """(value of VERL_USE_EXTERNAL_PLUGINS, whether verl will load ``bandpo``),
    as ``verl/__init__.py`` reads it."""
    raw = os.environ.get("VERL_USE_EXTERNAL_PLUGINS")
    policy = (raw if raw is not None else "auto").strip().lower()
    if policy == "none":
        return raw, False
    if policy == "auto":
        return raw, True
    return raw, _ENTRY_POINT in {n.strip() for n in policy.split(",") if n.strip()}


def _verl_loads_entry_points() -> bool:
    """Whether the installed verl imports its ``verl.plugins`` entry points on
    ``import verl`` (0.9 on; 0.8, which rLLM pins, has only
    ``VERL_USE_EXTERNAL_MODULES``), read from its ``__init__`` unimported."""
    spec = importlib.util.find_spec("verl")
    try:
        with open(spec.origin, encoding="utf-8") as source:  # type: ignore[union-attr, arg-type]
            return '"verl.plugins"' in source.read()
    except (AttributeError, TypeError, OSError):
        return False


def _check_verl() -> list:
    names = ("verl entry point", "verl plug-in import", "verl loss registry")
    if _version("verl") is None and importlib.util.find_spec("verl") is None:
        return [Check(n, None, "verl not installed (optional)", _pip("verl") if i == 0 else "")
                for i, n in enumerate(names)]
    checks = []

    # 1. the entry point verl discovers, and whether verl is told to load it
    eps = [ep for ep in importlib.metadata.entry_points(group="verl.plugins")
           if ep.name == _ENTRY_POINT]
    raw, loads = _plugin_policy()
    loader = _verl_loads_entry_points()
    loads = loads and loader
    modules = [m.strip() for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",")]
    by_modules = _VERL_PLUGIN in modules
    env = f"VERL_USE_EXTERNAL_PLUGINS={raw!r}" if raw is not None else \
        "VERL_USE_EXTERNAL_PLUGINS unset (auto)"
    if not eps:
        fix = (f"reinstall so that the entry point is registered: {_pip('verl')}, or set "
               f"VERL_USE_EXTERNAL_MODULES={_VERL_PLUGIN}")
        checks.append(Check(names[0], by_modules,
                            f"no '{_ENTRY_POINT}' in the 'verl.plugins' entry points of the "
                            "installed distributions" + ("; VERL_USE_EXTERNAL_MODULES loads the "
                                                         "plug-in instead" if by_modules else ""),
                            "" if by_modules else fix))
    elif eps[0].value != _VERL_ENTRY_MODULE:
        checks.append(Check(names[0], False, f"'{_ENTRY_POINT}' points to {eps[0].value!r}, "
                                             f"not {_VERL_ENTRY_MODULE!r}: a stale install",
                            _pip("verl", force=True)))
    elif not loader and not by_modules:
        checks.append(Check(names[0], False, f"declared, but verl {_version('verl')} loads no "
                                             "'verl.plugins' entry points (verl 0.9 does)",
                            f"set VERL_USE_EXTERNAL_MODULES={_VERL_PLUGIN} where the driver "
                            "and every worker start (docs/verl.md), or use verl>=0.9"))
    elif not loads and not by_modules:
        checks.append(Check(names[0], False, f"declared, but {env}: verl will not load it",
                            "unset VERL_USE_EXTERNAL_PLUGINS, add 'bandpo' to its list, or set "
                            f"VERL_USE_EXTERNAL_MODULES={_VERL_PLUGIN}"))
    else:
        how = "loaded on import verl" if loads else "loaded via VERL_USE_EXTERNAL_MODULES"
        checks.append(Check(names[0], True,
                            f"'{_ENTRY_POINT}' = {_VERL_ENTRY_MODULE} ({env}; {how})"))

    # 2. the import verl swallows
    try:
        _import_module("verl")
    except Exception as exc:  # noqa: BLE001
        checks.append(Check(names[1], False, f"import verl failed: {_error_text(exc)}",
                            _pip("verl", force=True)))
        checks.append(Check(names[2], False, "not checked: verl does not import"))
        return checks
    try:
        plugin = _import_module(_VERL_PLUGIN)
    except Exception as exc:  # noqa: BLE001
        checks.append(Check(names[1], False,
                            f"import {_VERL_PLUGIN} failed (verl logs this only at debug "
                            f"level): {_error_text(exc)}",
                            _pip("verl") + " (verl>=0.8,<0.10, torch>=2.4); "
                            "the error above names the missing or incompatible piece"))
        checks.append(Check(names[2], False, f"'{_ENTRY_POINT}' not registered: the plug-in "
                                             "did not import (see above); verl will say "
                                             f"'Unsupported loss mode: {_ENTRY_POINT}'"))
        return checks
    checks.append(Check(names[1], True, f"import {_VERL_PLUGIN} succeeded"))

    # 3. the registry verl's actor looks the loss up in
    core_algos = _import_module("verl.trainer.ppo.core_algos")
    try:
        fn = core_algos.get_policy_loss_fn(_ENTRY_POINT)
    except Exception as exc:  # noqa: BLE001
        checks.append(Check(names[2], False, _error_text(exc),
                            f"{_VERL_PLUGIN} imported but did not register; reinstall: "
                            + _pip("verl", force=True)))
        return checks
    ours = getattr(plugin, "compute_policy_loss_bandpo", None)
    if fn is not ours:
        where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
        checks.append(Check(names[2], False, f"'{_ENTRY_POINT}' resolves to {where}, not "
                                             "bandsolve's: another package registered the "
                                             "same name",
                            "uninstall the other plug-in or set VERL_USE_EXTERNAL_PLUGINS to "
                            "list only 'bandpo'"))
    else:
        checks.append(Check(names[2], True, f"get_policy_loss_fn('{_ENTRY_POINT}') is "
                                            f"{_VERL_PLUGIN}.compute_policy_loss_bandpo"))

    # 4. what verl's actor would run under loss_mode=bandpo, on the probe
    # verl's actor config as the loss reads it: the band's keys, and verl's own
    # clip (0.2), so that a fixed-interval loss in bandpo's place runs and shows
    config = _import_module("omegaconf").OmegaConf.create({
        "clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
        "global_batch_info": {},
        "policy_loss": {"loss_mode": _ENTRY_POINT, "band_delta": _PROBE_DELTA,
                        "band_divergence": "kl"}})

    def verl_loss(old, new, advantages, mask):
        return core_algos.get_policy_loss_fn(_ENTRY_POINT)(old, new, advantages, mask,
                                                           "token-mean", config)[0]

    checks.append(_probe_band("verl", verl_loss, _pip("verl", force=True)))
    return checks


def _check_trl() -> list:
    name = "trl plug-in import"
    if not _installed("trl"):
        return [Check(name, None, "trl not installed (optional)", _pip("trl"))]
    installed = _version("trl")
    if installed is not None and installed.split(".")[0] == "0":
        # verl's engines pin trl==0.27, which the TRL plug-in cannot use: in a
        # verl environment that is expected, not a broken install
        return [Check(name, None, f"trl {installed} installed (verl's engines pin trl 0.x); the "
                                  "TRL plug-in needs trl>=1.0,<2 in an environment of its own",
                      _pip("trl"))]
    try:
        trl = _import_module("trl")
    except Exception as exc:  # noqa: BLE001
        return [Check(name, False, f"import trl failed: {_error_text(exc)}",
                      _pip("trl", force=True))]
    try:
        plugin = _import_module(_TRL_PLUGIN)
    except Exception as exc:  # noqa: BLE001
        return [Check(name, False, f"import {_TRL_PLUGIN} failed: {_error_text(exc)}",
                      _pip("trl") + " (trl>=1.0,<2, transformers>=4.56); "
                      "the error above names the missing or incompatible piece")]
    if not issubclass(plugin.BandGRPOTrainer, trl.GRPOTrainer):
        return [Check(name, False, "BandGRPOTrainer is not a trl.GRPOTrainer", _pip(force=True))]
    checks = [Check(name, True, f"{_TRL_PLUGIN}.BandGRPOTrainer subclasses trl.GRPOTrainer")]
    # the plug-in hands TRL's own _compute_loss per-token epsilon_low /
    # epsilon_high: the band serves only where that loss clamps with them
    hook = "trl serves the band"
    try:
        import inspect

        source = inspect.getsource(trl.GRPOTrainer._compute_loss)
    except Exception as exc:  # noqa: BLE001
        checks.append(Check(hook, False, f"GRPOTrainer._compute_loss unreadable: "
                                         f"{_error_text(exc)}", plugin.SUPPORTED_TRL))
        return checks
    clamp = "1 - self.epsilon_low, 1 + self.epsilon_high"
    if clamp in source:
        checks.append(Check(hook, True, "GRPOTrainer._compute_loss clamps the ratio to "
                                        f"[{clamp}], which BandGRPOTrainer sets to the band "
                                        "per token"))
    else:
        checks.append(Check(hook, False, "GRPOTrainer._compute_loss no longer clamps the ratio "
                                         f"to [{clamp}]: the band would not reach TRL's loss",
                            f"install a supported trl: {plugin.SUPPORTED_TRL}"))
    return checks


def _check_skyrl() -> list:
    name = "skyrl plug-in"
    if importlib.util.find_spec("skyrl") is None and _version("skyrl") is None \
            and _version("skyrl-train") is None:
        return [Check(name, None, "skyrl not installed (optional)")]
    try:
        found = importlib.util.find_spec(_SKYRL_PLUGIN) is not None
    except Exception:  # noqa: BLE001
        found = False
    if not found:
        return [Check(name, False, f"skyrl installed, but {_SKYRL_PLUGIN} is missing: "
                                   "an old bandsolve", _pip(force=True))]
    try:
        _import_module(_SKYRL_PLUGIN)
    except Exception as exc:  # noqa: BLE001
        text = _error_text(exc)
        if "typing_extensions.TypedDict" in text and sys.version_info < (3, 12):
            fix = ("SkyRL 0.3.0 does not import on Python < 3.12 (its pydantic models use "
                   "typing.TypedDict): use Python 3.12 or later for SkyRL")
        else:
            fix = _pip("skyrl") + "; the error above names the missing piece"
        return [Check(name, False, f"import {_SKYRL_PLUGIN} failed: {text}", fix)]
    checks = [Check(name, True, f"import {_SKYRL_PLUGIN} succeeded: policy loss 'bandpo' "
                                "registered in SkyRL's PolicyLossRegistry")]
    ppo_utils = _import_module("skyrl.backends.skyrl_train.utils.ppo_utils")
    # SkyRL's algorithm config with the band's keys (and SkyRL's own eps_clip)
    config = _import_module(_SKYRL_PLUGIN).BandPOAlgorithmConfig(band_delta=_PROBE_DELTA,
                                                                 band_divergence="kl")

    def skyrl_loss(old, new, advantages, mask):
        loss_fn = ppo_utils.PolicyLossRegistry.get(_ENTRY_POINT)
        return loss_fn(new, old, advantages, config, mask)[0]

    checks.append(_probe_band("skyrl", skyrl_loss, _pip("skyrl", force=True)))
    return checks


def _check_openrlhf() -> list:
    name = "openrlhf plug-in import"
    if not _installed("openrlhf"):
        return [Check(name, None, "openrlhf not installed (optional)", _pip("openrlhf"))]
    try:
        plugin = _import_module(_OPENRLHF_PLUGIN)
    except Exception as exc:  # noqa: BLE001
        text = _error_text(exc)
        missing = getattr(exc, "name", None)
        if isinstance(exc, ImportError) and missing in ("flash_attn", "vllm"):
            fix = (f"OpenRLHF's modules import {missing}, which installs only with CUDA: on a "
                   "GPU machine install OpenRLHF as its docs say (pip install openrlhf[vllm]), "
                   "then " + _pip("openrlhf"))
        else:
            fix = _pip("openrlhf") + " (openrlhf>=0.11.2,<0.12); the error above names the " \
                                     "missing or incompatible piece"
        return [Check(name, False, f"import {_OPENRLHF_PLUGIN} failed: {text}", fix)]
    checks = [Check(name, True, f"import {_OPENRLHF_PLUGIN} succeeded: BandPolicyLoss "
                                "subclasses OpenRLHF's PolicyLoss")]
    policy_loss = _import_module("openrlhf.models.loss").PolicyLoss
    band = _import_module("bandsolve.torch").BandSettings(delta=_PROBE_DELTA, divergence="kl")

    def openrlhf_loss(old, new, advantages, mask):
        # a trainer as ActorPPOTrainer leaves it: OpenRLHF's PolicyLoss at its
        # default clip (0.2), then swapped by the plug-in
        trainer = type("Trainer", (), {})()
        trainer.actor_loss_fn = policy_loss(clip_eps_low=0.2, clip_eps_high=0.2)
        plugin.use_band(trainer, band)
        return trainer.actor_loss_fn(new, old, advantages, action_mask=mask)[0]

    checks.append(_probe_band("openrlhf", openrlhf_loss,
                              f"install a supported openrlhf: {plugin.SUPPORTED_OPENRLHF}"))
    return checks


_CHECKS = (
    ("versions", _check_versions),
    ("numba kernels", _check_kernels),
    ("numba cache", _check_numba_cache),
    ("torch", _check_torch),
    ("verl plug-in", _check_verl),
    ("trl plug-in", _check_trl),
    ("skyrl plug-in", _check_skyrl),
    ("openrlhf plug-in", _check_openrlhf),
)


def diagnose() -> list:
    """Run every check, in order; never raises. Returns a list of :class:`Check`."""
    checks = []
    for name, fn in _CHECKS:
        checks.extend(_guarded(name, fn))
    return checks


def format_report(checks: list[Check]) -> str:
    """Plain text: one line per check (OK / WARN / FAIL / ``--`` for an
    optional package absent), then the fix of each problem."""
    checks = list(checks)
    width = max((len(c.name) for c in checks), default=0)
    lines = ["bandsolve doctor", ""]
    for c in checks:
        lines.append(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
    problems = [c for c in checks if c.ok is not None and c.fix]
    optional, seen = [], set()
    for c in checks:  # one line per extra: the version and plug-in lines share it
        if c.ok is None and c.fix and c.fix not in seen:
            seen.add(c.fix)
            optional.append(c)
    failed = sum(c.ok is False for c in checks)
    warned = sum(c.status == "WARN" for c in checks)
    lines.append("")
    if problems:
        lines.append("Fixes:")
        lines.extend(f"  {c.status} {c.name}: {c.fix}" for c in problems)
        lines.append("")
    if optional:
        lines.append("Optional, not installed:")
        lines.extend(f"  {c.name}: {c.fix}" for c in optional)
        lines.append("")
    lines.append(f"{failed} failed, {warned} warnings, {len(checks)} checks")
    return "\n".join(lines)


def exit_code(checks: list[Check]) -> int:
    """1 if any check failed (ok=False), else 0: warnings and absent optional
    packages give 0."""
    return 1 if any(c.ok is False for c in checks) else 0


if __name__ == "__main__":  # python -m bandsolve.doctor: the command, run as a script
    from .cli.doctor import main

    raise SystemExit(main())
