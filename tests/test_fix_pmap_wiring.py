"""JM101's fix reaches every pmap application the codemod can prove, through the mention it reports."""

import ast
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.rule import Safety
from jaxmigrate.lint.rules.legacy_pmap import LegacyPmap
from jaxmigrate.migrate.pmap_to_shard_map import rewrite_module

CASES = sorted((Path(__file__).parents[1] / "fixtures" / "migrate" / "pmap_to_shard_map").glob("*.in.py"))
TARGET = (0, 10)


@pytest.mark.parametrize("case", CASES, ids=[c.name.removesuffix(".in.py") for c in CASES])
def test_fixing_the_findings_rewrites_what_the_codemod_rewrites(case):
    text = case.read_text()
    result = fix_text(text, case.name, (LegacyPmap,), TARGET, unsafe=True)
    assert result.text == rewrite_module(text).text
    assert not result.errors
    # What is left is what the codemod kept, each finding saying why.
    for finding in result.findings:
        assert finding.fix is None


def test_the_fix_is_unsafe_and_not_applied_without_unsafe_fixes():
    text = "import jax\nstep = jax.pmap(f, axis_name='i')\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix.safety is Safety.UNSAFE
    assert fix_text(text, "m.py", (LegacyPmap,), TARGET).text == text


def test_a_suppressed_mention_is_not_rewritten():
    text = (
        "import jax\n"
        "a = jax.pmap(f, axis_name='i')\n"
        "b = jax.pmap(g, axis_name='i')  # noqa: JM101\n"
    )
    fixed = fix_text(text, "m.py", (LegacyPmap,), TARGET, unsafe=True).text
    assert "b = jax.pmap(g, axis_name='i')  # noqa: JM101" in fixed
    assert _same_code("a = jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh, in_specs=P('i'), out_specs=P('i'), check_vma=False))") in _same_code(fixed)


def test_an_unprovable_application_keeps_its_finding_with_the_reason():
    text = "import jax\nstep = jax.pmap(f, devices=jax.devices()[:2])\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix is None
    assert "not rewritten: `devices=`" in finding.message


def test_the_import_finding_carries_the_fix_for_the_uses_of_the_imported_name():
    text = "from jax import pmap as pm\n\nstep = pm(f, axis_name='i')\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert (finding.line, finding.fix is not None) == (1, True)
    fixed = fix_text(text, "m.py", (LegacyPmap,), TARGET, unsafe=True)
    assert "pm" not in fixed.text.replace("import", "")
    assert "step = jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh," in _same_code(fixed.text)
    assert fixed.findings == []


@pytest.mark.parametrize(
    "evidence",
    [
        pytest.param("jax.distributed.initialize()\n", id="jax.distributed"),
        pytest.param("if jax.process_index() == 0:\n    print('host 0')\n", id="process_index"),
        pytest.param("from jax.experimental import multihost_utils\n", id="multihost_utils import"),
        pytest.param("import jax.experimental.multihost_utils as mhu\nx = mhu.host_local_array_to_global_array\n",
                     id="host_local_array_to_global_array"),
    ],
)
def test_a_multi_process_module_is_told_the_fix_holds_in_one_process_only(evidence):
    text = "import jax\n" + evidence + "step = jax.pmap(f, axis_name='i')\n"
    (finding,) = [f for f in lint_text(text, "m.py", (LegacyPmap,), TARGET) if f.fix is not None]
    assert finding.fix.safety is Safety.UNSAFE
    assert "runs as several processes" in finding.message
    assert "right in one process only" in finding.message
    assert "jax.make_array_from_process_local_data" in finding.message


def test_a_single_process_module_is_not_told_about_processes():
    text = "import jax\nn = jax.local_device_count()\nstep = jax.pmap(f, axis_name='i')\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert "processes" not in finding.message


def test_a_local_function_named_like_a_multi_process_api_is_not_evidence():
    text = "import jax\ndef process_index():\n    return 0\nprocess_index()\nstep = jax.pmap(f, axis_name='i')\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert "processes" not in finding.message


def _same_code(text: str) -> str:
    """The code as ``ast.unparse`` writes it: the layout a long line was broken into does not count."""
    return ast.unparse(ast.parse(text))
