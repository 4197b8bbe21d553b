"""The pmap rewrite keeps its meaning: old and generated programs, 8 forced CPU devices, same outputs.

Each ``fixtures/runtime/pmap_<case>/old.py`` is a legacy program whose ``main()`` returns a dict of
case results. The new program is GENERATED here by ``rewrite_module`` (never hand-written), both run
in fresh worker subprocesses through ``jaxmigrate.runtime_checks`` (forced CPU devices set before
jax is imported), and the outputs (structure, shapes, dtypes, values) and the collectives in the
compiled HLO must agree. The steps are built in each program's driver (``main``, run once from
``__main__``), where the rewrite is offered (``jaxmigrate/migrate/_pmap_setting.py``); the forms it
declines stay pmaps, each with its reason. Two more cases show what the setting guards: a step
mapping fewer slices than there are devices is not rewritten (pmap runs it on those devices; the
rewrite, over every device, would raise), and the generated program compiles its steps as often
as pmap did (a step built at each call is not rewritten: a new `jax.jit` would compile each time).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jaxmigrate.migrate.pmap_to_shard_map import rewrite_module
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.hlo import KINDS
from jaxmigrate.runtime_checks.report import render_text

pytestmark = pytest.mark.runtime

RUNTIME = Path(__file__).resolve().parents[1] / "fixtures" / "runtime"
CASES = sorted(p.name for p in RUNTIME.glob("pmap_*") if (p / "old.py").is_file())
# The sites each case keeps as pmaps: (line, part of the reason). Every other site is rewritten.
TREE = "is mapped on an axis other than its first, or by a tree of axes"
KEPT = {
    "pmap_forms": {42: f"argument 1 of the call at line 76 {TREE}", 43: f"argument 1 of the call at line 78 {TREE}"},
    "pmap_two_slices": {14: "(`jnp.array([1, 2])`) is not shown to have the device count as its mapped axis"},
    "pmap_compiles": {27: "the step is built in `_apply`, which is not shown to run once"},
}


def _generate(case: str, tmp_path: Path) -> Path:
    old = RUNTIME / case / "old.py"
    result = rewrite_module(old.read_text())
    kept = {s.line: s.reason for s in result.sites if not s.rewritable}
    expected = KEPT.get(case, {})
    assert result.sites and kept.keys() == expected.keys(), kept
    for line, reason in expected.items():
        assert reason in kept[line], kept[line]
    pmaps = [n.lineno for n in ast.walk(ast.parse(result.text))
             if isinstance(n, ast.Attribute) and n.attr == "pmap" or isinstance(n, ast.Name) and n.id in ("pmap", "pm")]
    assert len(pmaps) == len(expected), "a pmap survived the rewrite"
    new = tmp_path / "new.py"
    new.write_text(result.text)
    return new


def test_cases_exist():
    assert {"pmap_forms", "pmap_train_step", "pmap_two_slices", "pmap_compiles"} <= set(CASES)


def test_the_collectives_and_forms_the_cases_cover():
    text = (RUNTIME / "pmap_forms" / "old.py").read_text()
    for needed in ("lax.psum(", "lax.pmean(", "lax.all_gather(", "lax.ppermute(", "lax.axis_index(",
                   "in_axes=(None, 0)", "out_axes=1", "donate_argnums=", "static_broadcasted_argnums=",
                   "@partial(pm,", '"y": None}', "jax.value_and_grad"):
        assert needed in text, needed


@pytest.mark.parametrize("case", [c for c in CASES if c != "pmap_two_slices"])
def test_generated_program_matches_pmap(case, tmp_path):
    new = _generate(case, tmp_path)
    report = verify(RUNTIME / case / "old.py", new, ["main"], devices=8, timeout=120)
    assert report.equal, render_text(report)
    entry = report.entry("main")
    assert entry.comparison is not None and entry.comparison.leaves
    # The same collectives, kind by kind, as JAX's own pmap compiled.
    old_counts = {kind: entry.old.collectives.count(kind) for kind in KINDS}
    new_counts = {kind: entry.new.collectives.count(kind) for kind in KINDS}
    assert old_counts == new_counts, render_text(report)
    assert old_counts["all-reduce"] > 0


def test_a_step_mapping_two_slices_is_not_rewritten_and_runs_on_two_of_eight_devices(tmp_path):
    new = _generate("pmap_two_slices", tmp_path)
    assert new.read_text() == (RUNTIME / "pmap_two_slices" / "old.py").read_text()
    report = verify(RUNTIME / "pmap_two_slices" / "old.py", new, ["main"], devices=8, timeout=120)
    # main() asserts it ran on 2 of the 8 devices: it raises otherwise.
    assert report.entry("main").old.status == "ok" and report.equal, render_text(report)


def test_the_generated_program_compiles_its_steps_as_often_as_pmap(tmp_path):
    # `compiles` is [compiles of the step built once and called 3 times, of the step built at each
    # of its 3 calls, of the step mapping a function made at each of its 3 calls], counted inside
    # each program: equal values mean equal counts.
    new = _generate("pmap_compiles", tmp_path)
    report = verify(RUNTIME / "pmap_compiles" / "old.py", new, ["main"], devices=8, timeout=120)
    assert report.equal, render_text(report)
