"""A benchmark's markdown report: lines printed as they come, and written to
a file at the end with the machine's load, so a loaded run says so."""

from __future__ import annotations

import os
import pathlib


class Report:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)

    def finish(self, out: str | None) -> None:
        """The closing load line, and the report written to ``out`` where given."""
        self(f"load average at the end {os.getloadavg()[0]:.2f}")
        if out:
            pathlib.Path(out).write_text("\n".join(self.lines) + "\n")
