"""The verification report: dataclasses, their JSON form, and the rich rendering.

A side runs as one process, or as N with ``--processes N``; results are kept per process
(``SideReport.processes``, ``EntryReport.processes``) and the text shows them one by one only
where they differ.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from .compare import Comparison, LeafDiff
from .hlo import KINDS, CollectiveSummary
from .timing import SideTiming, TimingComparison, duration, names, ratio_text, size, slowest

JSON_VERSION = 1
EXIT_EQUAL, EXIT_DIFFERENT, EXIT_FAILED = 0, 1, 2


@dataclass
class Failure:
    """Why a side (or one entry on it) produced no output: one paragraph, plus evidence."""

    kind: str  # raised | timeout | crashed | no-jax | missing-entry | missing-inputs | inputs-raised
    #            | import-error | cannot-start | worker-error
    #            with several processes also: unsupported | connect-error | stopped (killed after a peer failed)
    message: str
    traceback: str = ""
    stderr: str = ""
    process: int | None = None  # which process, when a side runs as several

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "traceback": self.traceback, "stderr": self.stderr,
                "process": self.process}


@dataclass
class ProcessSide:
    """One worker process of a side."""

    index: int
    seconds: float | None = None
    returncode: int | None = None
    local_device_count: int | None = None
    failure: Failure | None = None
    phases: dict[str, float | None] = field(default_factory=dict)  # see timing.phases
    peak_rss: int | None = None  # bytes

    def to_json(self) -> dict[str, Any]:
        return {"process": self.index, "seconds": self.seconds, "returncode": self.returncode,
                "local_device_count": self.local_device_count,
                "failure": self.failure.to_json() if self.failure else None,
                "phases": dict(self.phases), "peak_rss": self.peak_rss}


@dataclass
class SideReport:
    label: str  # "old" | "new"
    program: str
    python: str
    jax_version: str | None = None
    numpy_version: str | None = None
    device_count: int | None = None  # jax.device_count(): every process's devices
    threefry_partitionable: bool | None = None  # None: not available in this JAX, or never reached
    seconds: float | None = None  # the worker's wall time, interpreter start to exit (the slowest process's)
    returncode: int | None = None  # the worker's; None with several processes (see processes)
    failure: Failure | None = None  # with several processes: the first process's to fail
    processes: list[ProcessSide] = field(default_factory=list)

    @property
    def phases(self) -> dict[str, float | None]:
        """The phases of the process that took longest."""
        timed = [p for p in self.processes if p.seconds is not None]
        return max(timed, key=lambda p: p.seconds or 0.0).phases if timed else {}

    def to_json(self) -> dict[str, Any]:
        return {
            "phases": self.phases,
            "program": self.program, "python": self.python, "jax_version": self.jax_version,
            "numpy_version": self.numpy_version, "device_count": self.device_count,
            "threefry_partitionable": self.threefry_partitionable, "seconds": self.seconds,
            "returncode": self.returncode, "failure": self.failure.to_json() if self.failure else None,
            "processes": [p.to_json() for p in self.processes],
        }


@dataclass
class OutputLeaf:
    path: str
    shape: tuple[int, ...] | None
    dtype: str
    sharding: str | None
    note: str = ""  # e.g. which part of a global array this process saved


@dataclass
class EntrySide:
    """One entry as one side ran it."""

    status: str = "not-run"  # ok | failed | not-run
    seconds: float | None = None  # call + block_until_ready, compilation included
    collectives: CollectiveSummary = field(default_factory=CollectiveSummary)
    outputs: list[OutputLeaf] = field(default_factory=list)
    failure: Failure | None = None
    timing: SideTiming | None = None  # what JAX compiled (always) and the timed calls (--timing)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status, "seconds": self.seconds,
            "timing": self.timing.to_json() if self.timing else None,
            "failure": self.failure.to_json() if self.failure else None,
            "collectives": self.collectives.to_json(),
            "outputs": [
                {"path": o.path, "shape": list(o.shape) if o.shape is not None else None,
                 "dtype": o.dtype, "sharding": o.sharding, "note": o.note}
                for o in self.outputs
            ],
        }


def _leaf_json(d: LeafDiff) -> dict[str, Any]:
    return {
        "path": d.path, "equal": d.equal, "reason": d.reason,
        "old_shape": list(d.old_shape) if d.old_shape is not None else None,
        "new_shape": list(d.new_shape) if d.new_shape is not None else None,
        "old_dtype": d.old_dtype, "new_dtype": d.new_dtype, "max_abs": d.max_abs, "max_rel": d.max_rel,
        "rtol": d.rtol, "atol": d.atol, "unreplicated": d.unreplicated,
    }


_STATUS_ORDER = ("equal", "different", "failed")


@dataclass
class ProcessEntry:
    """One entry on one process: process i of the old side against process i of the new side."""

    process: int
    old: EntrySide
    new: EntrySide
    comparison: Comparison | None = None  # None when either side failed

    @property
    def status(self) -> str:
        if self.comparison is None:
            return "failed"
        return "equal" if self.comparison.equal else "different"

    @property
    def timing(self) -> TimingComparison | None:
        if self.old.timing is None or self.new.timing is None:
            return None
        return TimingComparison(self.old.timing, self.new.timing)

    def to_json(self) -> dict[str, Any]:
        cmp = self.comparison
        return {
            "process": self.process, "status": self.status,
            "problems": list(cmp.problems) if cmp else [],
            "leaves": [_leaf_json(d) for d in cmp.leaves] if cmp else [],
            "old": self.old.to_json(), "new": self.new.to_json(),
        }


@dataclass
class EntryReport:
    """One entry on every process. ``old``, ``new`` and ``comparison`` are those of the process
    that shows the entry's status (the first that failed, else the first that differs, else
    process 0); ``processes`` has them all."""

    name: str
    processes: list[ProcessEntry]

    @property
    def status(self) -> str:
        return max((p.status for p in self.processes), key=_STATUS_ORDER.index)

    @property
    def shown(self) -> ProcessEntry:
        status = self.status
        return next(p for p in self.processes if p.status == status)

    @property
    def old(self) -> EntrySide:
        return self.shown.old

    @property
    def new(self) -> EntrySide:
        return self.shown.new

    @property
    def comparison(self) -> Comparison | None:
        return self.shown.comparison

    @property
    def timing(self) -> TimingComparison | None:
        """Each side's slowest process against the other's (several processes run in lockstep)."""
        pairs = [p.timing for p in self.processes if p.timing is not None]
        if not pairs:
            return None
        return TimingComparison(slowest([t.old for t in pairs]), slowest([t.new for t in pairs]))

    def to_json(self) -> dict[str, Any]:
        shown = self.shown.to_json()
        del shown["process"]
        return {"name": self.name, **shown, "shown_process": self.shown.process,
                "processes": [p.to_json() for p in self.processes]}

    def timing_json(self) -> dict[str, Any] | None:
        timing = self.timing
        if timing is None:
            return None
        return {"slowest": timing.to_json(),
                "processes": [{"process": p.process, **p.timing.to_json()} if p.timing else
                              {"process": p.process, "ratios": None, "verdict": "unknown", "flags": []}
                              for p in self.processes]}


@dataclass
class VerifyReport:
    old: SideReport
    new: SideReport
    entries: list[EntryReport]
    devices: int  # per process
    settings: dict[str, Any] = field(default_factory=dict)
    processes: int = 1
    timing: dict[str, Any] | None = None  # --timing: warmup, repeat, how the sides took turns
    compare_seconds: float | None = None  # reading outputs and HLO, comparing (in this process)

    @property
    def exit_code(self) -> int:
        """0: every entry equal; 1: some entry differs; 2: a side failed to run."""
        if self.old.failure or self.new.failure or any(e.status == "failed" for e in self.entries):
            return EXIT_FAILED
        return EXIT_DIFFERENT if any(e.status == "different" for e in self.entries) else EXIT_EQUAL

    @property
    def equal(self) -> bool:
        return self.exit_code == EXIT_EQUAL

    def entry(self, name: str) -> EntryReport:
        return next(e for e in self.entries if e.name == name)

    def failures(self) -> list[tuple[str, Failure]]:
        """(where, failure) for every side- and entry-level failure (of every process)."""
        if self.processes == 1:
            found = [(s.label, s.failure) for s in (self.old, self.new) if s.failure]
            for e in self.entries:
                found += [(f"{label} {e.name}()", side.failure)
                          for label, side in (("old", e.old), ("new", e.new)) if side.failure]
            return found
        # (side, entry, failure) in order, then the same failure on several processes told once.
        raw = [(s.label, "", p.failure) for s in (self.old, self.new) for p in s.processes if p.failure]
        for e in self.entries:
            raw += [(label, f" {e.name}()", side.failure) for p in e.processes
                    for label, side in (("old", p.old), ("new", p.new)) if side.failure]
        groups: dict[tuple[str, ...], list[Failure]] = {}
        for label, entry, failure in raw:
            groups.setdefault((label, entry, failure.kind, failure.message, failure.traceback), []).append(failure)
        found = []
        for (label, entry, *_), same in groups.items():
            indices = ", ".join(str(f.process) for f in same)
            found.append((f"{label} process{'es' if len(same) > 1 else ''} {indices}{entry}", same[0]))
        # A process killed because a peer failed comes after what made that peer fail.
        return sorted(found, key=lambda item: item[1].kind == "stopped")

    def to_json(self) -> dict[str, Any]:
        return _strict({
            "version": JSON_VERSION, "exit_code": self.exit_code, "devices": self.devices,
            "processes": self.processes,
            "settings": dict(self.settings),
            "sides": {"old": self.old.to_json(), "new": self.new.to_json()},
            "entries": [{**e.to_json(), **({"timing": e.timing_json()} if self.timing else {})}
                        for e in self.entries],
            "timing": self.timing, "compare_seconds": self.compare_seconds,
        })


def _strict(value: Any) -> Any:
    """``value`` with every infinite or NaN float as the string "Infinity", "-Infinity" or "NaN"
    (what ``float()`` reads back): json.dumps would write them as bare tokens, which are not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


