"""``bandsolve doctor``: the install diagnostic finds what is broken and says so.

Tests marked ``trainers`` need the real verl / TRL packages; the others run on
a core install (the trainer checks then report "--", not a failure).
"""

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

import bandsolve
from bandsolve import _extras, doctor
from bandsolve.cli import doctor as cli_doctor
from bandsolve.cli import main as cli_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAS_VERL = importlib.util.find_spec("verl") is not None
HAS_TRL = importlib.util.find_spec("trl") is not None \
    and not importlib.metadata.version("trl").startswith("0.")  # the plug-in's trl>=1.0
#: verl's environment: its engines pin trl 0.27, below the TRL plug-in's range
HAS_VERLS_TRL = importlib.util.find_spec("trl") is not None and not HAS_TRL



def doctor_main(argv):
    """``bandsolve doctor ARGV``, as the command line runs it."""
    return cli_main(["doctor", *argv])


def _trainer_lines(trainer):
    """doctor's lines for one trainer (its bandsolve.doctor entry point)."""
    (entry,) = [ep for ep in doctor._trainer_entry_points() if ep.name == trainer]
    return doctor._check_trainer(entry)


@pytest.fixture(scope="module")
def checks():
    return doctor.diagnose()


def _by_name(checks, name):
    found = [c for c in checks if c.name == name]
    assert len(found) == 1, [c.name for c in checks]
    return found[0]


def _reinstalls(fix, extra):
    """The fix installs bandsolve with ``extra`` from where it came (a path or
    URL, or the checkout), never as a bare "bandsolve[extra]", which pip would
    look for on a package index that does not hold it."""
    return f"[{extra}]" in fix and "pip install" in fix and f'"bandsolve[{extra}]"' not in fix


def _failing_import(target, error):
    real = doctor._import_module

    def fake(name):
        if name == target:
            raise error
        return real(name)

    return fake


# ------------------------------------------------------------- this install

def test_core_checks_pass(checks):
    assert all(isinstance(c, doctor.Check) for c in checks)
    assert _by_name(checks, "numba kernels").ok is True
    assert _by_name(checks, "numba cache").ok is True
    assert _by_name(checks, "numba threading").ok is True
    for name in ("bandsolve", "python", "numpy", "scipy", "numba", "cvxpy", "clarabel",
                 "mpmath"):
        assert _by_name(checks, name).ok is True, _by_name(checks, name)
    assert bandsolve.__version__ in _by_name(checks, "bandsolve").detail


def test_optional_absent_is_never_a_failure(checks):
    for c in checks:
        if c.ok is None:
            assert c.status == "--"
    if importlib.util.find_spec("skyrl") is None:  # SkyRL absent: listed, not failed
        assert _by_name(checks, "skyrl plug-in import").ok is None


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_VERL, reason="verl not installed")
def test_verl_plugin_ok(checks):
    for name in ("verl entry point", "verl plug-in import", "verl loss registry",
                 "verl serves the band"):
        assert _by_name(checks, name).ok is True, _by_name(checks, name)
    report = doctor.format_report(checks)
    assert "bandpo" in report
    assert "get_policy_loss_fn('bandpo') is bandsolve.integrations.verl" in report


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_TRL, reason="trl not installed")
def test_trl_plugin_ok(checks):
    assert _by_name(checks, "trl plug-in import").ok is True
    assert _by_name(checks, "trl serves the band").ok is True


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_TRL, reason="trl not installed")
def test_trl_loss_that_no_longer_clamps_with_epsilons_is_reported(monkeypatch):
    """The TRL plug-in sets epsilon_low / epsilon_high per token; a TRL whose
    _compute_loss stops clamping with them would run without the band."""
    import trl

    def _compute_loss(self, model, inputs):
        return inputs["ratio"].clamp(0.8, 1.2)  # a fixed clip: what doctor must catch

    from bandsolve.integrations import trl as room

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", _compute_loss)
    check = _by_name(room.doctor_checks(), "trl serves the band")
    assert check.ok is False and "no longer clamps" in check.detail
    assert "trl>=1.0,<2" in check.fix


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_VERL, reason="verl not installed")
@pytest.mark.parametrize("impostor, why", [("vanilla", "both tokens clipped"),
                                           (None, "neither token clipped")])
