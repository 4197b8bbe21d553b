"""Run the old and the new program in worker subprocesses and build the report.

Both workers start at once (each is mostly waiting on XLA) and each gets its own deadline.
Every worker is the leader of a new session, so on timeout - and after a normal exit, to catch
background children the user program left behind - its whole process group is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hlo
from .compare import Leaf, Outputs, compare_outputs
from .report import EntryReport, EntrySide, Failure, OutputLeaf, SideReport, VerifyReport

WORKER = Path(__file__).with_name("worker.py")
THREEFRY_CHOICES = ("true", "false", "as-is")
_WORKER_EXIT_NO_JAX = 4
_STDERR_TAIL_LINES = 25
_POLL_SECONDS = 0.02

# Flags the harness owns; a user's own XLA_FLAGS are kept, minus these.
_OWNED_XLA_FLAGS = ("--xla_force_host_platform_device_count", "--xla_dump_to", "--xla_dump_hlo_as_text")


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


@dataclass
class _Side:
    """One worker's lifecycle: request, process, raw result."""

    label: str
    program: Path
    python: str
    root: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float | None = None
    timed_out: bool = False
    start_error: str = ""
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @property
    def dump_dir(self) -> Path:
        return self.root / "dump"


def worker_env(devices: int, dump_dir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a worker starts with: forced CPU devices and an HLO dump dir."""
    env = dict(os.environ if base is None else base)
    kept = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(_OWNED_XLA_FLAGS)]
    env["XLA_FLAGS"] = " ".join(
        [*kept, f"--xla_force_host_platform_device_count={devices}",
         f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"])
    env["JAX_PLATFORMS"] = "cpu"
    # A persistent-cache hit skips XLA compilation, and with it the HLO dump we count from.
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    # On a fatal signal, Python prints where it was: the stderr tail we show for a crash.
    env["PYTHONFAULTHANDLER"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start(side: _Side, request: dict[str, Any], devices: int) -> None:
    side.out_dir.mkdir(parents=True)
    side.dump_dir.mkdir()
    request_path = side.root / "request.json"
    request_path.write_text(json.dumps({**request, "program": str(side.program),
                                        "out_dir": str(side.out_dir), "dump_dir": str(side.dump_dir)}))
    side.started = time.monotonic()
    try:
        with (side.root / "stdout.txt").open("wb") as out, (side.root / "stderr.txt").open("wb") as err:
            side.proc = subprocess.Popen(
                [side.python, str(WORKER), str(request_path)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=worker_env(devices, side.dump_dir),
                start_new_session=True,  # its own process group, so killpg reaches its children too
            )
    except OSError as exc:
        side.start_error = f"{type(exc).__name__}: {exc}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_all(sides: list[_Side], timeout: float) -> None:
    """Poll every worker until it exits or passes its deadline (polling, not wait(), so each
    side's wall time is its own even though both run at once)."""
    pending = [s for s in sides if s.proc is not None]
    while pending:
        now = time.monotonic()
        for side in list(pending):
            assert side.proc is not None
            if side.proc.poll() is None and now < side.started + timeout:
                continue
            if side.proc.returncode is None:
                side.timed_out = True
            _kill_group(side.proc)
            side.proc.wait()
            side.seconds = time.monotonic() - side.started
            _read_result(side)
            pending.remove(side)
        if pending:
            time.sleep(_POLL_SECONDS)


def _read_result(side: _Side) -> None:
    result_path = side.out_dir / "result.json"
    if result_path.is_file():
        try:
            side.result = json.loads(result_path.read_text())
        except json.JSONDecodeError:  # written via os.replace, so only a broken worker gets here
            side.result = {}


def _stderr_tail(side: _Side) -> str:
    path = side.root / "stderr.txt"
    if not path.is_file():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-_STDERR_TAIL_LINES:])


def _where(result: dict[str, Any]) -> str:
    running = result.get("running")
    if running:
        return f"while running entry {running!r}"
    phase = result.get("phase")
    return {"import": "while importing the program", "backend": "while starting JAX"}.get(
        phase, "before reporting any progress" if not result else f"in phase {phase!r}")


def _side_failure(side: _Side, timeout: float) -> Failure | None:
    """A failure of the whole worker (not of one entry), as one paragraph."""
    who = f"The {side.label} side ({side.program.name}, {side.python})"
    stderr = _stderr_tail(side)
    if side.start_error:
        return Failure("cannot-start", f"{who} could not start: {side.start_error}. Check the interpreter path.")
    if side.timed_out:
        return Failure("timeout", f"{who} did not finish within {timeout:g} s {_where(side.result)}; its process "
                       "group was killed. If the program is only slow, raise --timeout.", stderr=stderr)
    code = side.proc.returncode if side.proc else None
    failure = side.result.get("failure")
    if code == _WORKER_EXIT_NO_JAX or (failure and failure.get("kind") == "no-jax"):
        detail = failure["message"] if failure else "jax could not be imported"
        return Failure("no-jax", f"{who} cannot import jax ({detail}). Install it into that interpreter "
                       f"(`{side.python} -m pip install 'jax[cpu]'`) or choose another with "
                       f"--{side.label}-python.", stderr=stderr)
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return Failure("crashed", f"{who} was killed by {name} {_where(side.result)}. The stderr tail "
                       "below shows where (Python's faulthandler is on).", stderr=stderr)
    if failure:
        return Failure(failure["kind"], f"{who}: {failure['message']}.", traceback=failure.get("traceback", ""),
                       stderr=stderr if not failure.get("traceback") else "")
    if side.result.get("phase") != "done":
        return Failure("worker-error", f"{who} exited with code {code} {_where(side.result)} without a result.",
                       stderr=stderr)
    return None


