"""Long work shows a bar on a terminal and a line per stage in a log (issue 19,
item 15: tqdm bars filled a redirected repro log, 716 kB)."""

import io
import sys

from bandsolve._progress import Progress


class _FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_in_a_redirected_log_prints_one_line_per_stage_and_no_bar(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    with Progress(total=1000, desc="study", unit="step") as bar:
        for stage in ("ppo", "band-kl"):
            bar.set_postfix_str(stage)
            for _ in range(500):
                bar.update(1)
    assert log.getvalue().splitlines() == ["study: ppo", "study: band-kl"]


def test_progress_on_a_terminal_draws_the_bar(monkeypatch):
    terminal = _FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with Progress(total=10, desc="study", unit="step", file=terminal) as bar:
        bar.set_postfix_str("ppo")
        bar.update(10)
    assert "study" in terminal.getvalue() and "10/10" in terminal.getvalue()


def test_progress_disabled_prints_nothing(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    with Progress(total=3, desc="quiet", disable=True) as bar:
        bar.set_postfix_str("stage")
        bar.update(3)
    assert log.getvalue() == ""
