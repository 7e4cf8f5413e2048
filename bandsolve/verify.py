"""``bandsolve verify``: the fast backend against certified convex programs.

Sweeps divergences x p (log-spaced, and close to 0 and 1) x delta, comparing
:func:`bandsolve.band` with :func:`bandsolve.convex.band`, and runs
:func:`bandsolve.convex.simplex_band` on random vocabularies (peaked and
near-uniform, up to 1,000 tokens). Every convex bound comes with an exact
certificate (:mod:`bandsolve.certificate`): an interval, proved at 50
digits, that contains the true bound.

A bound passes when

* the fast value lies in the convex bound's certified interval, widened by
  1e-12 min(r, |r - 1|) (or the rounding of r, 4 eps max(r, 1));
* the interval's width is at most the divergence's tolerance
  (``TOLERANCES``; for the full-vocabulary programs
  ``vocabulary_tolerance``), in units of min(r, |r - 1|);
* the discrepancy ``|r_convex - r_fast| / max(min(r_fast, |r_fast - 1|), 1e-300)``
  is at most that tolerance too;
* the KKT residuals of the solver's answer are under
  ``certificate.KKT_TOLERANCE``.

The floor 1e-300 applies only where r is 0 (saturation) or below the
float64 range. A breach means a bug in one of the backends, and the command
exits 1. A program that no rung of the solver ladder solves is listed as
unverified (the convex path's limit, not a discrepancy).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from . import api, certificate, convex
from ._files import atomic_write, output_folder
from ._progress import Progress
from .divergences import SAMPLE_NAMES, get_divergence

#: the sweep's divergences: every built-in with convex forms, and alpha at
#: its sample parameters
DIVERGENCES = tuple(name for name in SAMPLE_NAMES
                    if get_divergence(name).convex_generator is not None)
P_SWEEP = tuple(np.r_[np.logspace(-6, np.log10(0.5), 10), 1 - np.logspace(-6, -1, 5), 1.0])
DELTA_SWEEP = (0.01, 0.05, 0.1, 0.5, 1.0)
VOCAB_SIZES = (2, 10, 50, 200, 1000)


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """The certified accuracy the sweep demands of the convex path, in units
    of min(r, |r - 1|), by divergence name.

    The 1-d programs' tolerance is the divergence's own
    ``Divergence.verify_tolerance`` unless ``binary`` overrides it for that
    name; the full-vocabulary programs get ``vocabulary_factor`` times it,
    and at least ``vocabulary_floor``.
    """

    binary: Mapping[str, float] = dataclasses.field(default_factory=dict)
    vocabulary_factor: float = 10.0
    vocabulary_floor: float = 1e-6

    def __post_init__(self):
        object.__setattr__(self, "binary", MappingProxyType(dict(self.binary)))

    def __getitem__(self, name: str) -> float:
        return self.binary_for(name)

    def binary_for(self, name: str) -> float:
        """The binary programs' tolerance for a divergence name."""
        if name in self.binary:
            return self.binary[name]
        return get_divergence(name).verify_tolerance

    def vocabulary_for(self, name: str) -> float:
        """The full-vocabulary programs' tolerance for a divergence name."""
        return max(self.vocabulary_factor * self.binary_for(name), self.vocabulary_floor)


#: The defaults: each divergence's ``verify_tolerance``, the largest certified
#: width (and discrepancy) measured on the default sweep with
#: ``convex.SOLVER_LADDER``, rounded up with 3x to 10x headroom. Measured: 3e-9
#: (1e-9 for kl, tv) on the binary programs, 1e-8 for chi2 and alpha:0.5; the
#: vocabulary programs up to 3e-8 (alpha:2), and 3.2e-7 certified width for
#: kl's lower bound 3.8e-5 on a near-uniform vocabulary of 1,000 tokens
#: (Clarabel ends 'optimal' only at 1e-9 tolerances there), hence 10x the
#: binary tolerance and at least 1e-6 for them.
TOLERANCES = Tolerances()
#: where the certificate must place the fast value: within this (times
#: min(r, |r - 1|)) of its interval, the fast backend's own accuracy
FAST_SLACK = 1e-12


