"""The timing verdicts and the timing turns, on made-up numbers (no JAX run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxmigrate.runtime_checks.compare import Comparison
from jaxmigrate.runtime_checks.hlo import Collective, CollectiveSummary
from jaxmigrate.runtime_checks.launch import Process, Side, Turns
from jaxmigrate.runtime_checks.report import (
    EntryReport,
    EntrySide,
    ProcessEntry,
    SideReport,
    VerifyReport,
    render_text,
)
from jaxmigrate.runtime_checks.timing import (
    Compilation,
    SideTiming,
    Spread,
    TimingComparison,
    collective_changes,
    names,
    phases,
)


def _timing(calls, compiled=("jit(step)",), later=(), warmup=1, collectives=None) -> SideTiming:
    return SideTiming(compilations=[Compilation(n, 0.1) for n in compiled],
                      later_compilations=[Compilation(n, 0.1) for n in later], warmup=warmup,
                      calls=Spread(tuple(calls)) if calls else None, collectives=collectives or CollectiveSummary())


@pytest.mark.parametrize(("calls", "median", "band"), [
    pytest.param([3.0, 1.0, 2.0], 2.0, (1.0, 3.0), id="below 4 calls: min..max"),
    pytest.param([1.0, 2.0, 3.0, 4.0, 100.0], 3.0, (2.0, 4.0), id="interquartile range: one outlier ignored"),
])
def test_spread(calls, median, band) -> None:
    spread = Spread(tuple(calls))
    assert spread.median == median and spread.band == band


@pytest.mark.parametrize(("old", "new", "verdict"), [
    pytest.param([1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3], "slower", id="bands apart: slower"),
    pytest.param([2.0, 2.1, 2.2, 2.3], [1.0, 1.1, 1.2, 1.3], "faster", id="bands apart: faster"),
    pytest.param([1.0, 1.5, 2.0, 2.5], [1.9, 2.2, 2.4, 3.0], "same", id="new median higher, bands overlap: noise"),
    pytest.param([1.0, 1.1], None, "unknown", id="new not timed"),
])
def test_slower_only_beyond_the_noise(old, new, verdict) -> None:
    cmp = TimingComparison(_timing(old), _timing(new))
    assert cmp.verdict == verdict
    assert [f.kind for f in cmp.flags()] == (["slower"] if verdict == "slower" else [])


def test_slower_flag_gives_the_spreads_and_the_collectives_that_changed() -> None:
    old_coll, new_coll = CollectiveSummary(), CollectiveSummary()
    old_coll.add("m", [Collective("all-reduce", "ar", 4096, 4096, 4096)])
    new_coll.add("m", [Collective("all-reduce", "ar", 1024, 1024, 1024)] * 4
                 + [Collective("all-gather", "ag", 8192, 1024, 8192)])
    cmp = TimingComparison(_timing([1e-3] * 4, collectives=old_coll), _timing([2e-3] * 4, collectives=new_coll))
    (flag,) = cmp.flags()
    assert flag.message == ("new is slower beyond the noise: 2 ms (IQR 2 ms-2 ms, 4 calls) against 1 ms "
                            "(IQR 1 ms-1 ms, 4 calls), x2.00; collectives: all-reduce 4 (4.0 KiB) against "
                            "1 (4.0 KiB); all-gather 1 (8.0 KiB) against 0 (0 B)")
    assert cmp.ratios["collective_bytes"] == pytest.approx(3.0)
    assert collective_changes(old_coll, old_coll) == ""


def test_compiling_more_and_recompiling_are_flagged_with_names() -> None:
    old = _timing([1.0] * 4, compiled=["jit(step)"])
    new = _timing([1.0] * 4, compiled=["jit(step)", "jit(sync)"], later=["jit(step)"] * 5, warmup=1)
    flags = {f.kind: f.message for f in TimingComparison(old, new).flags()}
    assert flags["compiles-more"] == "new compiles more often: 7 (jit(step) x6, jit(sync)) against 1 (jit(step))"
    assert flags["recompiles"] == ("new compiles again after its first call: 5 compilations in 5 later calls "
                                   "(jit(step) x5); old 0")
    assert TimingComparison(new, old).flags() == []  # old compiling more is no regression
    assert names([]) == "none"


def test_several_processes_compare_each_sides_slowest() -> None:
    def entry(process, old, new) -> ProcessEntry:
        return ProcessEntry(process, EntrySide("ok", timing=_timing(old)), EntrySide("ok", timing=_timing(new)))

    report = EntryReport("step", [entry(0, [1.0] * 4, [1.0] * 4), entry(1, [1.2] * 4, [3.0] * 4)])
    cmp = report.timing
    assert cmp is not None and cmp.old.calls.median == 1.2 and cmp.new.calls.median == 3.0
    assert cmp.verdict == "slower"
    per_process = report.timing_json()["processes"]
    assert [p["verdict"] for p in per_process] == ["same", "slower"]


def test_the_text_shows_each_process_and_the_slowest() -> None:
    def entry(process, old, new) -> ProcessEntry:
        return ProcessEntry(process, EntrySide("ok", timing=_timing(old)), EntrySide("ok", timing=_timing(new)),
                            Comparison(equal=True, structure_equal=True))

    report = VerifyReport(SideReport("old", "old.py", "python"), SideReport("new", "new.py", "python"),
                          [EntryReport("step", [entry(0, [1.0] * 4, [1.0] * 4), entry(1, [1.2] * 4, [3.0] * 4)])],
                          devices=2, processes=2, timing={"warmup": 1, "repeat": 4})
    text = render_text(report, width=200)
    assert "step(): timing (4 calls after 1 warm-up, each synchronised); each side's slowest process" in text
    assert "step time, process 0" in text and "step time, process 1" in text
    assert "new is slower beyond the noise: 3.00 s (IQR 3.00 s-3.00 s, 4 calls) against 1.20 s" in text


def test_phases_from_the_worker_stamps() -> None:
    result = {"clock": {"jax_ready": 12.0, "imported": 12.5, "first_calls_done": 14.0, "timed_done": 20.0},
              "waited": 3.0}
    got = phases(result, spawned_at=10.0, compile_seconds=1.0, seconds=21.0)
    assert got == {"start_up": 2.0, "import": 0.5, "compile": 1.0, "run": 3.5, "wait": 3.0, "total": 21.0}
    assert phases({}, 10.0, 0.0, None)["start_up"] is None  # died before JAX was up


class _Running:
    """Stands for a live Popen: Turns only asks whether a process has ended."""


def _side(tmp_path: Path, label: str, phases_: list[str]) -> Side:
    side = Side(label, tmp_path / f"{label}.py", "python", tmp_path / label, started=0.0)
    for index, phase in enumerate(phases_):
        process = Process(index, side.root / f"process{index}", proc=_Running())  # type: ignore[arg-type]
        process.out_dir.mkdir(parents=True)
        (process.out_dir / "result.json").write_text(json.dumps({"phase": phase}))
        side.processes.append(process)
    return side


def _set(side: Side, phase: str) -> None:
    for process in side.processes:
        (process.out_dir / "result.json").write_text(json.dumps({"phase": phase}))


def _granted(side: Side) -> bool:
    return all(p.turn_file.exists() for p in side.processes)


def test_sides_measure_in_turn_once_both_are_ready(tmp_path: Path) -> None:
    old, new = _side(tmp_path, "old", ["await-timing"]), _side(tmp_path, "new", ["entry"])
    turns = Turns(together=False)
    turns.step([old, new], now=5.0)
    assert not _granted(old)  # the new side still compiles: it would share the cores
    assert old.deadline(timeout=10.0, now=8.0) == 13.0  # waiting does not count against the deadline

    _set(new, "await-timing")
    turns.step([old, new], now=6.0)
    assert _granted(old) and not _granted(new) and old.paused == 1.0

    _set(old, "timing")
    turns.step([old, new], now=7.0)
    assert not _granted(new)

    _set(old, "done")
    turns.step([old, new], now=9.0)
    assert _granted(new) and new.paused == 3.0


def test_a_process_still_compiling_keeps_its_sides_deadline(tmp_path: Path) -> None:
    # Process 0 waits for its turn, process 1 hangs in its first call: the side must time out.
    old, new = _side(tmp_path, "old", ["await-timing", "entry"]), _side(tmp_path, "new", ["await-timing"])
    Turns(together=False).step([old, new], now=5.0)
    assert old.deadline(timeout=10.0, now=50.0) == 10.0 and not _granted(old) and not _granted(new)


def test_sides_measure_together_where_the_cores_allow(tmp_path: Path) -> None:
    old, new = _side(tmp_path, "old", ["await-timing", "await-timing"]), _side(tmp_path, "new", ["await-timing"] * 2)
    Turns(together=True).step([old, new], now=1.0)
    assert _granted(old) and _granted(new)


def test_a_side_whose_processes_ended_does_not_hold_the_turn(tmp_path: Path) -> None:
    old, new = _side(tmp_path, "old", ["entry"]), _side(tmp_path, "new", ["await-timing"])
    old.processes[0].ended_at = 2.0  # crashed before reaching its timed calls
    Turns(together=False).step([old, new], now=3.0)
    assert _granted(new)