_bytes = size


def _sides_table(report: VerifyReport) -> Table:
    where = f"{report.devices} CPU devices"
    if report.processes > 1:
        where = f"{report.processes} processes x {report.devices} CPU devices"
    table = Table(title=f"jaxmigrate verify on {where}", title_justify="left")
    table.add_column("")
    table.add_column("old")
    table.add_column("new")
    rows = [
        ("program", lambda s: s.program), ("python", lambda s: s.python),
        ("JAX", lambda s: s.jax_version or "-"),
        ("devices", lambda s: "-" if s.device_count is None else str(s.device_count) + (
            f" ({report.devices} per process)" if report.processes > 1 else "")),
        ("threefry_partitionable",
         lambda s: "n/a" if s.threefry_partitionable is None else str(s.threefry_partitionable).lower()),
        ("worker wall time", lambda s: _seconds(s.seconds)),
        ("phases", _phases_text),
    ]
    if report.processes > 1:
        rows[-2] = ("worker wall times", lambda s: ", ".join(_seconds(p.seconds) for p in s.processes))
    for name, get in rows:
        table.add_row(name, escape(get(report.old)), escape(get(report.new)))
    return table


def _phases_text(side: SideReport) -> str:
    phases = side.phases
    parts = [("start-up", "start_up"), ("import", "import"), ("compile", "compile"), ("run", "run")]
    text = ", ".join(f"{label} {_seconds(phases.get(key))}" for label, key in parts if phases.get(key) is not None)
    if phases.get("wait"):
        text += f", waited {_seconds(phases['wait'])} for the timing turn"
    return text or "-"


