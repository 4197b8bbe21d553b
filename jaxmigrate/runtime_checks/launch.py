"""Start each side's worker processes, watch them, and leave nothing behind.

A side is one worker process, or N of them with ``--processes N`` (one JAX process each, joined
through a coordinator on 127.0.0.1). Both sides start at once (each is mostly waiting on XLA) and
each side has its own deadline. Every worker leads a new session, so killing its process group
reaches whatever the user program started too; groups are killed on timeout and after a normal
exit (to catch background children left behind).

When one process of a multi-process side fails (it exits non-zero, or says so in its result.json:
process 0 hosts the coordinator and stays up until the others are done), its peers get
``PEER_GRACE_SECONDS`` to finish or fail on their own - in the bugs this exists for every process fails, each with its own error
(an AssertionError on one, "Fetching value for jax.Array that spans non-addressable devices" on
the other) - and are then killed: they may be blocked in a collective, or in
``jax.distributed.initialize``, waiting for the process that died.

With ``--timing`` the sides still start, import and compile at once, but their timed calls must
not share the cores: each side's workers wait (``phase: await-timing``) until every side has
reached that point or ended, and then measure one side after the other (old first) - or both at
once where the machine has a core for every device of both sides. Time spent waiting for the
turn does not count against a side's deadline.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("worker.py")
PEER_GRACE_SECONDS = 10.0
_POLL_SECONDS = 0.02
_PEEK_SECONDS = 0.25  # how often running workers' result.json files are read for a failure
LOOPBACK = "127.0.0.1"  # the coordinator listens here and nowhere else

# Flags the harness owns; a user's own XLA_FLAGS are kept, minus these.
_OWNED_XLA_FLAGS = ("--xla_force_host_platform_device_count", "--xla_dump_to", "--xla_dump_hlo_as_text")
# A coordinator the user's environment names must not be joined instead of the harness's own.
_OWNED_JAX_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_COORDINATOR_BIND_ADDRESS", "JAX_NUM_PROCESSES",
                   "JAX_PROCESS_ID", "JAX_LOCAL_DEVICE_IDS")
_PROXY_VARS = ("http_proxy", "https_proxy", "grpc_proxy", "all_proxy")


@dataclass
class Process:
    """One worker process: where it writes, how it ended."""

    index: int
    root: Path
    proc: subprocess.Popen[bytes] | None = None
    seconds: float | None = None
    spawned_at: float | None = None  # wall clock (time.time()), comparable with the worker's stamps
    ended_at: float | None = None
    failed_at: float | None = None  # when the parent saw it fail (its exit, or its result.json)
    timed_out: bool = False
    stopped_after: int | None = None  # killed by us because this process (index) failed first
    start_error: str = ""
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @property
    def dump_dir(self) -> Path:
        return self.root / "dump"

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc else None

    @property
    def turn_file(self) -> Path:
        return self.root / "turn"

    @property
    def failed(self) -> bool:
        return bool(self.start_error) or self.timed_out or (self.returncode not in (None, 0))

    def stderr_tail(self, lines: int) -> str:
        path = self.root / "stderr.txt"
        if not path.is_file():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Side:
    """The old or the new program, run as one or several processes."""

    label: str
    program: Path
    python: str
    root: Path
    processes: list[Process] = field(default_factory=list)
    started: float = 0.0
    coordinator: str | None = None
    # The folder the program belongs to, when it was taken from a git revision into a temporary
    # one: the worker runs there and imports its neighbours from there.
    home: Path | None = None
    first_failure: Process | None = None
    grace_until: float | None = None
    paused: float = 0.0  # seconds spent waiting for the timing turn (added to the deadline)
    waiting_since: float | None = None
    measuring: bool = False

    @property
    def seconds(self) -> float | None:
        times = [p.seconds for p in self.processes if p.seconds is not None]
        return max(times) if times else None

    def deadline(self, timeout: float, now: float) -> float:
        waiting = now - self.waiting_since if self.waiting_since is not None else 0.0
        return self.started + timeout + self.paused + waiting


def worker_env(devices: int, dump_dir: Path, base: dict[str, str] | None = None,
               multi_process: bool = False) -> dict[str, str]:
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
    if multi_process:
        for name in _OWNED_JAX_VARS:
            env.pop(name, None)
        # gRPC honours http(s)_proxy: the coordinator on the loopback must be reached directly.
        # (Only when a proxy is set: JAX warns about any *_proxy variable, no_proxy included.)
        if any(name.lower() in _PROXY_VARS for name in env):
            for name in ("no_proxy", "NO_PROXY"):
                env[name] = ",".join(p for p in (env.get(name, ""), LOOPBACK) if p)
    return env


def free_ports(count: int) -> list[int]:
    """Ports free on the loopback now (the OS picks them: bind to port 0), distinct from each other."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def start(side: Side, request: dict[str, Any], devices: int, processes: int, timeout: float) -> None:
    """Start the side's workers (all at once: process 0 hosts the coordinator the others wait for)."""
    side.started = time.monotonic()
    multi = processes > 1
    for index in range(processes):
        process = Process(index, side.root / f"process{index}" if multi else side.root)
        side.processes.append(process)
        process.out_dir.mkdir(parents=True)
        process.dump_dir.mkdir()
        own = {**request, "program": str(side.program), "out_dir": str(process.out_dir),
               "dump_dir": str(process.dump_dir), "home": str(side.home) if side.home else None}
        if multi:
            own.update(processes=processes, process_id=index, coordinator=side.coordinator,
                       init_timeout=max(1, math.ceil(timeout)))
        if request.get("timing"):
            own["turn_file"] = str(process.turn_file)
        request_path = process.root / "request.json"
        request_path.write_text(json.dumps(own))
        process.spawned_at = time.time()
        try:
            with (process.root / "stdout.txt").open("wb") as out, (process.root / "stderr.txt").open("wb") as err:
                process.proc = subprocess.Popen(
                    [side.python, str(WORKER), str(request_path)], stdin=subprocess.DEVNULL, stdout=out,
                    stderr=err, env=worker_env(devices, process.dump_dir, multi_process=multi),
                    start_new_session=True,  # its own process group, so killpg reaches its children too
                )
        except OSError as exc:
            process.start_error = f"{type(exc).__name__}: {exc}"
            process.seconds = 0.0
            _note_failure(side, process, time.monotonic())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all(sides: Sequence[Side]) -> None:
    """Kill every worker's process group and reap the workers (idempotent)."""
    for side in sides:
        for process in side.processes:
            if process.proc is not None:
                _kill_group(process.proc)
                process.proc.wait()