def test_verl_bandpo_that_does_not_serve_the_band_is_reported(monkeypatch, impostor, why):
    """A registry whose 'bandpo' is verl's own fixed-clip loss (vanilla, eps 0.2), or
    a loss that clips nothing, is found by running it through verl's look-up."""
    import torch
    from verl.trainer.ppo import core_algos

    if impostor is not None:
        fake = core_algos.get_policy_loss_fn(impostor)
    else:
        def fake(old, new, advantages, mask, mode, config):
            return -(advantages * torch.exp(new - old)).mean(), {}
    from bandsolve.integrations import verl as room  # registers bandpo first

    monkeypatch.setitem(core_algos.POLICY_LOSS_REGISTRY, "bandpo", fake)
    checks = room.doctor_checks()
    serves = _by_name(checks, "verl serves the band")
    assert serves.ok is False and why in serves.detail, serves
    assert _by_name(checks, "verl loss registry").ok is False


def test_torch_band_cpu(checks):
    runtime = _by_name(checks, "torch runtime")
    if importlib.util.find_spec("torch") is None:
        assert runtime.ok is None
    else:
        assert runtime.ok is True
        assert _by_name(checks, "torch band (cpu)").ok is True
        assert _by_name(checks, "torch band (cuda)").ok is not False


def test_import_does_not_import_torch():
    code = ("import sys, bandsolve.doctor; "
            "bad = [m for m in ('torch', 'verl', 'trl') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ------------------------------------------------------- simulated breakage

@pytest.mark.trainers
@pytest.mark.skipif(not HAS_VERL, reason="verl not installed")
def test_broken_verl_plugin_is_reported(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "_import_module",
                        _failing_import("bandsolve.integrations.verl", ImportError("boom")))
    checks = doctor.diagnose()
    imp = _by_name(checks, "verl plug-in import")
    assert imp.ok is False
    assert imp.status == "FAIL"
    assert "boom" in imp.detail and "ImportError" in imp.detail
    # bandsolve alone: pip install bandsolve[verl] would resolve verl's own
    # requirements again
    assert "--force-reinstall --no-deps" in imp.fix and "[verl]" not in imp.fix
    # the plug-in's own checks need the plug-in: not run
    assert not [c for c in checks if c.name in ("verl loss registry", "verl serves the band")]

    assert doctor_main([]) == 1
    out = capsys.readouterr().out
    assert "boom" in out
    fixes = out[out.index("Fixes:"):]
    assert "verl plug-in import" in fixes and "--no-deps" in fixes


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_VERL, reason="verl not installed")
def test_plugins_disabled_in_verl(monkeypatch):
    from bandsolve.integrations import verl as room

    if not room.loads_entry_points():
        pytest.skip("this verl (0.8) loads no verl.plugins entry points")
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    entry = _by_name(room.doctor_checks(), "verl entry point")
    assert entry.ok is False
    assert "VERL_USE_EXTERNAL_PLUGINS='none'" in entry.detail
    assert "VERL_USE_EXTERNAL_MODULES=bandsolve.integrations.verl" in entry.fix

    # the other way in: verl imports the module named there
    monkeypatch.setenv("VERL_USE_EXTERNAL_MODULES", "bandsolve.integrations.verl")
    assert _by_name(room.doctor_checks(), "verl entry point").ok is True

    # a list of names that leaves bandpo out
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES")
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "other_plugin")
    assert _by_name(room.doctor_checks(), "verl entry point").ok is False
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "other_plugin, BandPO")
    assert _by_name(room.doctor_checks(), "verl entry point").ok is True


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_VERL, reason="verl not installed")
def test_missing_entry_point(monkeypatch):
    from bandsolve.integrations import verl as room

    monkeypatch.setattr(doctor.importlib.metadata, "entry_points", lambda group: [])
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES", raising=False)
    entry = _by_name(room.doctor_checks(), "verl entry point")
    assert entry.ok is False
    assert _reinstalls(entry.fix, "verl")


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_TRL, reason="trl not installed")
def test_broken_trl_plugin_is_reported(monkeypatch):
    monkeypatch.setattr(doctor, "_import_module",
                        _failing_import("bandsolve.integrations.trl", ImportError("trl boom")))
    check = _by_name(_trainer_lines("trl"), "trl plug-in import")
    assert check.ok is False and "trl boom" in check.detail
    assert "--force-reinstall --no-deps" in check.fix


