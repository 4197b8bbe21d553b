"""The pmap rewrite keeps its meaning: old and generated programs, 8 forced CPU devices, same outputs.

Each ``fixtures/runtime/pmap_<case>/old.py`` is a legacy program whose ``main()`` returns a dict of
case results. The new program is GENERATED here by ``rewrite_module`` (never hand-written), both run
in fresh worker subprocesses through ``jaxmigrate.runtime_checks`` (forced CPU devices set before
jax is imported), and the outputs (structure, shapes, dtypes, values) and the collectives in the
compiled HLO must agree. One more entry shows the precondition that makes the fix unsafe: a call
mapping fewer slices than there are devices runs under pmap and raises after the rewrite.
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


def _generate(case: str, tmp_path: Path) -> Path:
    old = RUNTIME / case / "old.py"
    result = rewrite_module(old.read_text())
    kept = [s for s in result.sites if not s.rewritable]
    assert result.sites and not kept, kept
    assert not any(
        isinstance(n, ast.Attribute) and n.attr == "pmap" or isinstance(n, ast.Name) and n.id in ("pmap", "pm")
        for n in ast.walk(ast.parse(result.text))
    ), "a pmap survived the rewrite"
    new = tmp_path / "new.py"
    new.write_text(result.text)
    return new


def test_cases_exist():
    assert {"pmap_forms", "pmap_train_step"} <= set(CASES)


def test_the_collectives_and_forms_the_cases_cover():
    text = (RUNTIME / "pmap_forms" / "old.py").read_text()
    for needed in ("lax.psum(", "lax.pmean(", "lax.all_gather(", "lax.ppermute(", "lax.axis_index(",
                   "in_axes=(None, 0)", "out_axes=1", "donate_argnums=", "static_broadcasted_argnums=",
                   "@partial(pm,", '"y": None}', "jax.value_and_grad"):
        assert needed in text, needed


@pytest.mark.parametrize("case", CASES)
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


def test_a_call_on_fewer_devices_than_the_mesh_is_outside_the_precondition(tmp_path):
    new = _generate("pmap_forms", tmp_path)
    report = verify(RUNTIME / "pmap_forms" / "old.py", new, ["on_four_devices"], devices=8, timeout=120)
    entry = report.entry("on_four_devices")
    assert entry.old.status == "ok", render_text(report)
    assert entry.new.status == "failed", render_text(report)