def _timing_rows(old: SideTiming, new: SideTiming, cmp: TimingComparison) -> list[tuple[str, str, str, str]]:
    ratios = cmp.ratios
    calls = max(old.warmup + len(old.calls.seconds) if old.calls else 0,
                new.warmup + len(new.calls.seconds) if new.calls else 0)

    def compiled(t: SideTiming) -> str:
        return f"{len(t.compilations)}: {names(t.compilations)}"

    def step(t: SideTiming) -> str:
        return t.calls.text() if t.calls else (f"not timed ({t.failure})" if t.failure else "not timed")

    return [
        ("compilations, first call", compiled(old), compiled(new), ""),
        (f"compilations, {calls} later calls", str(len(old.later_compilations)), str(len(new.later_compilations)), ""),
        ("compilations, all calls", str(old.compile_count), str(new.compile_count), ratio_text(ratios["compile_count"])),
        ("compile time (trace, lower, XLA)", duration(old.compile_seconds), duration(new.compile_seconds),
         ratio_text(ratios["compile_seconds"])),
        ("first call (compile included)", duration(old.first_call), duration(new.first_call), ""),
        ("step time, median", step(old), step(new), ratio_text(ratios["median"])),
        ("peak RSS of the worker", size(old.peak_rss), size(new.peak_rss), ratio_text(ratios["peak_rss"])),
        ("collectives", f"{old.collective_ops} ops, {size(old.collective_bytes)}",
         f"{new.collective_ops} ops, {size(new.collective_bytes)}", ratio_text(ratios["collective_bytes"])),
    ]