def tolerance(name: str, tolerances: Tolerances = TOLERANCES) -> float:
    """The binary programs' tolerance for a divergence name."""
    return tolerances.binary_for(name)


def vocabulary_tolerance(name: str, tolerances: Tolerances = TOLERANCES) -> float:
    """The full-vocabulary programs' tolerance for a divergence name."""
    return tolerances.vocabulary_for(name)


def discrepancy(convex_value, fast_value):
    """|r_convex - r_fast| / max(min(r_fast, |r_fast - 1|), 1e-300), elementwise;
    0 where both are inf, inf where only one is."""
    fast = np.asarray(fast_value, dtype=float)
    conv = np.asarray(convex_value, dtype=float)
    scale = np.maximum(np.minimum(fast, np.abs(fast - 1.0)), certificate.MEASURE_FLOOR)
    with np.errstate(invalid="ignore"):
        err = np.abs(conv - fast) / scale
    return np.where(np.isinf(fast) & np.isinf(conv), 0.0,
                    np.where(np.isinf(fast) | np.isinf(conv), np.inf, err))


@dataclasses.dataclass
class Row:
    """One divergence's results; ``*_where`` name the worst case."""

    divergence: str
    tolerance: float
    vocabulary_tolerance: float
    band_max: float = 0.0
    band_where: str = ""
    simplex_max: float = 0.0
    simplex_where: str = ""
    width_max: float = 0.0
    width_where: str = ""
    simplex_width_max: float = 0.0
    simplex_width_where: str = ""
    kkt_max: float = 0.0
    kkt_where: str = ""
    bounds: int = 0
    outside: int = 0  # fast values outside their certified interval
    uncertified: int = 0  # bounds without a certificate: a failure
    mpmath_only: int = 0  # programs no solver solved, whose fast bound mpmath certified
    solves: int = 0
    solver_seconds: float = 0.0
    failures: list = dataclasses.field(default_factory=list)
    breaches: list = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every bound certified, within tolerance and inside its interval. A
        program no solver rung solved (``failures``) counts only if 50-digit
        arithmetic certified the fast bound in its place (``mpmath_only``);
        otherwise it is uncertified, and the row fails."""
        return (max(self.band_max, self.width_max) <= self.tolerance
                and max(self.simplex_max, self.simplex_width_max) <= self.vocabulary_tolerance
                and self.kkt_max <= certificate.KKT_TOLERANCE
                and self.outside == 0 and self.uncertified == 0)

    def _keep_worst(self, measure: str, value: float, where: str) -> None:
        """``<measure>_max`` and ``<measure>_where`` become ``value`` and
        ``where`` if ``value`` is the largest yet."""
        if value > getattr(self, f"{measure}_max"):
            setattr(self, f"{measure}_max", value)
            setattr(self, f"{measure}_where", where)

    def record_unsolved(self, where: str, p: float, delta: float, side: str,
                        fast_value: float) -> None:
        """A program no rung solved: certify the fast bound itself in mpmath,
        as ``convex`` does for the simplex end, or count it uncertified."""
        own = certificate.certify(p, delta, self.divergence, side, float(fast_value))
        self.bounds += 1
        if own.passes(convex.ACCEPT_WIDTH):
            self.mpmath_only += 1
            self._keep_worst("width", own.width, where)
        else:
            self.uncertified += 1
            self.breaches.append(f"{where}: no solver solved it, and mpmath could not certify "
                                 f"the fast bound {float(fast_value)!r} ({own.reason or own.width})")

    def record(self, kind: str, where: str, cert, convex_value, fast_value, kkt=()) -> None:
        """One bound of the 1-d (``kind`` "band") or the vocabulary ("simplex") programs."""
        self._keep_worst(kind, float(discrepancy(convex_value, fast_value)), where)
        self.bounds += 1
        if not cert.certified:
            self.uncertified += 1
            self.breaches.append(f"{where}: {cert.reason}")
            return
        self._keep_worst("width" if kind == "band" else "simplex_width", cert.width, where)
        residuals = [max(k) for k in (cert.kkt, *kkt) if k is not None]
        if residuals:
            self._keep_worst("kkt", max(residuals), where)
        if not cert.contains(fast_value, FAST_SLACK):
            self.outside += 1
            lo, hi = cert.bounds
            self.breaches.append(f"{where}: fast {float(fast_value)!r} outside [{lo!r}, {hi!r}]")


def _vocabularies(rng, sizes):
    """(pi_old, index, kind) for peaked and near-uniform vocabularies."""
    for n in sizes:
        for kind in ("peaked", "near-uniform"):
            logits = rng.normal(0, 4.0 if kind == "peaked" else 0.1, n)
            pi = np.exp(logits - logits.max())
            pi /= pi.sum()
            # the sampled token: the mode for a peaked one, else a random one
            index = int(np.argmax(pi)) if kind == "peaked" and n > 2 else int(rng.integers(n))
            yield pi, index, kind
            if kind == "peaked" and n > 2:
                yield pi, int(np.argsort(pi)[n // 2]), "peaked, median token"


def run(divergences=DIVERGENCES, p_values=P_SWEEP, deltas=DELTA_SWEEP, sizes=VOCAB_SIZES,
        seed=0, progress=True, tolerances: Tolerances = TOLERANCES):
    """Run the sweep; returns one :class:`Row` per divergence."""
    rng = np.random.default_rng(seed)
    vocab = list(_vocabularies(rng, sizes))
    p_grid, d_grid = (a.ravel() for a in np.meshgrid(np.asarray(p_values, dtype=float),
                                                     np.asarray(deltas, dtype=float)))
    vocab_deltas = [float(rng.choice(deltas)) for _ in vocab]
    rows = []
    total = len(divergences) * (p_grid.size + len(vocab))
    bar = Progress(total=total, desc="verify", unit="program", disable=not progress)
    for name in divergences:
        bar.set_postfix_str(name)
        row = Row(name, tolerances.binary_for(name), tolerances.vocabulary_for(name))
        # one call: each program compiles once for the whole grid
        res = convex.band(p_grid, d_grid, name, on_failure="nan")
        lo, hi = api.band(p_grid, d_grid, name)
        row.failures.extend(res.failures)
        row.solver_seconds += res.solve_seconds
        row.solves += res.solves
        assert res.lower_certificate is not None and res.upper_certificate is not None
        for i, (p, d) in enumerate(zip(p_grid, d_grid)):
            for side, conv, fast, certs in (("lower", res.lower, lo, res.lower_certificate),
                                            ("upper", res.upper, hi, res.upper_certificate)):
                where = f"{side}, p={p:.6g}, delta={d:g}"
                if certs[i] is not None:
                    row.record("band", where, certs[i], conv[i], fast[i])
                else:
                    row.record_unsolved(where, float(p), float(d), side, fast[i])
        bar.update(p_grid.size)
        for (pi, index, kind), d in zip(vocab, vocab_deltas):
            p = pi[index]
            fast_bounds = api.band(p, d, name)
            wheres = [f"{side}, n={pi.size} {kind}, p={p:.4g}, delta={d:g}" for side in ("lower", "upper")]
            try:
                res = convex.simplex_band(pi, index, d, name)
            except convex.ConvexSolveError as exc:
                # the vocabulary program's band is the 1-d band (the reduction):
                # certify the fast bounds of that token in mpmath instead
                row.failures.append(str(exc))
                for side, where, fast in zip(("lower", "upper"), wheres, fast_bounds):
                    row.record_unsolved(where, float(p), d, side, float(fast))
            else:
                assert res.vocabulary_kkt is not None and res.lower_certificate is not None \
                    and res.upper_certificate is not None
                row.solver_seconds += res.solve_seconds
                row.solves += res.solves
                for where, conv, fast, cert, kkt in zip(
                        wheres, (res.lower, res.upper), fast_bounds,
                        (res.lower_certificate, res.upper_certificate), res.vocabulary_kkt):
                    row.record("simplex", where, cert.item(), conv, fast, (kkt,))
            bar.update(1)
        rows.append(row)
    bar.close()
    return rows


def markdown(rows) -> str:
    """The per-divergence table, in units of min(r, |r - 1|)."""
    lines = ["| divergence | 1-d: tolerance | max discrepancy | max certified width | where | "
             "full vocabulary: tolerance | max discrepancy | max certified width | where | "
             "fast inside certified interval | max KKT residual | solves | solver s | result |",
             "|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        verdict = "pass" if r.passed else "FAIL"
        if r.failures:
            verdict += f" ({len(r.failures)} unverified)"
        inside = f"{r.bounds - r.outside - r.uncertified}/{r.bounds}"
        worst_1d = r.width_where if r.width_max >= r.band_max else r.band_where
        worst_vocab = (r.simplex_width_where if r.simplex_width_max >= r.simplex_max
                       else r.simplex_where)
        def size(value, tolerance):
            # two digits, or as many as show a value over its tolerance
            # (1.00001e-08 against 1e-08 printed as 1.0e-08 hid the failure)
            return f"{value:.1e}" if value <= tolerance else f"{value:.6g}"

        lines.append(f"| `{r.divergence}` | {r.tolerance:.0e} | {size(r.band_max, r.tolerance)} "
                     f"| {size(r.width_max, r.tolerance)} | {worst_1d} "
                     f"| {r.vocabulary_tolerance:.0e} "
                     f"| {size(r.simplex_max, r.vocabulary_tolerance)} "
                     f"| {size(r.simplex_width_max, r.vocabulary_tolerance)} | {worst_vocab} "
                     f"| {inside} | {r.kkt_max:.0e} | {r.solves} | {r.solver_seconds:.1f} "
                     f"| {verdict} |")
    return "\n".join(lines)


def summary(rows, seconds: float) -> str:
    """The verdict line: PASS or FAIL, and how many bounds were certified how."""
    ok = all(r.passed for r in rows)
    unsolved = sum(len(r.failures) for r in rows)
    uncertified = sum(r.uncertified for r in rows)
    return (f"{'PASS' if ok else 'FAIL'}: {len(rows)} divergences, "
            f"{sum(r.bounds - r.uncertified for r in rows)} of {sum(r.bounds for r in rows)} "
            f"bounds certified, {sum(r.solves for r in rows)} convex solves; {unsolved} programs "
            f"no solver solved, whose {sum(r.mpmath_only for r in rows)} fast bounds mpmath "
            f"certified directly; {uncertified} uncertified, {seconds:.0f} s")


def write_report(out: str, rows, seconds: float) -> tuple[str, str]:
    """Write ``verify.md`` and ``verify.json`` into the folder ``out``
    (created if missing); returns their paths."""
    table = markdown(rows)
    ok = all(r.passed for r in rows)
    output_folder(out)
    header = ("# bandsolve verify\n\nThe numba backend against Clarabel's convex programs, "
              "each bound certified in mpmath at 50 digits (`bandsolve verify`). All sizes "
              "are in units of min(r, |r - 1|) (floored at 1e-300): discrepancy "
              "|r_convex - r_fast| / max(min(r_fast, |r_fast - 1|), 1e-300); certified width "
              "(hi - lo) of the interval proved to hold the true bound. A divergence passes "
              "when every fast bound lies in its certified interval, and widths and "
              "discrepancies stay within its tolerance.\n\n"
              f"Sweep: {len(P_SWEEP)} values of p from 1e-6 to 1, delta in "
              f"{list(DELTA_SWEEP)}; full-vocabulary programs on peaked and near-uniform "
              f"vocabularies of {list(VOCAB_SIZES)} tokens.\n\n")
    with atomic_write(os.path.join(out, "verify.md")) as fh:
        fh.write(header + table + f"\n\n{'PASS' if ok else 'FAIL'} in {seconds:.0f} s\n")
    with atomic_write(os.path.join(out, "verify.json")) as fh:
        json.dump({"passed": ok, "seconds": seconds,
                   "kkt_tolerance": certificate.KKT_TOLERANCE,
                   "rows": [dict(dataclasses.asdict(r), passed=r.passed) for r in rows]},
                  fh, indent=2, default=float)
    return os.path.join(out, "verify.md"), os.path.join(out, "verify.json")
