"""JM101's fix reaches every pmap application the codemod can prove, through the mention it reports."""

import ast
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.rule import Safety
from jaxmigrate.lint.rules.legacy_pmap import CODEMOD, LegacyPmap
from jaxmigrate.migrate.pmap_to_shard_map import rewrite_module
from jaxmigrate.migrate.to_global_jit import fix as global_view_fix, plan_global
from pmap_driver import driven

CASES = sorted((Path(__file__).parents[1] / "fixtures" / "migrate" / "pmap_to_shard_map").glob("*.in.py"))
TARGET = (0, 10)


@pytest.mark.parametrize("case", CASES, ids=[c.name.removesuffix(".in.py") for c in CASES])
def test_fixing_the_findings_rewrites_what_the_codemod_rewrites(case):
    text = case.read_text()
    result = fix_text(text, case.name, (LegacyPmap,), TARGET, unsafe=True)
    # (where the whole module moves to the global view, that is JM101's fix: the exact one is its fallback)
    assert result.text == (global_view_fix(text, set()) if plan_global(text).possible else rewrite_module(text).text)
    assert not result.errors
    # What is left is what the codemod kept, each finding saying why.
    for finding in result.findings:
        assert finding.fix is None


def test_the_fix_is_unsafe_and_not_applied_without_unsafe_fixes():
    text = driven("step = jax.pmap(f, axis_name='i')\nreturn step(x)\n")
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix.safety is Safety.UNSAFE
    assert fix_text(text, "m.py", (LegacyPmap,), TARGET).text == text


def test_a_module_level_pmap_keeps_its_finding_with_the_reason_and_no_fix():
    text = "import jax\nstep = jax.pmap(f, axis_name='i')\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix is None
    assert "not rewritten: the exact rewrite needs a mesh where the step is built, here at import" in finding.message
    assert fix_text(text, "m.py", (LegacyPmap,), TARGET, unsafe=True).text == text


def test_a_suppressed_mention_is_not_rewritten():
    text = driven("a = jax.pmap(f, axis_name='i')\nb = jax.pmap(g, axis_name='i')  # noqa: JM101\nreturn a(x), b(x)\n")
    fixed = fix_text(text, "m.py", (LegacyPmap,), TARGET, unsafe=True).text
    assert "b = jax.pmap(g, axis_name='i')  # noqa: JM101" in fixed
    assert _same_code("a = jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh, in_specs=P('i'), out_specs=P('i'), check_vma=False))") in _same_code(fixed)


def test_an_unprovable_application_keeps_its_finding_with_the_reason():
    text = "import jax\nstep = jax.pmap(f, devices=jax.devices()[:2])\n"
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix is None
    assert "not rewritten: `devices=`" in finding.message


def test_the_import_finding_carries_the_fix_for_the_uses_of_the_imported_name():
    text = driven("step = pm(f, axis_name='i')\nreturn step(x)\n", head="import jax\nfrom jax import pmap as pm\n")
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert (finding.line, finding.fix is not None) == (2, True)
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
def test_a_multi_process_module_is_not_offered_the_exact_rewrite_and_is_told_why(evidence):
    # pmap takes and returns each process's own slices; `jax.jit` over a mesh takes global arrays.
    text = driven("step = jax.pmap(f, axis_name='i')\nreturn step(x)\n", head="import jax\n" + evidence)
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    assert finding.fix is None or (finding.fix.codemod != CODEMOD and finding.fix.fallback is None)
    assert "not rewritten: this module runs as several processes" in finding.message
    assert "right in one process only" in finding.message
    assert "jax.shard_map(" not in fix_text(text, "m.py", (LegacyPmap,), TARGET, unsafe=True).text


def _exact_fix_of(text: str):
    (finding,) = lint_text(text, "m.py", (LegacyPmap,), TARGET)
    fix = finding.fix if finding.fix is None or finding.fix.codemod == CODEMOD else finding.fix.fallback
    return finding, fix


def test_a_single_process_module_is_not_told_about_processes():
    finding, fix = _exact_fix_of(driven("n = jax.local_device_count()\nreturn jax.pmap(f, axis_name='i')(x)\n"))
    assert fix is not None and fix.codemod == CODEMOD
    assert "processes" not in finding.message


def test_a_local_function_named_like_a_multi_process_api_is_not_evidence():
    text = driven("process_index()\nreturn jax.pmap(f, axis_name='i')(x)\n",
                  head="import jax\n\n\ndef process_index():\n    return 0\n")
    finding, fix = _exact_fix_of(text)
    assert fix is not None and fix.codemod == CODEMOD
    assert "processes" not in finding.message


def _same_code(text: str) -> str:
    """The code as ``ast.unparse`` writes it: the layout a long line was broken into does not count."""
    return ast.unparse(ast.parse(text))
