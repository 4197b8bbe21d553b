"""Run the old and the new program in worker subprocesses and build the report.

``launch`` starts and watches the workers (one per side, or N per side with ``processes``); this
module turns what they left behind - result.json, outputs, HLO dumps, stderr - into the report.
With several processes every process's outputs and collectives are compared, process i of the
old side against process i of the new side.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import hlo
from .compare import Leaf, Outputs, compare_outputs
from .launch import LOOPBACK, PEER_GRACE_SECONDS, Process, Side, Turns, free_ports, kill_all, start, wait_all
from .report import (
    EntryReport,
    EntrySide,
    Failure,
    OutputLeaf,
    ProcessEntry,
    ProcessSide,
    SideReport,
    VerifyReport,
)
from .timing import SideTiming, phases

THREEFRY_CHOICES = ("true", "false", "as-is")
CONNECT_CHOICES = ("before-import", "after-import")
_WORKER_EXIT_NO_JAX = 4
_STDERR_TAIL_LINES = 25


class VerifyUsageError(ValueError):
    """Bad arguments (a program file that does not exist, a malformed --inputs)."""


@dataclass(frozen=True)
class InputsSpec:
    file: Path
    function: str

    @classmethod
    def parse(cls, text: str, default_file: Path | None = None) -> InputsSpec:
        """``file.py:function`` (or ``function`` alone, looked up in ``default_file``)."""
        file_part, sep, function = text.rpartition(":")
        if not sep:
            if default_file is None:
                raise VerifyUsageError(f"--inputs {text!r}: expected FILE.py:FUNCTION")
            file_part, function = str(default_file), text
        if not function.isidentifier():
            raise VerifyUsageError(f"--inputs {text!r}: {function!r} is not a function name")
        return cls(Path(file_part).resolve(), function)



def _where(result: dict[str, Any]) -> str:
    running = result.get("running")
    if running:
        return f"while running entry {running!r}"
    phase = result.get("phase")
    return {"import": "while importing the program", "backend": "while starting JAX",
            "connect": "while joining the other processes (jax.distributed.initialize)",
            "done": "after finishing its entries"}.get(
        phase, "before reporting any progress" if not result else f"in phase {phase!r}")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _why(process: Process) -> str:
    """What went wrong on a process, in a few words (for its peers' messages)."""
    failure = process.result.get("failure")
    if failure:
        return failure["message"]
    entry = process.result.get("entries", {}).get(process.result.get("stopped_at") or "", {})
    if entry.get("failure"):
        return entry["failure"]["message"]
    code = process.returncode
    if process.timed_out:
        return "it did not finish in time"
    if code is not None and code < 0:
        return f"it was killed by {_signal_name(code)}"
    return f"it exited with code {code}"


def _process_failure(side: Side, process: Process, timeout: float) -> Failure | None:
    failure = _describe_failure(side, process, timeout)
    if failure is not None and len(side.processes) > 1:
        failure.process = process.index
    return failure


def _describe_failure(side: Side, process: Process, timeout: float) -> Failure | None:
    """A failure of a whole worker process (not of one entry), as one paragraph."""
    many = len(side.processes) > 1
    who = f"The {side.label} side ({side.program.name}, {side.python})"
    result, code = process.result, process.returncode
    stderr = process.stderr_tail(_STDERR_TAIL_LINES)
    # With several processes, one that finished its entries may still be waiting in JAX's exit
    # barrier for a peer that failed or hangs: its outputs are complete, the peer is the story.
    finished = many and result.get("phase") in ("done", "stopped")
    if process.start_error:
        return Failure("cannot-start", f"{who} could not start: {process.start_error}. Check the interpreter path.")
    if finished:
        return None
    failure = result.get("failure")
    if code == _WORKER_EXIT_NO_JAX or (failure and failure.get("kind") == "no-jax"):
        detail = failure["message"] if failure else "jax could not be imported"
        return Failure("no-jax", f"{who} cannot import jax ({detail}). Install it into that interpreter "
                       f"(`{side.python} -m pip install 'jax[cpu]'`) or choose another with "
                       f"--{side.label}-python.", stderr=stderr)
    if failure:  # its own, reported before it ended (or before it was killed, waiting on its peers)
        return Failure(failure["kind"], f"{who}: {failure['message']}.", traceback=failure.get("traceback", ""),
                       stderr=stderr if not failure.get("traceback") else "")
    if process.timed_out:
        hint = " (or was waiting for another process in a collective)" if many else ""
        return Failure("timeout", f"{who} did not finish within {timeout:g} s {_where(result)}{hint}; its "
                       "process group was killed. If the program is only slow, raise --timeout.", stderr=stderr)
    if process.stopped_after is not None:
        first = side.processes[process.stopped_after]
        return Failure("stopped", f"{who} was killed {PEER_GRACE_SECONDS:g} s after process {first.index} "
                       f"failed ({_why(first)}), {_where(result)}: it may have been waiting for that process "
                       "in a collective or in jax.distributed.initialize.", stderr=stderr)
    if code is not None and code < 0:
        return Failure("crashed", f"{who} was killed by {_signal_name(code)} {_where(result)}. The stderr "
                       "tail below shows where (Python's faulthandler is on).", stderr=stderr)
    if result.get("phase") != "done":
        return Failure("worker-error", f"{who} exited with code {code} {_where(result)} without a result.",
                       stderr=stderr)
    return None


def _load_outputs(process: Process, record: dict[str, Any]) -> Outputs:
    import numpy as np

    meta = record["outputs"]
    with np.load(process.out_dir / f"{record['index']}.npz", allow_pickle=False) as npz:
        leaves = [
            Leaf(path=m["path"], dtype=m["dtype"], shape=tuple(m["shape"]) if m["shape"] is not None else None,
                 value=npz[m["key"]] if m["key"] else None, note=m.get("note", ""), sharding=m.get("sharding"))
            for m in meta["leaves"]
        ]
    return Outputs(treedef=meta["treedef"], leaves=leaves)


def _entry_side(process: Process, entry: str, who: str, many: bool) -> tuple[EntrySide, Outputs | None]:
    record = process.result.get("entries", {}).get(entry)
    if record is None:
        return EntrySide(), None
    if record.get("status") != "ok":
        raw = record.get("failure")
        failure = Failure(raw["kind"], f"{who}: {raw['message'].rstrip('.')}.", traceback=raw.get("traceback", ""),
                          process=process.index if many else None) if raw else None
        return EntrySide(status="failed", failure=failure), None
    collectives = hlo.summarize_modules(
        (name, (process.dump_dir / name).read_text(errors="replace")) for name in record["modules"])
    outputs = _load_outputs(process, record)
    listing = [OutputLeaf(leaf.path, leaf.shape, leaf.dtype, leaf.sharding, leaf.note) for leaf in outputs.leaves]
    timing = SideTiming.from_record(record, collectives, process.result.get("peak_rss"))
    return EntrySide("ok", record.get("seconds"), collectives, listing, timing=timing), outputs


def _compile_seconds(process: Process) -> float:
    records = process.result.get("entries", {}).values()
    return sum(SideTiming.from_record(r, hlo.CollectiveSummary(), None).compile_seconds for r in records)


def _side_report(side: Side, timeout: float) -> SideReport:
    processes = [
        ProcessSide(p.index, p.seconds, p.returncode, p.result.get("local_device_count"),
                    _process_failure(side, p, timeout),
                    phases(p.result, p.spawned_at, _compile_seconds(p), p.seconds), p.result.get("peak_rss"))
        for p in side.processes
    ]
    # The side's failure is the first process's to fail: the others' often follow from it (a peer
    # gone from a collective). A peer killed for it comes last.
    def order(p: ProcessSide) -> tuple[bool, float, int]:
        process = side.processes[p.index]
        return p.failure.kind == "stopped", process.failed_at or process.ended_at or 0.0, p.index

    ended = sorted((p for p in processes if p.failure), key=order)
    first = next((p for p in side.processes if p.result), side.processes[0])
    r = first.result
    return SideReport(
        label=side.label, program=str(side.program), python=side.python, jax_version=r.get("jax_version"),
        numpy_version=r.get("numpy_version"), device_count=r.get("device_count"),
        threefry_partitionable=r.get("threefry_partitionable"), seconds=side.seconds,
        returncode=side.processes[0].returncode if len(processes) == 1 else None,
        failure=ended[0].failure if ended else None, processes=processes,
    )


def _entry_report(name: str, old: Side, new: Side, rtol: float | None, atol: float | None,
                  unreplicate: str | None, same_jax: bool) -> EntryReport:
    many = len(old.processes) > 1
    results = []
    for old_process, new_process in zip(old.processes, new.processes):
        old_entry, old_out = _entry_side(old_process, name, f"The old side's {name}()", many)
        new_entry, new_out = _entry_side(new_process, name, f"The new side's {name}()", many)
        comparison = None
        if old_out is not None and new_out is not None:
            comparison = compare_outputs(old_out, new_out, rtol=rtol, atol=atol,
                                         unreplicate=unreplicate, same_jax=same_jax)
        results.append(ProcessEntry(old_process.index, old_entry, new_entry, comparison))
    return EntryReport(name, results)


def verify(
    old: str | os.PathLike[str],
    new: str | os.PathLike[str],
    entries: Sequence[str],
    *,
    devices: int = 8,
    processes: int = 1,
    inputs: str | InputsSpec | None = None,
    old_python: str | os.PathLike[str] | None = None,
    new_python: str | os.PathLike[str] | None = None,
    timeout: float = 300.0,
    unreplicate: str | None = None,
    threefry_partitionable: str = "true",
    rtol: float | None = None,
    atol: float | None = None,
    old_home: str | os.PathLike[str] | None = None,
    connect: str = "before-import",
    timing: bool = False,
    warmup: int = 2,
    repeat: int = 10,
) -> VerifyReport:
    """Run ``entries`` of both programs on ``devices`` forced CPU devices and compare them.

    With ``processes`` N > 1, each side runs as N JAX processes of ``devices`` CPU devices each,
    joined by ``jax.distributed`` on 127.0.0.1 with gloo CPU collectives; every process's outputs
    (the part of each array on its own devices) and collectives are compared, old against new.

    ``old_home`` is the folder the old program belongs to when it is a copy from elsewhere (a git
    revision): its worker runs there and imports the program's neighbours from there.
    ``connect`` says when the processes join: "before-import" (the harness joins them, then imports
    the program) or "after-import" (as a launcher does: the program is imported first, and joins
    when it calls ``jax.distributed.initialize()`` itself, else right after its import; a program
    that starts JAX's backend at import then fails).

    With ``timing``, each entry is then called ``warmup`` + ``repeat`` more times per side (fresh
    arguments each time, every call synchronised) and the report compares compilations, step
    times, memory and collective bytes (see ``timing``); the sides take turns for these calls
    unless the machine has a core for every device of both.

    Raises VerifyUsageError for bad arguments; everything that goes wrong while running
    (user code raising, hangs, crashes, no jax) is reported in the result instead.
    """
    old_path, new_path = Path(old).resolve(), Path(new).resolve()
    for label, path in (("old", old_path), ("new", new_path)):
        if not path.is_file():
            raise VerifyUsageError(f"{label} program {path} does not exist")
    if not entries:
        raise VerifyUsageError("give at least one entry (--entry NAME)")
    if unreplicate not in (None, "old", "new"):
        raise VerifyUsageError(f"unreplicate must be 'old' or 'new', not {unreplicate!r}")
    if threefry_partitionable not in THREEFRY_CHOICES:
        raise VerifyUsageError(f"threefry_partitionable must be one of {THREEFRY_CHOICES}")
    if devices < 1:
        raise VerifyUsageError("devices must be at least 1")
    if connect not in CONNECT_CHOICES:
        raise VerifyUsageError(f"connect must be one of {CONNECT_CHOICES}")
    if processes < 1:
        raise VerifyUsageError("processes must be at least 1")
    if warmup < 0 or repeat < 1:
        raise VerifyUsageError("timing needs warmup >= 0 and repeat >= 1")
    spec = InputsSpec.parse(inputs) if isinstance(inputs, str) else inputs
    if spec is not None and not spec.file.is_file():
        raise VerifyUsageError(f"inputs file {spec.file} does not exist")

    request = {
        "entries": list(dict.fromkeys(entries)), "devices": devices,
        "threefry_partitionable": threefry_partitionable, "connect": connect,
        "inputs": {"file": str(spec.file), "function": spec.function} if spec else None,
        "timing": {"warmup": warmup, "repeat": repeat} if timing else None,
    }
    turns, timing_settings = None, None
    if timing:
        cores = _usable_cores()
        together = cores >= 2 * processes * devices
        turns = Turns(together)
        timing_settings = {"warmup": warmup, "repeat": repeat, "cores": cores,
                           "sides": "timed at once" if together else "timed one after the other"}
    with tempfile.TemporaryDirectory(prefix="jaxmigrate-verify-") as tmp:
        sides = [
            Side("old", old_path, str(old_python or sys.executable), Path(tmp) / "old",
                 home=Path(old_home).resolve() if old_home else None),
            Side("new", new_path, str(new_python or sys.executable), Path(tmp) / "new"),
        ]
        if processes > 1:  # one coordinator per side, on a port of its own
            for side, port in zip(sides, free_ports(len(sides))):
                side.coordinator = f"{LOOPBACK}:{port}"
        try:
            for side in sides:
                start(side, request, devices, processes, timeout)
            wait_all(sides, timeout, turns)
        finally:  # e.g. KeyboardInterrupt while waiting: leave no workers behind
            kill_all(sides)
        old_side, new_side = sides
        old_report, new_report = _side_report(old_side, timeout), _side_report(new_side, timeout)
        same_jax = old_report.jax_version == new_report.jax_version
        compare_started = time.monotonic()
        entry_reports = [_entry_report(name, old_side, new_side, rtol, atol, unreplicate, same_jax)
                         for name in request["entries"]]
        compare_seconds = time.monotonic() - compare_started
    settings = {
        "entries": request["entries"], "inputs": f"{spec.file}:{spec.function}" if spec else None,
        "timeout": timeout, "unreplicate": unreplicate, "threefry_partitionable": threefry_partitionable,
        "rtol": rtol, "atol": atol, "connect": connect, "timing": timing,
    }
    return VerifyReport(old_report, new_report, entry_reports, devices, settings, processes=processes,
                        timing=timing_settings, compare_seconds=compare_seconds)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
