"""The verification report: dataclasses, their JSON form, and the rich rendering."""

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

JSON_VERSION = 1
EXIT_EQUAL, EXIT_DIFFERENT, EXIT_FAILED = 0, 1, 2


@dataclass
class Failure:
    """Why a side (or one entry on it) produced no output: one paragraph, plus evidence."""

    kind: str  # raised | timeout | crashed | no-jax | missing-entry | missing-inputs | inputs-raised
    #            | import-error | cannot-start | worker-error
    message: str
    traceback: str = ""
    stderr: str = ""

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message, "traceback": self.traceback, "stderr": self.stderr}


@dataclass
class SideReport:
    label: str  # "old" | "new"
    program: str
    python: str
    jax_version: str | None = None
    numpy_version: str | None = None
    device_count: int | None = None
    threefry_partitionable: bool | None = None  # None: not available in this JAX, or never reached
    seconds: float | None = None  # the worker's wall time, interpreter start to exit
    returncode: int | None = None
    failure: Failure | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "program": self.program, "python": self.python, "jax_version": self.jax_version,
            "numpy_version": self.numpy_version, "device_count": self.device_count,
            "threefry_partitionable": self.threefry_partitionable, "seconds": self.seconds,
            "returncode": self.returncode, "failure": self.failure.to_json() if self.failure else None,
        }


@dataclass
class OutputLeaf:
    path: str
    shape: tuple[int, ...] | None
    dtype: str
    sharding: str | None


@dataclass
class EntrySide:
    """One entry as one side ran it."""

    status: str = "not-run"  # ok | failed | not-run
    seconds: float | None = None  # call + block_until_ready, compilation included
    collectives: CollectiveSummary = field(default_factory=CollectiveSummary)
    outputs: list[OutputLeaf] = field(default_factory=list)
    failure: Failure | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status, "seconds": self.seconds,
            "failure": self.failure.to_json() if self.failure else None,
            "collectives": self.collectives.to_json(),
            "outputs": [
                {"path": o.path, "shape": list(o.shape) if o.shape is not None else None,
                 "dtype": o.dtype, "sharding": o.sharding}
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


@dataclass
class EntryReport:
    name: str
    old: EntrySide
    new: EntrySide
    comparison: Comparison | None = None  # None when either side failed

    @property
    def status(self) -> str:
        if self.comparison is None:
            return "failed"
        return "equal" if self.comparison.equal else "different"

    def to_json(self) -> dict[str, Any]:
        cmp = self.comparison
        return {
            "name": self.name, "status": self.status,
            "problems": list(cmp.problems) if cmp else [],
            "leaves": [_leaf_json(d) for d in cmp.leaves] if cmp else [],
            "old": self.old.to_json(), "new": self.new.to_json(),
        }


@dataclass
class VerifyReport:
    old: SideReport
    new: SideReport
    entries: list[EntryReport]
    devices: int
    settings: dict[str, Any] = field(default_factory=dict)

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
        """(where, failure) for every side- and entry-level failure."""
        found = [(s.label, s.failure) for s in (self.old, self.new) if s.failure]
        for e in self.entries:
            found += [(f"{label} {e.name}()", side.failure)
                      for label, side in (("old", e.old), ("new", e.new)) if side.failure]
        return found

    def to_json(self) -> dict[str, Any]:
        return _strict({
            "version": JSON_VERSION, "exit_code": self.exit_code, "devices": self.devices,
            "settings": dict(self.settings),
            "sides": {"old": self.old.to_json(), "new": self.new.to_json()},
            "entries": [e.to_json() for e in self.entries],
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


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _sides_table(report: VerifyReport) -> Table:
    table = Table(title=f"jaxmigrate verify on {report.devices} CPU devices", title_justify="left")
    table.add_column("")
    table.add_column("old")
    table.add_column("new")
    rows = [
        ("program", lambda s: s.program), ("python", lambda s: s.python),
        ("JAX", lambda s: s.jax_version or "-"),
        ("devices", lambda s: "-" if s.device_count is None else str(s.device_count)),
        ("threefry_partitionable",
         lambda s: "n/a" if s.threefry_partitionable is None else str(s.threefry_partitionable).lower()),
        ("worker wall time", lambda s: _seconds(s.seconds)),
    ]
    for name, get in rows:
        table.add_row(name, escape(get(report.old)), escape(get(report.new)))
    return table


def _collectives_table(entry: EntryReport) -> Table | None:
    old, new = entry.old.collectives, entry.new.collectives
    kinds = [k for k in KINDS if old.count(k) or new.count(k)]
    kinds += sorted((set(old.totals) | set(new.totals)) - set(KINDS))
    table = Table(title=f"{entry.name}(): collectives in compiled modules", title_justify="left")
    for col in ("kind", "old count", "old bytes", "new count", "new bytes"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    for kind in kinds:
        style = "" if old.count(kind) == new.count(kind) else "yellow"
        table.add_row(kind, str(old.count(kind)), _bytes(old.bytes_of(kind)),
                      str(new.count(kind)), _bytes(new.bytes_of(kind)), style=style)
    if not kinds:
        table.add_row("(none)", "0", "-", "0", "-")
    table.caption = (f"modules compiled: old {len(old.modules)}, new {len(new.modules)}; "
                     f"entry time: old {_seconds(entry.old.seconds)}, new {_seconds(entry.new.seconds)}")
    return table


def _worst_lines(comparison: Comparison) -> list[str]:
    """The worst leaves as lines, not a table: a leaf path must stay whole in a narrow terminal."""
    lines = []
    for d in comparison.worst():
        old = f"{d.old_dtype}{list(d.old_shape or [])}"
        new = f"{d.new_dtype}{list(d.new_shape or [])}"
        errors = "" if d.max_abs is None else (
            f", max abs err {d.max_abs:.3g}, max rel err {d.max_rel:.3g} (rtol {d.rtol:g}, atol {d.atol:g})")
        lines.append(f"  [red]x[/] [bold]{escape(d.path)}[/]: {escape(d.reason)}; old {old}, new {new}{errors}")
    return lines


def render(report: VerifyReport, console: Console) -> None:
    console.print(_sides_table(report))
    for where, failure in report.failures():
        body = escape(failure.message)
        evidence = failure.traceback or failure.stderr
        if evidence:
            body += "\n\n" + escape(evidence.rstrip())
        console.print(Panel(body, title=f"{where}: {failure.kind}", border_style="red", title_align="left"))
    for entry in report.entries:
        colour = {"equal": "green", "different": "red", "failed": "red"}[entry.status]
        line = f"[bold]{escape(entry.name)}()[/]: [{colour}]{entry.status}[/]"
        cmp = entry.comparison
        if cmp is not None:
            line += f" ({sum(d.equal for d in cmp.leaves)}/{len(cmp.leaves)} leaves equal)"
        console.print(line)
        if cmp is not None:
            for problem in cmp.problems:
                console.print(f"  [red]structure:[/] {escape(problem)}")
            for line in _worst_lines(cmp):
                console.print(line)
        table = _collectives_table(entry)
        if table is not None and entry.status != "failed":
            console.print(table)
    summary = {0: "[green]all entries equal[/]", 1: "[red]outputs differ[/]", 2: "[red]a side failed to run[/]"}
    console.print(f"exit {report.exit_code}: {summary[report.exit_code]}")


def render_text(report: VerifyReport, width: int = 120) -> str:
    """The report as plain text (for pytest failure messages and logs)."""
    buffer = io.StringIO()
    render(report, Console(file=buffer, width=width, no_color=True, color_system=None, highlight=False))
    return buffer.getvalue()