def test_broken_torch_is_reported(monkeypatch):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    monkeypatch.setattr(doctor, "_import_module",
                        _failing_import("torch", OSError("libtorch_cpu.so: cannot open")))
    check = _by_name(doctor._check_torch(), "torch runtime")
    assert check.ok is False and "libtorch_cpu.so" in check.detail


def test_absent_optional_package(monkeypatch):
    real = doctor._version

    def version(dist):
        return None if dist == "doctor-fake-pkg" else real(dist)

    monkeypatch.setattr(doctor, "_version", version)
    monkeypatch.setattr(doctor, "_PACKAGES", doctor._PACKAGES + (("doctor-fake-pkg", "trl"),))
    checks = doctor._check_versions()
    fake = _by_name(checks, "doctor-fake-pkg")
    assert fake.ok is None and fake.status == "--"
    assert _reinstalls(fake.fix, "trl")
    report = doctor.format_report(checks)
    assert "FAIL" not in report
    assert "Optional, not installed:" in report
    assert "Fixes:" not in report


def test_absent_required_package_fails(monkeypatch):
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: None if d == "scipy" else real(d))
    scipy = _by_name(doctor._check_versions(), "scipy")
    assert scipy.ok is False and "required" in scipy.detail


def test_wrong_bound_fails(monkeypatch):
    monkeypatch.setattr(bandsolve, "band", lambda p, delta, div: (0.9, 1.2))
    check = _by_name(doctor._check_kernels(), "numba kernels")
    assert check.ok is False and "expected" in check.detail


def test_unwritable_cache_is_a_warning(monkeypatch):
    real_access = os.access
    monkeypatch.setattr(doctor.os, "access",
                        lambda path, mode: False if mode == os.W_OK else real_access(path, mode))
    check = _by_name(doctor._check_numba_cache(), "numba cache")
    assert check.ok is True and check.status == "WARN"
    assert "slower start" in check.detail
    assert "NUMBA_CACHE_DIR" in check.fix
    report = doctor.format_report([check])
    assert "WARN" in report and "Fixes:" in report


def test_a_crashing_check_is_a_failure_not_an_exception(monkeypatch):
    def crash():
        raise RuntimeError("kaboom")

    monkeypatch.setattr(doctor, "_CHECKS", (("crash", crash),))
    checks = doctor.diagnose()
    assert len(checks) == 1 and checks[0].ok is False and "kaboom" in checks[0].detail


def test_exit_code(monkeypatch, capsys):
    ok = doctor.Check("a", True, "fine")
    warn = doctor.Check("b", True, "meh", "do x")
    absent = doctor.Check("c", None, "absent", "pip install c")
    bad = doctor.Check("d", False, "broken", "do y")
    monkeypatch.setattr(doctor, "diagnose", lambda: [ok, warn, absent])
    assert doctor_main([]) == 0
    monkeypatch.setattr(doctor, "diagnose", lambda: [ok, warn, absent, bad])
    assert doctor_main([]) == 1
    out = capsys.readouterr().out
    assert "FAIL  d" in out and "FAIL d: do y" in out and "WARN b: do x" in out


