"""``bandsolve doctor``: check that bandsolve and its trainer plug-ins work here.

This module runs the checks and formats them. The core's checks are here:

* the versions of bandsolve, Python and every dependency (optional extras
  absent, verify and plots among them, are reported, not failed);
* the numba kernels compile and give the closed-form TV band;
* numba's on-disk cache (writable or in-memory) and its threading layer;
* torch: version, CUDA, and ``bandsolve.torch.band`` on CPU (and CUDA).

Each trainer's checks live with its plug-in, in
``bandsolve/integrations/<trainer>.py``, whose ``doctor_checks()`` returns
them; pyproject.toml declares each such function as an entry point of the
group ``bandsolve.doctor``, named after the trainer's distribution and
bandsolve's extra for it (``verl = "bandsolve.integrations.verl:doctor_checks"``).
For each, this module says whether the trainer is installed, imports the
plug-in itself (verl's own plug-in loader logs a failed import only at debug
level, so a broken install reaches users as ``Unsupported loss mode: bandpo``
with no hint of the cause) and reports the error text, then runs the
plug-in's own checks: whether the trainer's hook really serves the band, by
running the loss the trainer would run on two tokens where the band and a
fixed clip disagree (:func:`probe_band`).

Each check is cheap and never raises. Importing this module imports neither
torch nor a trainer: they are imported inside the checks.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable

from ._extras import EXTRAS
from ._extras import pip_command as _pip
from ._files import check_writable_folder

__all__ = ["Check", "diagnose", "exit_code", "format_report", "error_text", "probe_band",
           "PROBE_DELTA", "TRAINER_GROUP"]

# Every check catches Exception on purpose (BLE001 below): a doctor that raises
# on the broken install it is meant to diagnose is no use.


def _package_rows() -> tuple:
    """(name of the distribution and of its import, the extra that installs
    it): the core's packages with None (an absent one fails), then each
    extra's modules (:data:`bandsolve._extras.EXTRAS`) with the first extra
    that has them (an absent one is reported). The trainers report their own
    versions."""
    rows: dict[str, str | None] = dict.fromkeys(("numpy", "scipy", "numba"))
    for extra in ("verify", "plots", "torch"):
        for module in EXTRAS[extra]:
            rows.setdefault(module, extra)
    return tuple(rows.items())


_PACKAGES = _package_rows()

#: the entry-point group of the trainers' checks (see the module docstring)
TRAINER_GROUP = "bandsolve.doctor"

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


def error_text(exc: BaseException) -> str:
    """``Type: message`` and where it was raised (the innermost frame)."""
    text = f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        frame = tb[-1]
        text += f" (at {frame.filename}:{frame.lineno})"
    return text


def _declared_requirements() -> list:
    """bandsolve's declared requirements, extras' included, as packaging
    Requirements; empty where packaging is missing."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return []
    found = []
    for line in importlib.metadata.requires("bandsolve") or ():
        try:
            found.append(Requirement(line))
        except InvalidRequirement:
            continue
    return found


def _requirements() -> dict:
    """bandsolve's declared requirements by project name (e.g. verl ->
    SpecifierSet('<0.10,>=0.9')); empty where packaging is missing."""
    found: dict = {}
    for req in _declared_requirements():
        if req.name.lower() != "bandsolve" and str(req.specifier):
            found.setdefault(req.name.lower(), req.specifier)
    return found


def _guarded(name: str, fn: Callable[[], list]) -> list:
    """Run one check function; an unexpected exception becomes a FAIL line."""
    try:
        return list(fn())
    except Exception as exc:  # noqa: BLE001
        return [Check(name, False, f"the check itself failed: {error_text(exc)}",
                      "report this at the bandsolve issue tracker with this output")]


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
    for name, extra in _PACKAGES:
        version = _version(name)
        if version is None:
            if extra:
                checks.append(Check(name, None, "not installed (optional)", _pip(extra)))
            else:
                checks.append(Check(name, False, "not installed (required)", _pip(force=True)))
            continue
        spec = specs.get(name.lower())
        if spec is not None and not spec.contains(version, prereleases=True):
            if extra:
                checks.append(Check(name, True, f"{version}, outside the tested range {spec}",
                                    _pip(extra)))
            else:
                checks.append(Check(name, False, f"{version}, bandsolve needs {spec}",
                                    f'pip install "{name}{spec}"'))
        else:
            checks.append(Check(name, True, version))
    return checks


