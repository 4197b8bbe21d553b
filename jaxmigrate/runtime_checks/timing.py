"""Is the new side as fast? Compilations, steady-state call times, memory and bytes moved, old vs new.

The worker records every compilation JAX reports (jax.monitoring's compile events) during an
entry's first call and, with ``--timing``, during W warm-up and K timed calls after it, each call
synchronised with ``block_until_ready``. Call times on a shared machine are noisy, so a new side
is called slower only *beyond the noise*: when the two sides' spreads (the interquartile range of
the K calls; min..max below 4 calls) do not overlap, and the text always gives the spread with the
median. A new side that compiles more often than the old one is flagged with what it compiled.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .hlo import KINDS, CollectiveSummary


@dataclass(frozen=True)
class Compilation:
    name: str  # as JAX names it: jit(step), pmap(step), or the bare function name on jax 0.4.30's pmap
    seconds: float  # XLA's compile time


@dataclass(frozen=True)
class Spread:
    """K call durations: the median and the band that counts as noise."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def band(self) -> tuple[float, float]:
        """The interquartile range, or min..max for fewer than 4 calls."""
        if len(self.seconds) < 4:
            return min(self.seconds), max(self.seconds)
        q1, _, q3 = statistics.quantiles(self.seconds, n=4, method="inclusive")
        return q1, q3

    def text(self) -> str:
        low, high = self.band
        kind = "IQR" if len(self.seconds) >= 4 else "range"
        return f"{duration(self.median)} ({kind} {duration(low)}-{duration(high)}, {len(self.seconds)} calls)"


@dataclass
class SideTiming:
    """One entry on one process of one side."""

    compilations: list[Compilation] = field(default_factory=list)  # during the first call
    later_compilations: list[Compilation] = field(default_factory=list)  # during the warm-up and timed calls
    trace_seconds: float = 0.0  # tracing and lowering, over every call
    lower_seconds: float = 0.0
    first_call: float | None = None  # compilation included
    warmup: int = 0
    calls: Spread | None = None  # None: not timed (no --timing, or a call raised)
    failure: str = ""  # why the timed calls stopped
    peak_rss: int | None = None  # bytes, the worker process's peak
    collectives: CollectiveSummary = field(default_factory=CollectiveSummary)

    @classmethod
    def from_record(cls, record: dict[str, Any], collectives: CollectiveSummary,
                    peak_rss: int | None) -> SideTiming:
        first = record.get("compiled") or {}
        timed = record.get("timing") or {}
        later = timed.get("compiled") or {}
        calls = timed.get("calls") or []
        return cls(
            compilations=[Compilation(c["name"], c["seconds"]) for c in first.get("compilations", [])],
            later_compilations=[Compilation(c["name"], c["seconds"]) for c in later.get("compilations", [])],
            trace_seconds=first.get("trace_seconds", 0.0) + later.get("trace_seconds", 0.0),
            lower_seconds=first.get("lower_seconds", 0.0) + later.get("lower_seconds", 0.0),
            first_call=record.get("seconds"), warmup=timed.get("warmup", 0),
            calls=Spread(tuple(calls)) if calls and not timed.get("failure") else None,
            failure=timed.get("failure") or "", peak_rss=peak_rss, collectives=collectives,
        )

    @property
    def compile_count(self) -> int:
        return len(self.compilations) + len(self.later_compilations)

    @property
    def xla_seconds(self) -> float:
        return sum(c.seconds for c in (*self.compilations, *self.later_compilations))

    @property
    def compile_seconds(self) -> float:
        """Tracing, lowering and XLA compilation, over every call."""
        return self.trace_seconds + self.lower_seconds + self.xla_seconds

    @property
    def collective_bytes(self) -> int:
        return sum(total.bytes for total in self.collectives.totals.values())

    @property
    def collective_ops(self) -> int:
        return sum(total.count for total in self.collectives.totals.values())

    def to_json(self) -> dict[str, Any]:
        calls = self.calls
        return {
            "compilations": [{"name": c.name, "seconds": c.seconds} for c in self.compilations],
            "later_compilations": [{"name": c.name, "seconds": c.seconds} for c in self.later_compilations],
            "compile_count": self.compile_count, "compile_seconds": self.compile_seconds,
            "xla_seconds": self.xla_seconds, "trace_seconds": self.trace_seconds,
            "lower_seconds": self.lower_seconds, "first_call_seconds": self.first_call,
            "warmup": self.warmup, "calls": list(calls.seconds) if calls else None,
            "median": calls.median if calls else None, "band": list(calls.band) if calls else None,
            "failure": self.failure or None, "peak_rss": self.peak_rss,
            "collective_ops": self.collective_ops, "collective_bytes": self.collective_bytes,
        }


@dataclass(frozen=True)
class Flag:
    kind: str  # slower | compiles-more | recompiles
    message: str