def _render_timing(entry: EntryReport, report: VerifyReport, console: Console) -> None:
    cmp = entry.timing
    if cmp is None:
        return
    settings = report.timing or {}
    title = (f"{entry.name}(): timing ({settings.get('repeat')} calls after {settings.get('warmup')} warm-up, "
             "each synchronised)")
    if report.processes > 1:
        title += "; each side's slowest process"
    table = Table(title=title, title_justify="left")
    for col in ("", "old", "new", "new/old"):
        table.add_column(col, justify="left" if col in ("", "old", "new") else "right")
    for row in _timing_rows(cmp.old, cmp.new, cmp):
        table.add_row(*map(escape, row))
    if report.processes > 1:
        for result in entry.processes:
            if result.timing is not None:
                pair = result.timing
                table.add_row(escape(f"step time, process {result.process}"),
                              escape(pair.old.calls.text() if pair.old.calls else "not timed"),
                              escape(pair.new.calls.text() if pair.new.calls else "not timed"),
                              ratio_text(pair.ratios["median"]))
    verdict = {"slower": "[red]new is slower beyond the noise[/]", "faster": "new is faster beyond the noise",
               "same": "the same within the noise (the spreads overlap)", "unknown": "not timed on both sides"}
    table.caption = f"step time: {verdict[cmp.verdict]}"
    console.print(table)
    for flag in cmp.flags():
        console.print(f"  [yellow]![/] {escape(flag.message)}")


