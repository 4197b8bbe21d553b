"""JM511's fix keeps the meaning of a 0/1 `where=` mask: the legacy program (brax 0.0.16's ARS
update, reduced) on JAX 0.4.30 against the fixed one on 0.10.2, where the unfixed one raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text
from jaxmigrate.lint.registry import rule_by_code
from jaxmigrate.runtime_checks import verify
from jaxmigrate.runtime_checks.report import render_text

pytestmark = [pytest.mark.runtime]

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "non_boolean_where" / "old.py"


def test_cast_masks_match_the_legacy_program(tmp_path, legacy_python):
    result = fix_text(OLD.read_text(), "old.py", (rule_by_code("JM511"),), (0, 10), unsafe=True)
    assert result.fixed == 5 and not result.findings, (result.fixed, result.findings)
    new = tmp_path / "new.py"
    new.write_text(result.text)

    report = verify(OLD, new, ["main"], devices=8, old_python=legacy_python, timeout=180)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    assert report.equal, render_text(report)

    unfixed = verify(OLD, OLD, ["main"], devices=8, old_python=legacy_python, timeout=180)
    assert "where must be None or a boolean array" in render_text(unfixed)