def _check_kernels() -> list:
    import numpy as np

    import bandsolve

    fix = f"{_pip(force=True)}; if it persists, report it with this output"
    p, delta = 0.5, 0.05
    # TV's band is the closed form 1 -/+ delta / p (clipped to [0, 1/p])
    expected = (max(0.0, 1.0 - delta / p), min(1.0 / p, 1.0 + delta / p))
    lower, upper = bandsolve.band(p, delta, "tv")
    got = (float(lower), float(upper))
    if not np.allclose(got, expected, rtol=1e-12, atol=0.0):
        return [Check("numba kernels", False,
                      f"band(0.5, 0.05, 'tv') = {got}, expected {expected}", fix)]
    kl_lower, kl_upper = bandsolve.band(np.array([1e-3, 0.5, 0.999]), delta, "kl")
    sane = bool(np.all((kl_lower <= 1.0) & (kl_upper >= 1.0) & np.isfinite(kl_lower)))
    if not sane:
        return [Check("numba kernels", False, f"KL band out of shape: {kl_lower}, {kl_upper}", fix)]
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
        return [Check("torch runtime", False, f"import torch failed: {error_text(exc)}",
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
                            f"import bandsolve.torch failed: {error_text(exc)}",
                            _pip("torch") + " (torch>=2.4)"))
        return checks
    devices = ["cpu"] + (["cuda"] if cuda else [])
    for device in devices:
        name = f"torch band ({device})"
        try:
            p = torch.tensor([0.5, 0.2], dtype=torch.float32, device=device)
            start = time.perf_counter()
            lower, upper = bt.band(p, 0.05, "tv")
            got = torch.stack([lower, upper]).double().cpu()
            elapsed = time.perf_counter() - start
            want = torch.tensor([[0.9, 0.75], [1.1, 1.25]], dtype=torch.float64)
            if torch.allclose(got, want, rtol=1e-6, atol=1e-6):
                # the first call on a device compiles its fused kernel (inductor):
                # the most of a first doctor run, and of a trainer's first step
                first = (f"; first call {elapsed:.1f} s, most of it the fused kernel for "
                         "this device, compiled (on an empty cache) or loaded from torch's "
                         "inductor cache, which later runs and a trainer's first step reuse"
                         if elapsed > 1.0 else f"; first call {elapsed * 1e3:.0f} ms")
                checks.append(Check(name, True, "band of a float32 tensor as the closed form"
                                    + first))
            else:
                checks.append(Check(name, False, f"band = {got.tolist()}, expected "
                                                 f"{want.tolist()}", _pip(force=True)))
        except Exception as exc:  # noqa: BLE001
            checks.append(Check(name, False, error_text(exc),
                                "check that torch works on this device; report it with this "
                                "output"))
    if not cuda:
        checks.append(Check("torch band (cuda)", None, "no CUDA device"))
    return checks


# ------------------------------------------------------------ the trainers

# The probe each plug-in's registered loss runs on, through the trainer's own
# look-up: two tokens at ratio 1.5 with advantage +1, old p = 0.05 and 0.5.
# Band-KL at delta = 0.05 admits 1.5 at p = 0.05 (its upper bound is 2.98) and
# clips it at p = 0.5 (1.31); a fixed interval such as PPO's [0.8, 1.2] clips
# both, no clip neither. The gradient shows which the loss did.
_PROBE_P = (0.05, 0.5)
_PROBE_RATIO = 1.5
#: the delta (with divergence "kl") a plug-in's loss is configured with for the probe
PROBE_DELTA = 0.05


def probe_band(trainer: str, loss: Callable, fix: str) -> Check:
    """The check "TRAINER serves the band": whether ``loss(old_log_prob,
    log_prob, advantages, mask)``, the loss the trainer's hook runs, set up
    with the band of :data:`PROBE_DELTA` and ``"kl"``, applies the band: its
    gradient passes the token inside its band and stops the one beyond it (see
    the probe above). Any exception the loss raises is the check's FAIL."""
    name = f"{trainer} serves the band"
    try:
        return _serves_band(name, loss, fix)
    except Exception as exc:  # noqa: BLE001
        return Check(name, False, f"running the registered loss failed: {error_text(exc)}",
                     _pip(force=True) + "; if it persists, report it with this output")


