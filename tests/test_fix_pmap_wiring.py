"""JM101's fix reaches every pmap application the codemod can prove, through the mention it reports."""

from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.rules.legacy_pmap import LegacyPmap
from jaxmigrate.migrate.pmap_to_shard_map import rewrite_module

CASES = sorted((Path(__file__).parents[1] / "fixtures" / "migrate" / "pmap_to_shard_map").glob("*.in.py"))
TARGET = (0, 10)


@pytest.mark.parametrize("case", CASES, ids=[c.name.removesuffix(".in.py") for c in CASES])
def test_fixing_the_findings_rewrites_what_the_codemod_rewrites(case):
    text = case.read_text()
    result = fix_text(text, case.name, (LegacyPmap,), TARGET)
    assert result.text == rewrite_module(text).text
    assert not result.errors
    # What is left is what the codemod kept, each finding saying why.
    for finding in result.findings:
        assert finding.fix is None


def test_a_suppressed_mention_is_not_rewritten():
    text = (
        "import jax\n"
        "a = jax.pmap(f, axis_name='i')\n"
        "b = jax.pmap(g, axis_name='i')  # noqa: JM101\n"
    )
    fixed = fix_text(text, "m.py", (LegacyPmap,), TARGET).text
    assert "b = jax.pmap(g, axis_name='i')  # noqa: JM101" in fixed
    assert "a = jax.jit(_shard_map_like_pmap(f, axis_name='i'))" in fixed


def test_an_unprovable_application_keeps_its_finding_with_the_reason():
    text = "import jax\nstep = jax.pmap(f, devices=jax.devices()[:2])\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix is None
    assert "not rewritten: `devices=`" in finding.message


def test_the_import_finding_carries_the_fix_for_the_uses_of_the_imported_name():
    text = "from jax import pmap as pm\n\nstep = pm(f, axis_name='i')\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert (finding.line, finding.fix is not None) == (1, True)
    fixed = fix_text(text, "m.py", (LegacyPmap,), TARGET)
    assert "pm(" not in fixed.text.split("def _shard_map_like_pmap")[0]
    assert "jax.jit(_shard_map_like_pmap(f, axis_name='i'))" in fixed.text
    assert fixed.findings == []
