"""Every fix ``bandsolve doctor`` prints leaves the environment working (issue 42).

In a verl environment doctor suggested ``pip install "bandsolve[trl]"``, whose
dry run installs trl 1.x, which verl's FSDP engine cannot import; in a TRL
environment it suggested ``bandsolve[verl]``, which pins trl back to 0.27.
Here, in each trainer's environment (tests/trainer_envs.sh), every pip command
doctor prints, on this install and on a broken plug-in, runs as ``pip install
--dry-run --report``, and what pip would install must keep the trainer's own
pins: the trainer's version, every requirement of bandsolve's extras that
holds now, and every installed distribution's own requirements that hold now.
It also caught doctor's fix for a broken OpenRLHF plug-in, pip install
"bandsolve[openrlhf] @ ...", which in OpenRLHF's CPU environment (built
without flash-attn) makes pip build flash-attn and fail: such a fix is now a
reinstall of bandsolve alone, or the trainer's missing requirement by name.
"""

import importlib.metadata
import importlib.util
import json
import re
import shlex
import subprocess
import sys

import pytest

from bandsolve import doctor

pytestmark = pytest.mark.trainers

TRAINERS = ("verl", "trl", "skyrl", "openrlhf")
INSTALLED = [t for t in TRAINERS if importlib.util.find_spec(t) is not None]
requirements = pytest.importorskip("packaging.requirements")
if not INSTALLED:
    pytest.skip("needs a trainer's environment (tests/trainer_envs.sh)", allow_module_level=True)
TRAINER = INSTALLED[0]
_PIP = re.compile(r"pip install ([^;()]+)")


def _pip_commands(checks) -> list:
    """The arguments of each distinct ``pip install ...`` in the checks' fixes."""
    found = []
    for check in checks:
        for args in _PIP.findall(check.fix):
            args = shlex.split(args.strip())
            if args not in found:
                found.append(args)
    return found


def _advice() -> list:
    """Every pip command doctor prints here, and those it prints for a broken
    plug-in of this environment's trainer (its import failing, a stale
    install), where the advice matters most."""
    checks = doctor.diagnose()
    real = doctor._import_module

    def broken(name):
        if name.startswith("bandsolve.integrations."):
            raise ImportError("a broken plug-in, simulated")
        return real(name)

    doctor._import_module = broken
    try:
        checks += doctor._trainer_checks()
    finally:
        doctor._import_module = real
    checks.append(doctor.Check("stale", False, "", doctor._pip(force=True)))
    return _pip_commands(checks)


def _installed() -> dict:
    return {dist.metadata["Name"].lower().replace("_", "-"): dist.version
            for dist in importlib.metadata.distributions()}


def _held(versions: dict) -> set:
    """The pins that hold among ``versions``: (who requires, requirement) for
    every installed distribution's own requirements and every requirement of
    bandsolve's extras, where the requirement is met."""
    from packaging.requirements import InvalidRequirement, Requirement

    pins = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        for line in dist.requires or ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if name.lower() == "bandsolve" and req.marker is not None:
                extra = re.search(r'extra == "([^"]+)"', str(req.marker))
                who = f"bandsolve[{extra.group(1)}]" if extra else name
                if extra is None and not req.marker.evaluate({"extra": ""}):
                    continue
                if extra is not None:
                    req.marker = None
            elif req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            else:
                who = name
            have = versions.get(req.name.lower().replace("_", "-"))
            if have is not None and req.specifier.contains(have, prereleases=True):
                pins.add((who, str(req)))
    return pins


def _after(args, tmp_path) -> dict:
    """The installed versions as ``pip install ARGS`` would leave them."""
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
                          "--report", str(report), *args], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, f"pip install {shlex.join(args)}:\n{run.stderr[-3000:]}"
    versions = dict(_installed())
    for item in json.loads(report.read_text())["install"]:
        meta = item["metadata"]
        versions[meta["name"].lower().replace("_", "-")] = meta["version"]
    return versions


def test_the_advice_is_found():
    """The test can see doctor's pip lines: the simulated broken plug-in's
    fix, a reinstall of bandsolve alone, among them."""
    assert any("--force-reinstall" in args and "--no-deps" in args for args in _advice())


def test_every_pip_command_doctor_prints_keeps_the_trainers_pins(tmp_path):
    from packaging.requirements import Requirement

    before = _installed()
    held = _held(before)
    broken = []
    for args in _advice():
        after = _after(args, tmp_path)
        line = f"pip install {shlex.join(args)}"
        if after.get(TRAINER) != before.get(TRAINER):
            broken.append(f"{line}: {TRAINER} {before.get(TRAINER)} -> {after.get(TRAINER)}")
        for who, req in sorted(held - _held(after)):
            name = Requirement(req).name.lower().replace("_", "-")
            broken.append(f"{line}: {who} needs {req}, would get {name} {after.get(name)}")
    assert broken == []


def test_no_advice_installs_another_trainer_here():
    """Each trainer's environment gets no pip line for another trainer (their
    pins conflict); the line says why instead."""
    checks = doctor._trainer_checks()
    for trainer in TRAINERS:
        if trainer in INSTALLED:
            continue
        (line,) = [c for c in checks if c.name == f"{trainer} plug-in import"]
        assert line.fix == "" and "environment of its own" in line.detail, line


@pytest.mark.skipif(TRAINER != "verl", reason="the advice that broke verl's environment")
def test_the_check_flags_the_advice_that_broke_verls_environment(tmp_path):
    """The check can fail: doctor's old fix in verl's environment, bandsolve[trl],
    would move trl from verl's 0.27.0 to 1.x, losing bandsolve[verl]'s pin."""
    source = doctor._pip("trl").split("pip install ", 1)[1]
    after = _after(shlex.split(source), tmp_path)
    assert after["trl"] != _installed()["trl"]
    assert ("bandsolve[verl]", "trl==0.27.0") in _held(_installed()) - _held(after)