def _collectives_table(title: str, result: ProcessEntry) -> Table:
    old, new = result.old.collectives, result.new.collectives
    kinds = [k for k in KINDS if old.count(k) or new.count(k)]
    kinds += sorted((set(old.totals) | set(new.totals)) - set(KINDS))
    table = Table(title=title, title_justify="left")
    for col in ("kind", "old count", "old bytes", "new count", "new bytes"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for kind in kinds:
        style = "" if old.count(kind) == new.count(kind) else "yellow"
        table.add_row(kind, str(old.count(kind)), _bytes(old.bytes_of(kind)),
                      str(new.count(kind)), _bytes(new.bytes_of(kind)), style=style)
    if not kinds:
        table.add_row("(none)", "0", "-", "0", "-")
    table.caption = (f"modules compiled: old {len(old.modules)}, new {len(new.modules)}; "
                     f"entry time: old {_seconds(result.old.seconds)}, new {_seconds(result.new.seconds)}")
    return table


def _collective_counts(result: ProcessEntry) -> tuple[dict[str, Any], dict[str, Any]]:
    return result.old.collectives.to_json()["totals"], result.new.collectives.to_json()["totals"]


def _worst_lines(comparison: Comparison, indent: str = "  ") -> list[str]:
    """The worst leaves as lines, not a table: a leaf path must stay whole in a narrow terminal."""
    lines = []
    for d in comparison.worst():
        old = f"{d.old_dtype}{list(d.old_shape or [])}"
        new = f"{d.new_dtype}{list(d.new_shape or [])}"
        errors = "" if d.max_abs is None else (
            f", max abs err {d.max_abs:.3g}, max rel err {d.max_rel:.3g} (rtol {d.rtol:g}, atol {d.atol:g})")
        lines.append(f"{indent}[red]x[/] [bold]{escape(d.path)}[/]: {escape(d.reason)}; old {old}, new {new}{errors}")
    return lines


def _leaves_equal(cmp: Comparison) -> str:
    return f"{sum(d.equal for d in cmp.leaves)}/{len(cmp.leaves)} leaves equal"


def _comparison_lines(cmp: Comparison, indent: str) -> list[str]:
    return [f"{indent}[red]structure:[/] {escape(problem)}" for problem in cmp.problems] + _worst_lines(cmp, indent)


def _side_state(side: EntrySide) -> str:
    if side.status == "failed":  # no failure of its own: the process was killed in it (see above)
        return side.failure.kind if side.failure else "did not finish"
    return {"ok": "ran", "not-run": "not run"}.get(side.status, side.status)


_COLOURS = {"equal": "green", "different": "red", "failed": "red"}


def _render_entry(entry: EntryReport, console: Console, report: VerifyReport) -> None:
    status = entry.status
    line = f"[bold]{escape(entry.name)}()[/]: [{_COLOURS[status]}]{status}[/]"
    results = entry.processes
    if len(results) == 1:
        cmp = results[0].comparison
        console.print(line + (f" ({_leaves_equal(cmp)})" if cmp is not None else ""))
        if cmp is not None:
            for text in _comparison_lines(cmp, "  "):
                console.print(text)
        if status != "failed":
            console.print(_collectives_table(f"{entry.name}(): collectives in compiled modules", results[0]))
        return
    if status == "equal":
        console.print(line + f" on all {len(results)} processes ({_leaves_equal(results[0].comparison)} on each)")
    else:
        console.print(line)
        for result in results:
            colour = _COLOURS[result.status]
            text = f"  process {result.process}: [{colour}]{result.status}[/]"
            if result.comparison is not None:
                text += f" ({_leaves_equal(result.comparison)})"
            else:
                text += f" (old {_side_state(result.old)}, new {_side_state(result.new)})"
            console.print(text)
            if result.comparison is not None:
                for text in _comparison_lines(result.comparison, "    "):
                    console.print(text)
    ran = [r for r in results if r.comparison is not None]
    if not ran:
        return
    if len(ran) == len(results) and all(_collective_counts(r) == _collective_counts(ran[0]) for r in ran):
        console.print(_collectives_table(
            f"{entry.name}(): collectives in compiled modules (the same on every process)", ran[0]))
        return
    for result in ran:
        console.print(_collectives_table(
            f"{entry.name}() on process {result.process}: collectives in compiled modules", result))


def render(report: VerifyReport, console: Console) -> None:
    console.print(_sides_table(report))
    for where, failure in report.failures():
        body = escape(failure.message)
        evidence = failure.traceback or failure.stderr
        if evidence:
            body += "\n\n" + escape(evidence.rstrip())
        console.print(Panel(body, title=f"{where}: {failure.kind}", border_style="red", title_align="left"))
    for entry in report.entries:
        _render_entry(entry, console, report)
        if report.timing:
            _render_timing(entry, report, console)
    if report.compare_seconds is not None:
        console.print(f"compare (outputs and HLO, both sides): {_seconds(report.compare_seconds)}")
    if report.timing:
        flagged: dict[str, list[str]] = {}
        for entry in report.entries:
            for flag in entry.timing.flags() if entry.timing else []:
                flagged.setdefault(flag.kind, []).append(f"{entry.name}()")
        summary = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in flagged.items())
        console.print(f"timing: [yellow]{escape(summary)}[/]" if summary else "timing: nothing flagged")
    summary = {0: "[green]all entries equal[/]", 1: "[red]outputs differ[/]", 2: "[red]a side failed to run[/]"}
    console.print(f"exit {report.exit_code}: {summary[report.exit_code]}")


def render_text(report: VerifyReport, width: int = 120) -> str:
    """The report as plain text (for pytest failure messages and logs)."""
    buffer = io.StringIO()
    render(report, Console(file=buffer, width=width, no_color=True, color_system=None, highlight=False))
    return buffer.getvalue()