def _note_failure(side: Side, process: Process, now: float) -> None:
    if process.failed_at is None:
        process.failed_at = now
    if side.first_failure is None:
        side.first_failure = process
        side.grace_until = now + PEER_GRACE_SECONDS


def _read_result(process: Process) -> dict[str, Any]:
    try:
        return json.loads((process.out_dir / "result.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # written via os.replace: a broken worker's
        return {}


def _finish(side: Side, process: Process, now: float) -> None:
    assert process.proc is not None
    _kill_group(process.proc)
    process.proc.wait()
    process.ended_at = now
    process.seconds = now - side.started
    process.result = _read_result(process)
    if process.failed:
        _note_failure(side, process, now)


def _peek(sides: Sequence[Side], now: float) -> None:
    """Notice a running process that reports a failure, before it exits (or if it never does);
    end the grace once every process still running is only waiting at exit."""
    for side in sides:
        running = [p for p in side.processes if p.proc is not None and p.ended_at is None]
        if len(side.processes) == 1 or not running:
            continue
        results = [_read_result(p) for p in running]
        if side.first_failure is None:
            failed = [p for p, result in zip(running, results) if result.get("status") == "failed"]
            if failed:
                _note_failure(side, failed[0], now)
        if side.grace_until is not None and all(r.get("phase") in ("done", "stopped") for r in results):
            side.grace_until = min(side.grace_until, now)


class Turns:
    """Which side may run its timed calls now (see the module docstring)."""

    def __init__(self, together: bool) -> None:
        self.together = together  # the machine has the cores for both sides' timed calls at once

    @staticmethod
    def _states(side: Side) -> list[str]:
        states = []
        for process in side.processes:
            if process.proc is None or process.ended_at is not None:
                states.append("ended")
                continue
            phase = _read_result(process).get("phase")
            states.append({"await-timing": "waiting", "timing": "measuring", "timed": "ended", "done": "ended",
                           "stopped": "ended"}.get(phase, "before"))
        return states

    def step(self, sides: Sequence[Side], now: float) -> None:
        states = {side.label: self._states(side) for side in sides}
        for side in sides:
            if side.measuring and all(state == "ended" for state in states[side.label]):
                side.measuring = False
            # Paused only while every live process waits: one still compiling may hang, and must
            # still meet the deadline.
            if side.waiting_since is None and "waiting" in states[side.label] and all(
                    state in ("waiting", "ended") for state in states[side.label]):
                side.waiting_since = now
        if any(side.measuring for side in sides):
            return
        if any("before" in states[side.label] for side in sides):
            return  # a side still starting or compiling would share the cores with the measured one
        for side in sides:
            if "waiting" in states[side.label]:
                self._grant(side, now)
                if not self.together:
                    return

    @staticmethod
    def _grant(side: Side, now: float) -> None:
        for process in side.processes:
            if process.ended_at is None:
                process.turn_file.touch()
        if side.waiting_since is not None:
            side.paused += now - side.waiting_since
            side.waiting_since = None
        side.measuring = True


def wait_all(sides: Sequence[Side], timeout: float, turns: Turns | None = None) -> None:
    """Poll every worker until it exits, its side passes its deadline, or a peer's failure ends
    its grace (polling, not wait(), so each side's times are its own though all run at once);
    with ``turns``, hand out the timing turns as the sides get there."""
    pending = [(side, p) for side in sides for p in side.processes if p.proc is not None and p.ended_at is None]
    peeked = 0.0
    while pending:
        now = time.monotonic()
        if now - peeked >= _PEEK_SECONDS:
            _peek(sides, now)
            if turns is not None:
                turns.step(sides, now)
            peeked = now
        for side, process in list(pending):
            assert process.proc is not None
            if process.proc.poll() is None:
                if now >= side.deadline(timeout, now):
                    process.timed_out = True
                elif side.grace_until is not None and now >= side.grace_until:
                    assert side.first_failure is not None
                    if side.first_failure is not process:  # (process 0 may wait after failing itself)
                        process.stopped_after = side.first_failure.index
                else:
                    continue
            _finish(side, process, now)
            pending.remove((side, process))
        if pending:
            time.sleep(_POLL_SECONDS)
