"""The fixes under several processes: ``jaxmigrate --fix --unsafe-fixes`` GENERATES the new program
from ``fixtures/runtime/multiprocess_generated/old.py`` (never hand-written) and both run as
2 processes x 2 CPU devices, old against new, every process compared.

The old side runs on JAX 0.10.2: ``jax.pmap`` is still there, and so is (in ``jax._src.api``) the
``device_put_replicated`` / ``device_put_sharded`` JAX 0.9 exported; jax 0.4.30 runs only one CPU
device per process across processes. Each run starts 4 JAX processes, so the entries share runs:
one with everything that holds, one per failure (a process stops at its first failing entry).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.report import render_text

pytestmark = [pytest.mark.runtime, pytest.mark.xdist_group("multiprocess_fixes")]

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "multiprocess_generated" / "old.py"
TWO_BY_TWO = {"processes": 2, "devices": 2, "timeout": 120}


@pytest.fixture(scope="module")
def new(tmp_path_factory) -> Path:
    """The program the tool writes, after checking what it says about each fix."""
    source = OLD.read_text()
    findings = [f for f in lint_text(source, "old.py", all_rules(), (0, 10)) if f.fix is not None]
    by_code = {}
    for finding in findings:
        by_code.setdefault(finding.code, []).append(finding)
    assert sorted(by_code) == ["JM302"]
    # No pmap is rewritten here, and each finding says why: the module runs as several processes.
    pmaps = [f for f in lint_text(source, "old.py", all_rules(), (0, 10)) if f.code == "JM101"]
    assert len(pmaps) == 3 and all(
        "not rewritten: this module runs as several processes (`jax.process_index` at line" in f.message
        for f in pmaps)
    # The placements onto jax.devices() say why they are unsafe with several processes; those onto
    # this process's devices only for the weak types their leaves might have.
    for finding in by_code["JM302"]:
        assert finding.fix.safety.value == "unsafe"
        assert ("checks that every process passes the same value" in finding.message) == (
            "jax.devices()" in source.splitlines()[finding.line - 1])
    fixed = fix_text(source, "old.py", all_rules(), (0, 10), unsafe=True)
    assert fixed.fixed == len(findings) and not fixed.errors
    assert all(f.fix is None for f in fixed.findings)
    read = [n.attr for n in ast.walk(ast.parse(fixed.text)) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)]
    assert not set(read) & {"device_put_replicated", "device_put_sharded"}  # (the old side's shim assigns them)
    assert read.count("pmap") == 3
    path = tmp_path_factory.mktemp("generated") / "new.py"
    path.write_text(fixed.text)
    return path


def test_what_holds_with_several_processes(new) -> None:
    # Replication onto this process's devices, per-process shards, shards every process passes the
    # same, and a pmap fed a global array (psum and all_gather of rows that differ per process).
    entries = ["replicated", "sharded", "sharded_global_same", "gather_global"]
    report = verify(OLD, new, entries, **TWO_BY_TWO)
    assert report.exit_code == 0, render_text(report)
    assert report.old.jax_version == report.new.jax_version and report.processes == 2
    for entry in report.entries:
        assert [p.status for p in entry.processes] == ["equal", "equal"], entry.name
    # The rows each process compared are its own: replicas of its own params on its own devices.
    for process in report.entry("replicated").processes:
        assert process.comparison.leaves and all(leaf.equal for leaf in process.comparison.leaves)
    gather = report.entry("gather_global").processes
    assert all(p.new.collectives.count("all-gather") == p.old.collectives.count("all-gather") == 1 for p in gather)


def test_the_sync_pattern_the_tool_keeps_runs_as_before_with_two_processes(new) -> None:
    # big_vision's sync(): the exact pmap rewrite is right in one process (tests/test_runtime_pmap.py)
    # and wrong in two: pmap made each process's host-local ones one global array, jax.jit does not
    # (the rewrite raised in sync()). The tool keeps these pmaps, so both run as before.
    report = verify(OLD, new, ["sync", "gather_local"], **TWO_BY_TWO)
    assert report.exit_code == 0, render_text(report)
    for entry in report.entries:
        assert [p.status for p in entry.processes] == ["equal", "equal"], entry.name


def test_device_put_onto_every_device_needs_the_same_value_on_every_process(new) -> None:
    # device_put_sharded took each process's own shards; jax.device_put of a host value onto other
    # processes' devices checks that every process passes the same one, and raises here.
    report = verify(OLD, new, ["sharded_global"], **TWO_BY_TWO)
    assert report.exit_code == 2, render_text(report)
    (entry,) = report.entries
    assert [p.old.status for p in entry.processes] == ["ok", "ok"]
    assert all("is not the same on each process" in p.new.failure.message for p in entry.processes)