def _load_outputs(side: _Side, record: dict[str, Any]) -> Outputs:
    import numpy as np

    meta = record["outputs"]
    with np.load(side.out_dir / f"{record['index']}.npz", allow_pickle=False) as npz:
        leaves = [
            Leaf(path=m["path"], dtype=m["dtype"], shape=tuple(m["shape"]) if m["shape"] is not None else None,
                 value=npz[m["key"]] if m["key"] else None, note=m.get("note", ""), sharding=m.get("sharding"))
            for m in meta["leaves"]
        ]
    return Outputs(treedef=meta["treedef"], leaves=leaves)


def _entry_side(side: _Side, entry: str, who: str) -> tuple[EntrySide, Outputs | None]:
    record = side.result.get("entries", {}).get(entry)
    if record is None:
        return EntrySide(), None
    if record.get("status") != "ok":
        raw = record.get("failure")
        failure = Failure(raw["kind"], f"{who}: {raw['message']}.", traceback=raw.get("traceback", "")) if raw else None
        return EntrySide(status="failed", failure=failure), None
    collectives = hlo.summarize_modules(
        (name, (side.dump_dir / name).read_text(errors="replace")) for name in record["modules"])
    outputs = _load_outputs(side, record)
    listing = [OutputLeaf(leaf.path, leaf.shape, leaf.dtype, leaf.sharding) for leaf in outputs.leaves]
    return EntrySide("ok", record.get("seconds"), collectives, listing), outputs


def _side_report(side: _Side, timeout: float) -> SideReport:
    r = side.result
    return SideReport(
        label=side.label, program=str(side.program), python=side.python, jax_version=r.get("jax_version"),
        numpy_version=r.get("numpy_version"), device_count=r.get("device_count"),
        threefry_partitionable=r.get("threefry_partitionable"), seconds=side.seconds,
        returncode=side.proc.returncode if side.proc else None, failure=_side_failure(side, timeout),
    )


def verify(
    old: str | os.PathLike[str],
    new: str | os.PathLike[str],
    entries: Sequence[str],
    *,
    devices: int = 8,
    inputs: str | InputsSpec | None = None,
    old_python: str | os.PathLike[str] | None = None,
    new_python: str | os.PathLike[str] | None = None,
    timeout: float = 300.0,
    unreplicate: str | None = None,
    threefry_partitionable: str = "true",
    rtol: float | None = None,
    atol: float | None = None,
) -> VerifyReport:
    """Run ``entries`` of both programs on ``devices`` forced CPU devices and compare them.

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
    spec = InputsSpec.parse(inputs) if isinstance(inputs, str) else inputs
    if spec is not None and not spec.file.is_file():
        raise VerifyUsageError(f"inputs file {spec.file} does not exist")

    request = {
        "entries": list(dict.fromkeys(entries)), "devices": devices,
        "threefry_partitionable": threefry_partitionable,
        "inputs": {"file": str(spec.file), "function": spec.function} if spec else None,
    }
    with tempfile.TemporaryDirectory(prefix="jaxmigrate-verify-") as tmp:
        sides = [
            _Side("old", old_path, str(old_python or sys.executable), Path(tmp) / "old"),
            _Side("new", new_path, str(new_python or sys.executable), Path(tmp) / "new"),
        ]
        try:
            for side in sides:
                _start(side, request, devices)
            _wait_all(sides, timeout)
        finally:  # e.g. KeyboardInterrupt while waiting: leave no workers behind
            for side in sides:
                if side.proc is not None:
                    _kill_group(side.proc)
                    side.proc.wait()
        old_side, new_side = sides
        old_report, new_report = _side_report(old_side, timeout), _side_report(new_side, timeout)
        same_jax = old_report.jax_version == new_report.jax_version
        entry_reports = []
        for name in request["entries"]:
            old_entry, old_out = _entry_side(old_side, name, f"The old side's {name}()")
            new_entry, new_out = _entry_side(new_side, name, f"The new side's {name}()")
            comparison = None
            if old_out is not None and new_out is not None:
                comparison = compare_outputs(old_out, new_out, rtol=rtol, atol=atol,
                                             unreplicate=unreplicate, same_jax=same_jax)
            entry_reports.append(EntryReport(name, old_entry, new_entry, comparison))
    settings = {
        "entries": request["entries"], "inputs": f"{spec.file}:{spec.function}" if spec else None,
        "timeout": timeout, "unreplicate": unreplicate, "threefry_partitionable": threefry_partitionable,
        "rtol": rtol, "atol": atol,
    }
    return VerifyReport(old_report, new_report, entry_reports, devices, settings)