def _serves_band(name: str, loss: Callable, fix: str) -> Check:
    import math

    import numpy as np
    import torch

    import bandsolve

    _, upper = bandsolve.band(np.array(_PROBE_P), PROBE_DELTA, "kl")
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


def _trainer_entry_points() -> list:
    """The ``bandsolve.doctor`` entry points bandsolve declares, in their order
    there (one per name)."""
    found = [ep for ep in importlib.metadata.entry_points(group=TRAINER_GROUP)
             if ep.module.startswith("bandsolve.")]
    return list({ep.name: ep for ep in found}.values())


def _trainer_installed(trainer: str) -> bool:
    """Whether the trainer's distribution or its import package is present."""
    return _version(trainer) is not None or importlib.util.find_spec(trainer) is not None


def _extra_requirements(extra: str) -> list:
    """bandsolve's requirements under ``extra`` (packaging Requirements, the
    ``extra == ...`` marker dropped); empty where packaging or the metadata is
    missing."""
    return [req for req in _declared_requirements()
            if req.marker is not None and req.marker.evaluate({"extra": extra})
            and not req.marker.evaluate({"extra": ""})]


def _unmet(extra: str) -> list:
    """The requirements of bandsolve's ``extra`` that the installed versions
    break, as "trl==0.27.0 (installed: 1.16.0)": what installing the extra
    here would change. Absent packages are not counted (they would be added)."""
    unmet = []
    for req in _extra_requirements(extra):
        installed = _version(req.name)
        if installed is not None and not req.specifier.contains(installed, prereleases=True):
            unmet.append(f"{req.name}{req.specifier} (installed: {installed})")
    return unmet


def _pins(dist: str) -> list:
    """What holds ``dist`` at its installed version here: each of bandsolve's
    extras whose requirements all hold and that pins ``dist`` to an exact
    version, as "bandsolve[verl] requires trl==0.27.0"."""
    pins = []
    extras = importlib.metadata.metadata("bandsolve").get_all("Provides-Extra") or []
    for extra in extras:
        reqs = _extra_requirements(extra)
        exact = [r for r in reqs if r.name.lower() == dist.lower()
                 and any(s.operator in ("==", "===") for s in r.specifier)]
        if exact and not _unmet(extra) and extra not in ("all",):
            pins.append(f"bandsolve[{extra}] requires {_spec(exact[0])}")
    return pins


def _spec(req) -> str:
    """A requirement as "name<spec>", its marker left out."""
    return f"{req.name}{req.specifier}"


def _install_extra(extra: str, others: tuple = (), among_several: bool = False) -> tuple:
    """(fix, why not): the pip command that installs bandsolve's ``extra``
    here, or "" and the reason where that would change an installed
    package's version, or where ``others`` (other trainers) are installed:
    the trainers' pins conflict, and each needs an environment of its own
    (a trainer's own requirements are not known before it is installed, so
    no pip line here could promise to keep the other's). Where
    ``among_several`` (the report prints other trainers' install lines too),
    the line says to follow it in an environment of its own."""
    unmet = _unmet(extra)
    if unmet:
        return "", (f"installing bandsolve[{extra}] here would change {', '.join(unmet)}: "
                    "it needs an environment of its own")
    if others:
        return "", (f"this environment holds {', '.join(others)}: install {extra} in an "
                    f"environment of its own (docs/{extra}.md)")
    if among_several:
        # after the ';' plain words, no shell syntax: a pasted line still runs pip
        return f"{_pip(extra)}; each trainer needs an environment of its own, as their pins conflict", ""
    return _pip(extra), ""


def _missing_requirement(trainer: str, exc: BaseException) -> str:
    """The trainer's declared requirement an import failed for lack of, as
    "openrlhf 0.11.2 requires flash-attn, which is not installed", or ""."""
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if not missing:
        return ""
    key = missing.split(".")[0].replace("_", "-").lower()
    try:
        requires = importlib.metadata.requires(trainer) or ()
    except importlib.metadata.PackageNotFoundError:
        return ""
    for line in requires:
        name = line.split(";")[0].split("[")[0]
        for sep in "<>=!~ (":
            name = name.split(sep)[0]
        if name.replace("_", "-").lower() == key and _version(name) is None:
            extra = " (an extra of it)" if "extra ==" in line else ""
            return (f"{trainer} {_version(trainer)} requires {name}{extra}, which is not "
                    "installed")
    return ""


