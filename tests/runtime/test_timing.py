"""verify --timing: the fields' shape and sanity, never absolute times.

The live runs use ``fixtures/runtime/harness/timing``: the old side compiles each step once and
does a few microseconds of work; the new side has one entry that is the same, one that sleeps
50 ms more per call (extra work whose length no load changes), one that jits a fresh lambda every
call and one whose static argument changes every call.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from jaxmigrate.runtime_checks.command import verify as verify_command
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.report import render_text

pytestmark = pytest.mark.xdist_group("timed")  # (one timed run, read by each test)
WARMUP, REPEAT = 1, 5
ENTRIES = ("same", "slow", "fresh_lambda", "static_counter")


@pytest.fixture(scope="module")
def timed(harness_case, tmp_path_factory) -> tuple[dict, str]:
    old, new = harness_case("timing")
    out = tmp_path_factory.mktemp("timing") / "report.json"
    args = [old, new, *[a for e in ENTRIES for a in ("--entry", e)], "--timing", "--warmup", WARMUP,
            "--repeat", REPEAT, "--devices", 2, "--json", out]
    result = CliRunner().invoke(verify_command, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output  # outputs equal: timing never changes the exit status
    return json.loads(out.read_text()), result.output


def _entry(report: dict, name: str) -> dict:
    return next(e for e in report["entries"] if e["name"] == name)


@pytest.mark.runtime
def test_every_entry_has_both_sides_timed(timed) -> None:
    report, _ = timed
    assert report["timing"]["warmup"] == WARMUP and report["timing"]["repeat"] == REPEAT
    for name in ENTRIES:
        entry = _entry(report, name)
        for label in ("old", "new"):
            side = entry[label]["timing"]
            assert len(side["calls"]) == REPEAT and side["warmup"] == WARMUP, (name, label)
            assert all(s > 0 for s in side["calls"])
            low, high = side["band"]
            assert min(side["calls"]) <= low <= side["median"] <= high <= max(side["calls"])
            assert side["compile_count"] == len(side["compilations"]) + len(side["later_compilations"])
            assert side["peak_rss"] > 10 * 2**20  # a JAX process: tens of MiB at least
            assert side["first_call_seconds"] > 0 and side["failure"] is None
        assert set(entry["timing"]["slowest"]["ratios"]) == {
            "compile_count", "compile_seconds", "median", "peak_rss", "collective_bytes"}
    # The first entry's first call compiles the step (entries share the worker, and its caches).
    first = _entry(report, "same")
    assert "jit(<lambda>)" in [c["name"] for c in first["old"]["timing"]["compilations"]]


@pytest.mark.runtime
def test_extra_work_is_slower_beyond_the_noise(timed) -> None:
    report, text = timed
    slow = _entry(report, "slow")
    assert slow["timing"]["slowest"]["verdict"] == "slower"
    assert [f["kind"] for f in slow["timing"]["slowest"]["flags"]] == ["slower"]
    assert slow["timing"]["slowest"]["ratios"]["median"] > 1
    assert slow["new"]["timing"]["band"][0] > slow["old"]["timing"]["band"][1]
    # Said with the spread, never as a single figure.
    assert "new is slower beyond the noise:" in text and "IQR" in text
    # Two equal sides may fall apart by noise, but never compile differently.
    same = _entry(report, "same")
    assert {f["kind"] for f in same["timing"]["slowest"]["flags"]} <= {"slower"}
    assert same["old"]["timing"]["compile_count"] == same["new"]["timing"]["compile_count"]


@pytest.mark.runtime
@pytest.mark.parametrize("name", ["fresh_lambda", "static_counter"])
def test_a_new_side_that_recompiles_per_call_is_flagged_with_its_count(timed, name) -> None:
    report, text = timed
    entry = _entry(report, name)
    new, old = entry["new"]["timing"], entry["old"]["timing"]
    assert [c["name"] for c in new["later_compilations"]] == ["jit(<lambda>)"] * (WARMUP + REPEAT)
    assert old["later_compilations"] == []
    kinds = {f["kind"]: f["message"] for f in entry["timing"]["slowest"]["flags"]}
    assert {"compiles-more", "recompiles"} <= set(kinds)
    assert f"{WARMUP + REPEAT} compilations in {WARMUP + REPEAT} later calls (jit(<lambda>) x{WARMUP + REPEAT})" \
        in kinds["recompiles"]
    assert f"new compiles more often: {new['compile_count']} (" in kinds["compiles-more"]
    assert f"{name}(): timing ({REPEAT} calls after {WARMUP} warm-up" in text
    summary = " ".join(text.split())  # rich wraps the line
    assert "compiles-more: fresh_lambda(), static_counter(); recompiles: fresh_lambda(), static_counter()" in summary


@pytest.mark.runtime
def test_phases_account_for_each_side_and_the_sides_took_turns(timed) -> None:
    report, text = timed
    assert report["compare_seconds"] >= 0
    waits = []
    for label in ("old", "new"):
        phases = report["sides"][label]["phases"]
        assert set(phases) == {"start_up", "import", "compile", "run", "wait", "total"}
        assert all(v is not None and v >= 0 for v in phases.values()), phases
        assert phases["start_up"] + phases["import"] + phases["compile"] + phases["run"] + phases["wait"] \
            <= phases["total"] + 0.01
        waits.append(phases["wait"])
    if report["timing"]["sides"] == "timed one after the other":
        # The new side's timed calls (sleeps of 50 ms among them) ran while the old side waited,
        # or the other way round: one of them waited at least that long.
        assert max(waits) >= REPEAT * 0.05
    assert "phases" in text and "start-up" in text and "compare (outputs and HLO, both sides)" in text


@pytest.mark.runtime
def test_without_timing_compilations_are_still_recorded_but_not_compared(harness_case) -> None:
    old, new = harness_case("timing")
    report = verify(old, new, ["fresh_lambda"], devices=2)
    assert report.timing is None and report.equal
    entry = report.entry("fresh_lambda")
    assert entry.new.timing is not None and entry.new.timing.calls is None
    assert [c.name for c in entry.new.timing.compilations][-1] == "jit(<lambda>)"
    payload = report.to_json()
    assert "timing" not in payload["entries"][0] and payload["timing"] is None
    assert payload["sides"]["new"]["phases"]["compile"] > 0
    assert "timing (" not in render_text(report)


@pytest.mark.runtime
def test_compilations_are_named_on_jax_0_4_30_too(harness_case, legacy_python) -> None:
    # jax 0.4.30's compile event carries no name: it comes from JAX's own log line.
    old, new = harness_case("timing")
    report = verify(old, new, ["static_counter"], devices=2, old_python=legacy_python, timing=True,
                    warmup=0, repeat=2)
    assert report.old.jax_version == "0.4.30", render_text(report)
    timing = report.entry("static_counter").timing
    assert timing is not None
    assert [c.name for c in timing.old.compilations] == ["jit(iota)", "jit(<lambda>)"]
    assert [c.name for c in timing.new.later_compilations] == ["jit(<lambda>)"] * 2
    assert all(c.seconds > 0 for c in timing.old.compilations)
