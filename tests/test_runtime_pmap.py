"""The pmap rewrite keeps its meaning: old and generated programs, 8 forced CPU devices, same outputs.

Each ``fixtures/runtime/pmap_<case>/old.py`` is a legacy program whose ``main()`` returns a dict of
case results. The new program is GENERATED here by ``rewrite_module`` (never hand-written), both run
in fresh worker subprocesses through ``jaxmigrate.runtime_checks`` (forced CPU devices set before
jax is imported), and the outputs (structure, shapes, dtypes, values) and the collectives in the
compiled HLO must agree.
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
    kept = [s for s in result.sites if not s.rewritten]
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