# ------------------------------------------------------------ JSON and CLI

def test_json_output(checks, capsys):
    code = doctor_main(["--json"])
    entries = json.loads(capsys.readouterr().out)
    assert isinstance(entries, list) and len(entries) == len(checks)
    assert [e["name"] for e in entries] == [c.name for c in checks]
    for e in entries:
        assert set(e) == {"name", "ok", "detail", "fix", "status"}
        assert e["ok"] in (True, False, None)
    assert code == (1 if any(e["ok"] is False for e in entries) else 0)


def test_add_subcommand():
    parser = argparse.ArgumentParser(prog="bandsolve")
    cli_doctor.add(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["doctor", "--json"])
    assert args.run is cli_doctor._run and args.json is True
    assert parser.parse_args(["doctor"]).json is False


def test_python_dash_m_bandsolve_doctor_runs_the_command():
    proc = subprocess.run([sys.executable, "-m", "bandsolve", "doctor", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    entries = json.loads(proc.stdout)
    assert entries and {"numba kernels", "verl plug-in import"} <= {e["name"] for e in entries}
    assert proc.returncode == (1 if any(e["ok"] is False for e in entries) else 0)


def test_skyrl_outside_the_plugins_range_names_the_range_not_a_reinstall(monkeypatch):
    """SkyRL 0.3.0 (which does not import on Python 3.11) was met with a
    reinstall of bandsolve: the plug-in's range is what the user needs."""
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda dist: "0.3.0" if dist == "skyrl" else real(dist))
    error = RuntimeError("Please use `typing_extensions.TypedDict` instead of "
                         "`typing.TypedDict` on Python < 3.12.")
    monkeypatch.setattr(doctor, "_import_module",
                        _failing_import("bandsolve.integrations.skyrl", error))
    (check,) = _trainer_lines("skyrl")
    assert check.ok is None and "skyrl 0.3.0 installed" in check.detail
    assert "skyrl<0.5,>=0.4" in check.detail and "--force-reinstall" not in check.fix


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_VERLS_TRL, reason="needs verl's pinned trl 0.x")
def test_doctor_in_verls_environment_reports_trl_0x_as_not_applicable_not_failed():
    check = _by_name(_trainer_lines("trl"), "trl plug-in import")
    assert check.ok is None and "trl<2,>=1.0" in check.detail
    # what holds trl there, and no advice to move it (verl's engine needs 0.27)
    assert "bandsolve[verl] requires trl==0.27.0" in check.detail and check.fix == ""


