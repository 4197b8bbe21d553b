"""Live runs on 8 forced CPU devices: both workers per test, several entries per worker."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate.runtime_checks.command import verify as verify_command
from jaxmigrate.runtime_checks.harness import verify

pytestmark = pytest.mark.runtime


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(verify_command, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def test_pmap_vs_shard_map_equal_with_same_collectives(harness_case, tmp_path: Path) -> None:
    old, new = harness_case("pmap_to_shard_map")
    out = tmp_path / "report.json"
    code, text = _cli(old, new, "--entry", "main", "--entry", "flags", "--entry", "all_kinds", "--json", out)
    assert code == 0, text
    report = json.loads(out.read_text())
    assert report["exit_code"] == 0 and [e["status"] for e in report["entries"]] == ["equal"] * 3
    assert report["sides"]["old"]["device_count"] == report["sides"]["new"]["device_count"] == 8
    main = report["entries"][0]
    assert main["old"]["collectives"]["totals"]["all-reduce"]["count"] >= 1
    for entry in report["entries"]:
        assert entry["old"]["collectives"]["totals"] == entry["new"]["collectives"]["totals"], entry["name"]
    kinds = set(report["entries"][2]["new"]["collectives"]["totals"])
    assert kinds == {"all-gather", "reduce-scatter", "collective-permute", "all-to-all"}
    assert all(o["sharding"] for o in main["new"]["outputs"])  # each leaf's sharding, as text
    assert "all entries equal" in text


def test_changed_value_is_reported_with_its_leaf(harness_case, tmp_path: Path) -> None:
    old, new = harness_case("changed_value")
    out = tmp_path / "report.json"
    code, text = _cli(old, new, "--entry", "main", "--json", out)
    assert code == 1, text
    assert "['params']['b']" in text and "values differ" in text
    leaves = {leaf["path"]: leaf for leaf in json.loads(out.read_text())["entries"][0]["leaves"]}
    assert not leaves["['params']['b']"]["equal"]
    assert leaves["['params']['b']"]["max_abs"] == pytest.approx(1e-3, rel=1e-2)
    assert leaves["['params']['w']"]["equal"]
    assert leaves["['loss']"]["old_dtype"] == "bfloat16" and leaves["['loss']"]["equal"]


def test_global_jit_equals_pmap_step_after_unreplicate(harness_case) -> None:
    old, new = harness_case("dp_step")
    inputs = f"{old.parent / 'inputs.py'}:make_inputs"
    report = verify(old, new, ["train_step"], inputs=inputs, unreplicate="old")
    entry = report.entry("train_step")
    assert report.exit_code == 0, entry.comparison
    assert all(d.unreplicated == "old" for d in entry.comparison.leaves)
    assert entry.old.collectives.count("all-reduce") >= 1 and entry.new.collectives.count("all-reduce") >= 1
    assert report.old.threefry_partitionable is True and report.settings["threefry_partitionable"] == "true"

    without = verify(old, new, ["train_step"], inputs=inputs)
    assert without.exit_code == 1
    assert all("leading device axis on old" in d.reason for d in without.entry("train_step").comparison.leaves)


def test_raising_and_missing_entries_exit_2_with_traceback(harness_case, tmp_path: Path) -> None:
    old, new = harness_case("failures")
    out = tmp_path / "report.json"
    code, text = _cli(old, new, "--entry", "fine", "--entry", "raises", "--entry", "nope", "--json", out)
    assert code == 2, text
    assert "ValueError: shapes (3,) and (4,) do not match" in text
    report = json.loads(out.read_text())
    status = {e["name"]: e["status"] for e in report["entries"]}
    assert status == {"fine": "equal", "raises": "failed", "nope": "failed"}
    raises = report["entries"][1]
    assert raises["old"]["status"] == "ok" and raises["new"]["failure"]["kind"] == "raised"
    # The user's frames only. Read from the JSON: the text report wraps a long path mid-frame.
    assert 'new.py", line' in raises["new"]["failure"]["traceback"]
    assert "worker.py" not in raises["new"]["failure"]["traceback"]
    assert report["entries"][2]["old"]["failure"]["kind"] == "missing-entry"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie whose parent died waits on init; it runs no more


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to inspect processes")
def test_hanging_side_is_killed_with_its_children(harness_case, tmp_path: Path, monkeypatch) -> None:
    old, new = harness_case("failures")
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("JAXMIGRATE_TEST_PID_FILE", str(pid_file))
    # A temp folder of our own: other runs on the machine come and go in the shared one.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # (8 s: the old side starts, compiles and runs in about 1.5 s alone, and in 4 s did not on a
    # loaded machine)
    report = verify(old, new, ["hangs"], timeout=8)
    assert report.exit_code == 2
    assert report.new.failure.kind == "timeout" and "'hangs'" in report.new.failure.message
    assert report.old.failure is None and report.entry("hangs").old.status == "ok"
    worker_pid, child_pid = (int(p) for p in pid_file.read_text().split())
    assert not _alive(worker_pid) and not _alive(child_pid)
    assert list(scratch.iterdir()) == []  # the run's temp folder (dumps, outputs) is gone


def test_crashing_side_names_the_signal(harness_case) -> None:
    old, new = harness_case("failures")
    report = verify(old, new, ["crashes"])
    assert report.exit_code == 2
    assert report.new.failure.kind == "crashed" and "SIGSEGV" in report.new.failure.message
    assert "crashes" in report.new.failure.stderr  # faulthandler's stack names the function


def test_interpreter_without_jax_and_missing_inputs_function(harness_case, tmp_path: Path) -> None:
    old, new = harness_case("failures")
    # An interpreter that cannot see site-packages: a real Python without jax or numpy.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    bare.chmod(bare.stat().st_mode | stat.S_IXUSR)
    code, text = _cli(old, new, "--entry", "fine", "--new-python", bare, "--timeout", "60")
    assert code == 2, text
    assert "cannot import jax" in text and "--new-python" in text

    report = verify(old, new, ["fine"], inputs=f"{old}:no_such_function")
    assert report.exit_code == 2
    assert {report.old.failure.kind, report.new.failure.kind} == {"missing-inputs"}
    assert "no_such_function" in report.old.failure.message


def test_usage_errors_exit_2_without_running(tmp_path: Path, harness_case) -> None:
    old, new = harness_case("failures")
    code, text = _cli(old, new, "--entry", "fine", "--inputs", tmp_path / "absent.py:make")
    assert code == 2 and "does not exist" in text
    code, text = _cli(old, tmp_path / "absent.py", "--entry", "fine")
    assert code == 2


def test_an_internal_error_exits_2_not_1(harness_case, monkeypatch) -> None:
    # Exit 1 means "outputs differ"; a bug of ours must not be read as a difference.
    from jaxmigrate.runtime_checks import command

    def broken(*args, **kwargs):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(command, "run_verify", broken)
    old, new = harness_case("failures")
    code, text = _cli(old, new, "--entry", "fine")
    assert code == 2 and "internal error" in text and "IndexError: tuple index out of range" in text


def test_pytest_fixture_fails_with_readable_diff(jaxmigrate_verify, harness_case) -> None:
    old, new = harness_case("changed_value")
    with pytest.raises(pytest.fail.Exception) as failed:
        jaxmigrate_verify(old=old, new=new, entry="main", devices=8)
    message = str(failed.value)
    assert "['params']['b']" in message and "values differ" in message and "\x1b[" not in message
    report = jaxmigrate_verify(old=os.path.relpath(old), new=new, entry="main", check=False)
    assert report.exit_code == 1 and report.entry("main").status == "different"
