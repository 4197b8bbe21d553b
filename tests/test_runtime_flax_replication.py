"""JM102's fix keeps the meaning of flax's replicate/unreplicate: the legacy program runs with the
real flax 0.8.5 on jax 0.4.30, the program the fix generates (no flax left) on jax 0.10.2, both on 8
forced CPU devices; values and which device holds which block must agree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.runtime_checks import verify
from jaxmigrate.runtime_checks.report import render_text

pytestmark = [pytest.mark.runtime, pytest.mark.slow]

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "flax_replication" / "old.py"


def _fixed(tmp_path) -> Path:
    rules = tuple(r for r in all_rules() if r.code == "JM102")
    new = tmp_path / "new.py"
    new.write_text(fix_text(OLD.read_text(), "old.py", rules, (0, 10), unsafe=True).text)
    return new


def test_fixed_program_matches_flax(tmp_path, flax_python):
    rules = tuple(r for r in all_rules() if r.code == "JM102")
    # replicate(params) may hold weakly typed leaves (the numpy placement makes them strong): an
    # unsafe fix; unreplicate is flax's own body, a safe one.
    findings = lint_text(OLD.read_text(), "old.py", rules, (0, 10))
    assert sorted(f.fix.safety.value for f in findings) == ["safe", "safe", "unsafe", "unsafe"], findings
    fixed = fix_text(OLD.read_text(), "old.py", rules, (0, 10), unsafe=True)
    assert fixed.fixed == 4 and not fixed.findings and not fixed.errors, fixed.findings
    assert "flax" not in {
        (n.module or "").partition(".")[0] for n in ast.walk(ast.parse(fixed.text)) if isinstance(n, ast.ImportFrom)
    }
    new = tmp_path / "new.py"
    new.write_text(fixed.text)
    report = verify(OLD, new, ["main"], devices=8, old_python=flax_python, timeout=240)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    assert report.equal, render_text(report)
    assert len(report.entry("main").comparison.leaves) >= 8


def test_fixed_program_matches_flax_with_two_processes(tmp_path, flax_python):
    # replicate()'s default devices are this process's: each process gets its own replicas, as with
    # flax. jax 0.4.30 runs one CPU device per process across processes, hence 2 x 1.
    report = verify(OLD, _fixed(tmp_path), ["main"], processes=2, devices=1, old_python=flax_python,
                    timeout=240)
    assert report.exit_code == 0 and report.processes == 2, render_text(report)
    assert [p.status for p in report.entry("main").processes] == ["equal", "equal"]
