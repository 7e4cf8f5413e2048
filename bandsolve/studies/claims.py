"""The report's record of a claim, its verdicts, and how a verdict is read
from a pre-registered family of paired tests.

Each study's ``claims.py`` names its endpoints (``endpoints(result)``: name ->
paired difference, in one Holm family of the study's or shared) and turns its
result and the family's adjusted p-values into rows (``rows(result,
adjusted)``); the report only composes them.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Claim", "DESCRIPTIVE", "NOT_RUN", "VERDICTS", "endpoint_verdict", "row_verdict"]

#: the four verdicts a row may carry
VERDICTS = ("reproduces", "consistent, not run", "not reproduced at this scale", "contradicted")
#: the mark of a part that was skipped (not a verdict: not counted as one)
NOT_RUN = "not run"
#: the mark of a row that describes without deciding (not counted as a verdict)
DESCRIPTIVE = "descriptive"


@dataclasses.dataclass
class Claim:
    claim: str
    paper: str
    ours: str
    #: one of VERDICTS, or NOT_RUN for a part that was skipped, or
    #: DESCRIPTIVE for a row that decides nothing
    verdict: str


def endpoint_verdict(diff: dict, adjusted_p: float, alpha: float = 0.05) -> str:
    """The verdict of one pre-registered endpoint from its Holm-adjusted
    paired test, oriented so that a positive mean favours the band."""
    if adjusted_p < alpha and diff["mean"] > 0:
        return "reproduces"
    if adjusted_p < alpha and diff["mean"] < 0:
        return "contradicted"
    return "not reproduced at this scale"


def row_verdict(tests) -> str:
    """A row's verdict from its (difference, Holm p) pairs: contradicted if
    any favours the control significantly, reproduces if all favour the band
    significantly, else not reproduced at this scale."""
    verdicts = [endpoint_verdict(d, p) for d, p in tests]
    if "contradicted" in verdicts:
        return "contradicted"
    if verdicts and all(v == "reproduces" for v in verdicts):
        return "reproduces"
    return "not reproduced at this scale"
