"""A replication lands on the mesh of the step it is given to, whether ``--fix --unsafe-fixes``
writes it at once or after the pre-commit hook's safe ``--fix`` laid it out for the kept pmap
(tests/test_fix_in_two_steps.py: the two write the same program). That program runs as the
original did (JAX 0.4.30, where `device_put_replicated` still was): the same values on 8 forced CPU
devices, and the steps compiled as often as pmap compiled them (the fixture counts them among its
outputs; on another mesh of the same devices, the step compiled twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.report import render_text
from test_fix_shapes import RULES, TARGET

pytestmark = pytest.mark.runtime

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "replication_on_step_mesh" / "old.py"


def _fixed(text: str, safe_first: bool) -> str:
    if safe_first:
        text = fix_text(text, str(OLD), RULES, TARGET, unsafe=False).text
        assert text.count("jax.pmap") == 2 and "jax.device_put(" in text  # pmaps kept, placement fixed
    return fix_text(text, str(OLD), RULES, TARGET, unsafe=True).text


@pytest.mark.parametrize("safe_first", [False, True], ids=["at once", "safe fix first"])
def test_a_replication_lands_on_the_mesh_of_its_step_and_runs_as_the_original(tmp_path, legacy_python, safe_first):
    new_text = _fixed(OLD.read_text(), safe_first)
    assert "jax.pmap" not in new_text and "devices_mesh" in new_text and "mesh = " in new_text
    assert 'NamedSharding(devices_mesh, P("devices"))' in new_text, new_text
    new = tmp_path / "new.py"
    new.write_text(new_text)
    report = verify(OLD, new, ["main"], devices=8, old_python=legacy_python, timeout=180)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    # `compiles` is among the outputs: equal outputs mean the steps compiled as often as under pmap.
    assert report.equal, render_text(report)
    assert report.entry("main").comparison.leaves
