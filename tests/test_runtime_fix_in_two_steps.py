"""Fixed in two steps, as the pre-commit hook and then a user with ``--unsafe-fixes`` fix it, a
program is the program one ``--fix --unsafe-fixes`` writes (tests/test_fix_in_two_steps.py), and
that program runs as the original did (JAX 0.4.30, where `device_put_replicated` still was): the
same values on 8 forced CPU devices, and the steps compiled as often as pmap compiled them."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.report import render_text
from test_fix_shapes import RULES, TARGET

pytestmark = pytest.mark.runtime

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "fix_in_two_steps" / "old.py"


def test_a_replication_fixed_before_its_pmap_runs_as_the_original(tmp_path, legacy_python):
    text = OLD.read_text()
    safe_first = fix_text(text, str(OLD), RULES, TARGET, unsafe=False).text
    assert "jax.pmap" in safe_first and '("_internal_pmap_axis_name",)' in safe_first
    two_steps = fix_text(safe_first, str(OLD), RULES, TARGET, unsafe=True).text
    assert "jax.pmap" not in two_steps and "NamedSharding(mesh, P(" in two_steps
    new = tmp_path / "new.py"
    new.write_text(two_steps)
    report = verify(OLD, new, ["main"], devices=8, old_python=legacy_python, timeout=180)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    # `compiles` is among the outputs: equal outputs mean the step compiled as often as pmap.
    assert report.equal, render_text(report)
    assert report.entry("main").comparison.leaves
