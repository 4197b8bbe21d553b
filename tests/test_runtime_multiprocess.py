"""``jaxmigrate verify --processes 2 --devices 2``: each side runs as 2 JAX processes of 2 CPU
devices, joined by ``jax.distributed`` on 127.0.0.1 with gloo CPU collectives, and every process's
outputs and collectives are compared, old against new.

Fixtures: ``fixtures/runtime/multiprocess_*/{old,new}.py``. Each verify run starts 4 JAX processes
(a few seconds), so the cases share runs where they read well.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate.runtime_checks.command import verify as verify_command
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.launch import PEER_GRACE_SECONDS
from jaxmigrate.runtime_checks.report import render_text

pytestmark = pytest.mark.runtime

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "runtime"
TWO_BY_TWO = {"processes": 2, "devices": 2}


def case(name: str) -> tuple[Path, Path]:
    folder = FIXTURES / f"multiprocess_{name}"
    return folder / "old.py", folder / "new.py"


def _cli(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(verify_command, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie whose parent died waits on init; it runs no more


@pytest.fixture
def watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(pid folder the fixture programs write to, the run's own temp folder): to check afterwards
    that no process outlives the run and its temp folder (dumps, outputs) is gone."""
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("JAXMIGRATE_TEST_PID_DIR", str(pids))
    scratch = tmp_path / "tmp"  # our own: other runs on the machine come and go in the shared one
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return pids, scratch


def _nothing_left(pids: Path, scratch: Path, expected: int) -> None:
    recorded = [int(p.read_text()) for p in pids.iterdir()]
    assert len(recorded) == expected
    assert [pid for pid in recorded if _alive(pid)] == []
    assert list(scratch.iterdir()) == []


def test_pmap_equals_jit_shard_map_over_global_arrays_on_every_process(jaxmigrate_verify) -> None:
    # (a) a pmap step vs jit + shard_map fed make_array_from_process_local_data; (c) psum, pmax and
    # all_gather of rows that differ per process. Through the pytest fixture, as a user would.
    old, new = case("pmap")
    report = jaxmigrate_verify(old, new, ["step", "gather"], **TWO_BY_TWO, timeout=120)
    assert report.exit_code == 0 and report.processes == 2
    assert report.old.device_count == report.new.device_count == 4
    assert [p.local_device_count for p in report.new.processes] == [2, 2]
    for entry in report.entries:
        assert [p.status for p in entry.processes] == ["equal", "equal"], render_text(report)
    # The new side's results are global arrays; each process saved (and compared) its own rows.
    notes = [[o.note for o in p.new.outputs if o.path == "[2]"] for p in report.entry("step").processes]
    assert notes == [["process-local part [0:2] of a global [4] array"],
                     ["process-local part [2:4] of a global [4] array"]]
    assert all(o.note == "" for p in report.entry("step").processes for o in p.old.outputs)
    for p in report.entry("gather").processes:
        assert p.old.collectives.count("all-gather") == p.new.collectives.count("all-gather") == 1
        assert p.old.collectives.count("all-reduce") == p.new.collectives.count("all-reduce") >= 2
    assert "equal on all 2 processes" in render_text(report)


def test_sync_pattern_fed_host_local_arrays_fails_on_both_processes(tmp_path: Path) -> None:
    # (b) big_vision's sync(): right with one process, wrong with two (issue 10).
    old, new = case("sync")
    assert verify(old, new, ["sync"], devices=4).exit_code == 0  # one process hides the bug

    out = tmp_path / "report.json"
    code, text = _cli(old, new, "--entry", "sync", "--processes", 2, "--devices", 2, "--json", out)
    assert code == 2, text
    report = json.loads(out.read_text())
    assert report["processes"] == 2 and report["devices"] == 2
    (entry,) = report["entries"]
    assert entry["status"] == "failed"
    assert [p["old"]["status"] for p in entry["processes"]] == ["ok", "ok"]
    process0, process1 = (p["new"]["failure"] for p in entry["processes"])
    assert process0["process"] == 0 and "AssertionError: (Array(2., dtype=float32), 4)" in process0["message"]
    assert process1["process"] == 1
    assert "Fetching value for `jax.Array` that spans non-addressable" in process1["message"]
    assert "new process 0 sync(): raised" in text and "new process 1 sync(): raised" in text

    code, text = _cli(old, new, "--entry", "sync", "--processes", 0)
    assert code == 2 and "--processes" in text


def test_a_failing_process_fails_the_run_and_its_peers_are_killed(watched) -> None:
    # One run, two failures: on the old side process 1 raises while process 0 waits for it in a
    # psum; on the new side process 0 (the coordinator's host) calls sys.exit(3).
    old, new = case("failures")
    started = time.monotonic()
    report = verify(old, new, ["differs_on_1", "fails"], **TWO_BY_TWO, timeout=120)
    assert time.monotonic() - started < 60  # ended by the failures, not by the timeout
    assert report.exit_code == 2, render_text(report)

    differs = report.entry("differs_on_1")
    assert [p.status for p in differs.processes] == ["equal", "different"]
    assert differs.status == "different" and [d.path for d in differs.comparison.worst()] == ["['rows']"]

    fails = report.entry("fails").processes
    assert fails[1].old.failure.kind == "raised" and "ValueError: process 1 cannot read" in fails[1].old.failure.message
    assert fails[0].new.failure.kind == "raised" and "SystemExit: 3" in fails[0].new.failure.message
    stopped = report.old.processes[0].failure
    assert stopped.kind == "stopped" and f"killed {PEER_GRACE_SECONDS:g} s after process 1 failed" in stopped.message
    assert report.old.processes[1].failure is None  # its entry's failure says it all

    text = render_text(report)
    assert "process 0: equal (2/2 leaves equal)" in text and "process 1: different (1/2 leaves equal)" in text
    assert text.index("old process 1 fails(): raised") < text.index("old process 0: stopped")
    _nothing_left(*watched, expected=4)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to inspect processes")
def test_a_hanging_process_times_out_and_every_process_group_goes(watched) -> None:
    old, new = case("failures")
    report = verify(old, new, ["hangs"], **TWO_BY_TWO, timeout=20)
    assert report.exit_code == 2
    assert report.old.failure is None and report.entry("hangs").processes[0].old.status == "ok"
    assert [p.failure.kind for p in report.new.processes] == ["timeout", "timeout"]
    assert report.new.failure.kind == "timeout" and "while running entry 'hangs'" in report.new.failure.message
    assert report.new.seconds < 20 + 5
    # 2 old workers, 2 new workers and the grandchild new process 1 started.
    _nothing_left(*watched, expected=5)


@pytest.mark.slow
def test_jax_0_4_30_old_side_runs_one_device_per_process(legacy_python) -> None:
    old, new = case("pmap")
    report = verify(old, new, ["step", "gather"], processes=2, devices=1, old_python=legacy_python, timeout=120)
    assert report.old.jax_version == "0.4.30" and report.exit_code == 0, render_text(report)
    assert all(p.status == "equal" for e in report.entries for p in e.processes)

    # With 2 devices per process its gloo setup times out and aborts: refused at once instead.
    refused = verify(old, new, ["gather"], **TWO_BY_TWO, old_python=legacy_python, timeout=120)
    assert refused.exit_code == 2
    assert [p.failure.kind for p in refused.old.processes] == ["unsupported", "unsupported"]
    assert "one CPU device per process" in refused.old.failure.message
    assert "old processes 0, 1: unsupported" in render_text(refused)
