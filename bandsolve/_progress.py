"""Progress for long work: a bar on a terminal, a line per stage in a log.

tqdm redraws its bar in place, which a terminal shows as one line and a
redirected log keeps as every redraw (716 kB for one ``bandsolve repro``).
:class:`Progress` is tqdm where stderr is a terminal; elsewhere it draws no bar
and prints one line per stage instead (each ``set_postfix_str``).
"""

from __future__ import annotations

import sys

from tqdm import tqdm


class Progress(tqdm):
    """``tqdm`` on an interactive stderr, stage lines in a redirected one."""

    def __init__(self, *args, disable: bool = False, desc: str | None = None, **kwargs):
        self._log_stages = not disable and not sys.stderr.isatty()
        self._stage_prefix = desc or "bandsolve"
        super().__init__(*args, desc=desc, disable=disable or self._log_stages, **kwargs)

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        if self._log_stages:
            print(f"{self._stage_prefix}: {s}", file=sys.stderr, flush=True)
        if not self.disable:
            super().set_postfix_str(s, refresh)