def test_numba_cache_dir_set_after_import_is_not_shown_as_the_cache_in_use(
        monkeypatch, tmp_path):
    """doctor printed NUMBA_CACHE_DIR beside a cache path numba does not use:
    numba reads the variable once, at import, so one set later has no effect."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "set-too-late"))
    check = _by_name(doctor._check_numba_cache(), "numba cache")
    if str(tmp_path) in check.detail.split(" (")[0]:
        pytest.skip("numba's cache path is under tmp_path")
    assert f"NUMBA_CACHE_DIR={tmp_path / 'set-too-late'} is set but not used" in check.detail


def test_doctor_fix_never_points_pip_at_a_package_index(monkeypatch):
    """doctor suggested pip install "bandsolve[verl]": bandsolve is on no index,
    so that fails or installs another package of the name. The fix names the
    source this bandsolve came from (direct_url.json), or the checkout."""
    wheel = "file:///tmp/w/bandsolve-0.1.0-py3-none-any.whl"
    monkeypatch.setattr(_extras, "_install_source", lambda: (wheel, False))
    assert doctor._pip("verl") == f'pip install "bandsolve[verl] @ {wheel}"'
    monkeypatch.setattr(_extras, "_install_source", lambda: ("file:///src/bandsolve", True))
    # bandsolve alone: a reinstall of its dependencies could move a trainer's pins
    assert doctor._pip("trl", force=True) == \
        'pip install --force-reinstall --no-deps -e "/src/bandsolve"'
    monkeypatch.setattr(_extras, "_install_source", lambda: None)
    assert doctor._pip("skyrl") == 'pip install -e ".[skyrl]" (in the bandsolve checkout)'


@pytest.mark.trainers
@pytest.mark.skipif(importlib.util.find_spec("skyrl") is None, reason="skyrl not installed")
def test_skyrl_bandpo_that_does_not_serve_the_band_is_reported(monkeypatch):
    """SkyRL's registry handing out its own fixed-clip loss (regular, eps 0.2) for
    'bandpo' is found by running it through SkyRL's look-up; bandsolve's passes."""
    from skyrl.backends.skyrl_train.utils.ppo_utils import PolicyLossRegistry

    from bandsolve.integrations import skyrl as room

    (serves,) = room.doctor_checks()
    assert serves.name == "skyrl serves the band" and serves.ok is True, serves
    import dataclasses

    regular = PolicyLossRegistry.get("regular")

    def impostor(log_probs, old_log_probs, advantages, config, *args):
        # SkyRL's regular loss asserts its own policy_loss_type
        return regular(log_probs, old_log_probs, advantages,
                       dataclasses.replace(config, policy_loss_type="regular"), *args)

    real_get = PolicyLossRegistry.get.__func__
    monkeypatch.setattr(PolicyLossRegistry, "get", classmethod(
        lambda cls, name: impostor if name == "bandpo" else real_get(cls, name)))
    (serves,) = room.doctor_checks()
    assert serves.ok is False and "both tokens clipped" in serves.detail, serves
    assert "pip install --force-reinstall --no-deps" in serves.fix  # bandsolve alone


# ------------------------------------------------------------------ OpenRLHF

HAS_OPENRLHF = importlib.util.find_spec("openrlhf") is not None


def test_openrlhf_without_flash_attn_names_the_missing_requirement(monkeypatch):
    """OpenRLHF's modules import flash_attn at their top: where it is missing
    (any machine without CUDA), the fix names it, from OpenRLHF's own
    requirements, beside the reinstall."""
    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: "0.11.2" if d == "openrlhf" else real(d))
    error = ModuleNotFoundError("No module named 'flash_attn'", name="flash_attn")
    monkeypatch.setattr(doctor, "_import_module",
                        _failing_import("bandsolve.integrations.openrlhf", error))
    (check,) = _trainer_lines("openrlhf")
    assert check.ok is False and "flash_attn" in check.detail
    if HAS_OPENRLHF:  # its metadata declares flash-attn
        assert "openrlhf 0.11.2 requires flash-attn, which is not installed" in check.fix
    assert "[openrlhf]" not in check.fix  # pip would try to build flash-attn


def test_openrlhf_absent_is_not_applicable(monkeypatch):
    monkeypatch.setattr(doctor, "_version", lambda d: None)
    monkeypatch.setattr(doctor.importlib.util, "find_spec", lambda name: None)
    (check,) = _trainer_lines("openrlhf")
    assert check.ok is None and _reinstalls(check.fix, "openrlhf")


@pytest.fixture
def openrlhf_importable():
    """OpenRLHF with flash_attn and vllm stood in for where CUDA is missing
    (tests/openrlhf_stand_ins.py)."""
    import openrlhf_stand_ins

    openrlhf_stand_ins.install()


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_OPENRLHF, reason="openrlhf not installed")
def test_openrlhf_plugin_ok(openrlhf_importable):
    checks = _trainer_lines("openrlhf")
    assert [c.name for c in checks] == ["openrlhf plug-in import", "openrlhf serves the band"]
    assert all(c.ok is True for c in checks), checks


@pytest.mark.trainers
@pytest.mark.skipif(not HAS_OPENRLHF, reason="openrlhf not installed")
def test_openrlhf_trainer_left_on_its_own_clip_is_reported(openrlhf_importable, monkeypatch):
    """A use_band that leaves ActorPPOTrainer's PolicyLoss in place (the fixed
    [0.8, 1.2]) is found by running the loss the trainer would run."""
    import bandsolve.integrations.openrlhf as plugin

    monkeypatch.setattr(plugin, "use_band", lambda trainer, band=None: trainer.actor_loss_fn)
    serves = _by_name(plugin.doctor_checks(), "openrlhf serves the band")
    assert serves.ok is False and "both tokens clipped" in serves.detail, serves
    assert "openrlhf>=0.11.2,<0.12" in serves.fix


def test_doctor_advises_no_second_trainer_into_a_trainers_environment(monkeypatch):
    """In a TRL environment doctor advised pip install bandsolve[verl], which
    pins trl back to 0.27: where one trainer is installed, another gets no pip
    line, only where to install it."""
    monkeypatch.setattr(doctor, "_trainer_installed", lambda trainer: trainer == "trl")
    monkeypatch.setattr(doctor, "_import_module", _failing_import(
        "bandsolve.integrations.trl", ImportError("not what this test is about")))
    lines = {c.name: c for c in doctor._trainer_checks()}
    for trainer in ("verl", "skyrl", "openrlhf"):
        line = lines[f"{trainer} plug-in import"]
        assert line.ok is None and line.fix == "", line
        assert "holds trl" in line.detail and f"docs/{trainer}.md" in line.detail
    monkeypatch.setattr(doctor, "_trainer_installed", lambda trainer: False)
    lines = {c.name: c for c in doctor._trainer_checks()}
    assert _reinstalls(lines["verl plug-in import"].fix, "verl")  # nothing to break here


def test_regression_doctor_listed_every_trainer_for_one_environment(monkeypatch):
    """Where no trainer is installed, doctor listed a pip line per trainer as
    if all four could go into one environment; following them in turn
    installs trl 0.27 for verl and then trl 1.x for the TRL plug-in, which
    verl's engine cannot import. Each line now says: an environment of its
    own. The pip command itself (up to the ';') is unchanged."""
    monkeypatch.setattr(doctor, "_trainer_installed", lambda trainer: False)
    lines = [c for c in doctor._trainer_checks() if c.name.endswith("plug-in import")]
    assert len(lines) >= 2, "needs two trainers' entry points to test anything"
    for line in lines:
        trainer = line.name.split()[0]
        command, _, note = line.fix.partition(";")
        assert command.strip() == doctor._pip(trainer), line
        assert "environment of its own" in note, line
    report = doctor.format_report(lines)
    assert report.count("environment of its own") == len(lines)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_regression_doctor_trainer_line_pasted_into_bash_was_a_syntax_error(monkeypatch):
    """The first wording, '...; in an environment of its own (the trainers'
    pins conflict)', made bash refuse the whole pasted line ('in' is a
    reserved word; the apostrophe opens a quote), so pip never ran. A
    trainer's line parses as a shell command line."""
    monkeypatch.setattr(doctor, "_trainer_installed", lambda trainer: False)
    for line in doctor._trainer_checks():
        if line.fix:
            parsed = subprocess.run(["bash", "-n"], input=line.fix, text=True,
                                    capture_output=True)
            assert parsed.returncode == 0, (line.fix, parsed.stderr)


def test_reinstall_advice_leaves_the_dependencies_alone():
    """--force-reinstall without --no-deps reinstalls every dependency at its
    newest allowed version (a CUDA torch, another trl): the fix for a stale
    or damaged bandsolve reinstalls bandsolve alone."""
    assert "--force-reinstall --no-deps" in doctor._pip(force=True)
    assert "[" not in doctor._pip("verl", force=True).split("pip install", 1)[1]