@dataclass
class TimingComparison:
    """Old against new for one entry (on one process, or on each side's slowest process)."""

    old: SideTiming
    new: SideTiming

    @property
    def ratios(self) -> dict[str, float | None]:
        old, new = self.old, self.new
        return {
            "compile_count": _ratio(new.compile_count, old.compile_count),
            "compile_seconds": _ratio(new.compile_seconds, old.compile_seconds),
            "median": _ratio(new.calls.median, old.calls.median) if new.calls and old.calls else None,
            "peak_rss": _ratio(new.peak_rss, old.peak_rss),
            "collective_bytes": _ratio(new.collective_bytes, old.collective_bytes),
        }

    @property
    def verdict(self) -> str:
        """slower | faster | same (within the noise) | unknown (not timed on both sides)."""
        old, new = self.old.calls, self.new.calls
        if old is None or new is None:
            return "unknown"
        if new.band[0] > old.band[1]:
            return "slower"
        if new.band[1] < old.band[0]:
            return "faster"
        return "same"

    def flags(self) -> list[Flag]:
        old, new = self.old, self.new
        found = []
        if new.compile_count > old.compile_count:
            found.append(Flag("compiles-more", f"new compiles more often: {new.compile_count} "
                              f"({names(new.compilations + new.later_compilations)}) against "
                              f"{old.compile_count} ({names(old.compilations + old.later_compilations)})"))
        if len(new.later_compilations) > len(old.later_compilations):
            calls = new.warmup + (len(new.calls.seconds) if new.calls else 0)
            found.append(Flag("recompiles", f"new compiles again after its first call: "
                              f"{len(new.later_compilations)} compilations in {calls} later calls "
                              f"({names(new.later_compilations)}); old {len(old.later_compilations)}"))
        if self.verdict == "slower":
            assert old.calls is not None and new.calls is not None
            why = collective_changes(old.collectives, new.collectives)
            found.append(Flag("slower", f"new is slower beyond the noise: {new.calls.text()} against "
                              f"{old.calls.text()}, x{new.calls.median / old.calls.median:.2f}"
                              + (f"; collectives: {why}" if why else "")))
        return found

    def to_json(self) -> dict[str, Any]:
        return {"ratios": self.ratios, "verdict": self.verdict,
                "flags": [{"kind": f.kind, "message": f.message} for f in self.flags()]}


def slowest(timings: list[SideTiming]) -> SideTiming:
    """The process whose timed calls take longest (they run in lockstep: it sets the pace)."""
    timed = [t for t in timings if t.calls is not None]
    return max(timed, key=lambda t: t.calls.median) if timed else timings[0]  # type: ignore[union-attr]


def _ratio(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0:
        return None
    return new / old


def names(compilations: list[Compilation]) -> str:
    """jit(step) x3, jit(f): what was compiled, in order of first appearance."""
    if not compilations:
        return "none"
    counts = Counter(c.name for c in compilations)
    return ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())


def collective_changes(old: CollectiveSummary, new: CollectiveSummary) -> str:
    """Where the new side's collectives differ from the old's, kind by kind (why it may be slower:
    a collective the compiler could not combine, an all-gather or all-to-all of a reshard)."""
    kinds = [k for k in KINDS if k in old.totals or k in new.totals]
    kinds += sorted((set(old.totals) | set(new.totals)) - set(KINDS))
    changes = []
    for kind in kinds:
        if (old.count(kind), old.bytes_of(kind)) != (new.count(kind), new.bytes_of(kind)):
            changes.append(f"{kind} {new.count(kind)} ({size(new.bytes_of(kind))}) against "
                           f"{old.count(kind)} ({size(old.bytes_of(kind))})")
    return "; ".join(changes)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def ratio_text(value: float | None) -> str:
    return "-" if value is None else f"x{value:.2f}"


def phases(result: dict[str, Any], spawned_at: float | None, compile_seconds: float,
           seconds: float | None) -> dict[str, float | None]:
    """Where one worker's wall time went: start-up (interpreter and JAX, joining the others),
    import (the program), compile (JAX's trace, lowering and XLA time in the entries), run (the
    rest of the entries: calls, inputs, saving outputs), waiting for the timing turn, total."""
    clock = result.get("clock") or {}
    ready, imported = clock.get("jax_ready"), clock.get("imported")
    end = clock.get("timed_done") or clock.get("first_calls_done")
    waited = result.get("waited") or 0.0
    run = None if end is None or imported is None else max(0.0, end - imported - compile_seconds - waited)
    return {
        "start_up": None if ready is None or spawned_at is None else ready - spawned_at,
        "import": None if imported is None or ready is None else imported - ready,
        "compile": compile_seconds if end is not None else None, "run": run, "wait": waited, "total": seconds,
    }