def _import_fix(trainer: str, exc: BaseException) -> str:
    """The fix for a plug-in that does not import, its trainer installed and in
    range: the trainer's own requirement that is missing, where the error
    names one; else the requirements of bandsolve's extra that are absent;
    else bandsolve reinstalled alone. Never the extra itself: pip would
    resolve the installed trainer's requirements again, and try to build what
    its environment left out on purpose (flash-attn without CUDA)."""
    missing = _missing_requirement(trainer, exc)
    absent = [f'"{_spec(r)}"' for r in _extra_requirements(trainer) if _version(r.name) is None]
    if missing:
        fix = f"install {trainer} as its documentation says ({missing})"
    elif absent:
        fix = f"pip install {' '.join(absent)} (what bandsolve[{trainer}] needs and lacks here)"
    else:
        fix = f"{_pip(force=True)} (bandsolve alone)"
    return fix + "; the error above names the missing or incompatible piece"


def _check_trainer(entry, others: tuple = (), among_several: bool = False) -> list:
    """One trainer's lines: installed or not, in the plug-in's range or not,
    the plug-in's import, then the plug-in's own ``doctor_checks()``
    (``entry``: its entry point; ``others``: the other trainers installed
    here; ``among_several``: more than one trainer is declared)."""
    trainer, module = entry.name, entry.module
    name = f"{trainer} plug-in import"
    installed = _version(trainer)
    if not _trainer_installed(trainer):
        fix, why = _install_extra(trainer, others, among_several)
        return [Check(name, None, f"{trainer} not installed (optional)"
                      + (f"; {why}" if why else ""), fix)]
    ranges = [r for r in _extra_requirements(trainer) if r.name.lower() == trainer]
    if installed is not None and ranges \
            and not ranges[0].specifier.contains(installed, prereleases=True):
        pins = _pins(trainer)
        held = f" ({'; '.join(pins)})" if pins else ""
        return [Check(name, None, f"{trainer} {installed} installed{held}; the {trainer} "
                                  f"plug-in needs {_spec(ranges[0])}, in an environment of "
                                  "its own", "" if pins else _install_extra(trainer, others)[0])]
    try:
        plugin = _import_module(module)
    except Exception as exc:  # noqa: BLE001
        return [Check(name, False, f"import {module} failed: {error_text(exc)}",
                      _import_fix(trainer, exc))]
    checks = [Check(name, True, f"{trainer} {installed}: import {module} succeeded")]
    return checks + _guarded(f"{trainer} checks", getattr(plugin, entry.attr))


def _trainer_checks() -> list:
    """Every declared trainer's lines (:func:`_check_trainer`)."""
    entries = _trainer_entry_points()
    if not entries:
        return [Check("trainer plug-ins", None, "no bandsolve.doctor entry points: bandsolve's "
                                                "distribution metadata is missing",
                      _pip())]
    installed = tuple(e.name for e in entries if _trainer_installed(e.name))
    among_several = len(entries) > 1
    checks = []
    for entry in entries:
        others = tuple(t for t in installed if t != entry.name)
        checks.extend(_guarded(f"{entry.name} plug-in",
                               functools.partial(_check_trainer, entry, others, among_several)))
    return checks


_CHECKS = (
    ("versions", _check_versions),
    ("numba kernels", _check_kernels),
    ("numba cache", _check_numba_cache),
    ("torch", _check_torch),
    ("trainer plug-ins", _trainer_checks),
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
    optional: dict[str, Check] = {}  # by fix, the first of each
    for c in checks:  # one line per extra: the version and plug-in lines share it
        if c.ok is None and c.fix:
            optional.setdefault(c.fix, c)
    failed = sum(c.ok is False for c in checks)
    warned = sum(c.status == "WARN" for c in checks)
    lines.append("")
    if problems:
        lines.append("Fixes:")
        lines.extend(f"  {c.status} {c.name}: {c.fix}" for c in problems)
        lines.append("")
    if optional:
        lines.append("Optional, not installed:")
        lines.extend(f"  {c.name}: {c.fix}" for c in optional.values())
        lines.append("")
    lines.append(f"{failed} failed, {warned} warnings, {len(checks)} checks")
    return "\n".join(lines)


def exit_code(checks: list[Check]) -> int:
    """1 if any check failed (ok=False), else 0: warnings and absent optional
    packages give 0."""
    return 1 if any(c.ok is False for c in checks) else 0
