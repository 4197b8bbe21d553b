"""pjit -> jit (JM201) and the axis_resources keywords (JM202): fixture pairs, idempotence, the fix
loop end to end, kept sites with their reasons, unsafe sites only with --unsafe-fixes.

Regenerate the expected outputs with
``JAXMIGRATE_UPDATE_FIXTURES=1 pytest tests/test_migrate_pjit.py`` and review the diff like code. In
an ``.in.py``, ``# kept: <part of the reason>`` marks a line whose site must stay pjit for that
reason and ``# unsafe: <part of the assumption>`` one rewritten only as an unsafe fix; every other
site must be safely rewritable. The ``.out.py`` is the result with unsafe fixes.
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.rule import Safety
from jaxmigrate.lint.rules.legacy_pjit import LegacyPjit
from jaxmigrate.lint.rules.pjit_axis_resources import PjitAxisResources
from jaxmigrate.migrate.pjit_to_jit import analyse_pjit, rewrite_pjit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "pjit_to_jit"
CASES = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("JAXMIGRATE_UPDATE_FIXTURES") == "1"
MARK = re.compile(r"#\s*(?P<kind>kept|unsafe):\s*(?P<text>.+)$")
RULES = (LegacyPjit, PjitAxisResources)
TARGET = (0, 10)


def _marks(text: str) -> dict[int, tuple[str, str]]:
    lines = enumerate(text.splitlines(), 1)
    return {i: (m["kind"], m["text"].strip()) for i, line in lines if (m := MARK.search(line))}


def _legacy_left(text: str) -> set[str]:
    tree = ast.parse(text)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    keywords = {k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords}
    return (names | keywords) & {"pjit", "in_axis_resources", "out_axis_resources"}


def test_every_case_has_a_fixture_pair():
    outs = sorted(p.name.removesuffix(".out.py") for p in FIXTURES.glob("*.out.py"))
    assert CASES and outs == CASES


@pytest.mark.parametrize("case", CASES)
def test_fixture(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected = FIXTURES / f"{case}.out.py"
    result = rewrite_pjit(source, unsafe=True)
    if UPDATE:
        expected.write_text(result)
    assert result == expected.read_text()
    ast.parse(result)
    assert rewrite_pjit(result, unsafe=True) == result, "not idempotent"
    assert all(not site.rewritable for site in analyse_pjit(result)), "a rewritable site survived"


@pytest.mark.parametrize("case", CASES)
def test_sites_match_the_marks(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    marks = _marks(source)
    seen = set()
    for site in analyse_pjit(source):
        kind, text = marks.get(site.line, ("safe", ""))
        if kind == "kept":
            assert not site.rewritable and text in site.reason, site
        elif kind == "unsafe":
            assert site.rewritable and not site.safe and text in site.assumption, site
        else:
            assert site.safe, site
        seen.add(site.line)
    assert set(marks) <= seen, sorted(set(marks) - seen)


@pytest.mark.parametrize("case", CASES)
def test_fix_loop_end_to_end(case):
    """`jaxmigrate --fix` (JM201 + JM202): safe fixes first, unsafe ones only when asked; whatever
    is left is a finding that says why; a second run changes nothing."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    marks = _marks(source)
    kinds = {kind for kind, _ in marks.values()}
    safe = fix_text(source, f"{case}.py", RULES, TARGET)
    assert not safe.errors
    assert all(f.fix is None or f.fix.safety is Safety.UNSAFE for f in safe.findings), safe.findings
    full = fix_text(source, f"{case}.py", RULES, TARGET, unsafe=True)
    assert not full.errors
    assert all(f.fix is None for f in full.findings), full.findings
    for finding in full.findings:
        if finding.code == "JM201":
            assert "not rewritten:" in finding.message, finding
    again = fix_text(full.text, f"{case}.py", RULES, TARGET, unsafe=True)
    assert again.text == full.text and again.fixed == 0
    if "kept" not in kinds:
        assert full.text == (FIXTURES / f"{case}.out.py").read_text()
        assert full.findings == [] and analyse_pjit(full.text) == []
        if "unsafe" not in kinds:
            assert safe.text == full.text


@pytest.mark.parametrize("case", CASES)
def test_findings_are_at_the_sites_mentions(case):
    """Every application the codemod plans stems from a mention JM201 reports (or from none, when
    the mention is a compatibility fallback the rule does not report)."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    reported = {(f.line, f.column) for f in lint_text(source, f"{case}.py", (LegacyPjit,), TARGET)}
    for site in analyse_pjit(source):
        if site.rewritable:
            assert site.mentions & reported, site


def test_a_file_with_both_codes_ends_fully_migrated():
    source = (FIXTURES / "axis_resources.in.py").read_text()
    result = fix_text(source, "m.py", RULES, TARGET)
    assert result.findings == [] and result.fixed >= 2
    assert not _legacy_left(result.text)
    assert result.text == (FIXTURES / "axis_resources.out.py").read_text()


def test_kept_findings_carry_their_reasons():
    source = (FIXTURES / "kept.in.py").read_text()
    (finding,) = [f for f in lint_text(source, "kept.py", (LegacyPjit,), TARGET) if f.code == "JM201"]
    assert finding.fix is None
    reasons = finding.message.split("; not rewritten: ", 1)[1]
    for kind, text in _marks(source).values():
        assert kind == "kept" and text in reasons, text


def test_unsafe_fix_says_what_it_assumes():
    text = textwrap.dedent("""\
        import jax
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh, PartitionSpec as P
        mesh = Mesh(jax.devices(), ("x",))
        step = pjit(abs, in_shardings=P("x"))
        def run(x):
            with mesh:
                return step(x)
    """)
    (finding,) = lint_text(text, "m.py", (LegacyPjit,), TARGET)
    assert finding.fix.safety is Safety.UNSAFE
    assert "the unsafe fix at line 5 assumes `step` is called under `with mesh:`" in finding.message
    assert fix_text(text, "m.py", (LegacyPjit,), TARGET).text == text
    fixed = fix_text(text, "m.py", (LegacyPjit,), TARGET, unsafe=True).text
    assert 'step = jax.jit(abs, in_shardings=NamedSharding(mesh, P("x")))' in fixed


@pytest.mark.parametrize("text", [
    pytest.param("""\
        import jax
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        devices_mesh = Mesh(jax.devices(), ("devices",))
        params = jax.device_put(1.0, NamedSharding(devices_mesh, P("devices")))
        class Model:
            def __init__(self):
                self.step = pjit(abs, in_shardings=P(), out_shardings=None)
    """, id="the one mesh in scope is entered by no with"),
    pytest.param("""\
        import jax
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh, PartitionSpec as P
        mesh = Mesh(jax.devices(), ("devices",))
        def run(x):
            with mesh:
                return pjit(abs, in_shardings=P(("x",)), out_shardings=None)(x)
    """, id="the spec names an axis the mesh lacks"),
])
def test_no_mesh_is_assumed_without_evidence(text):
    """A pjit is not bound to a mesh made for other code (the reviewer's `NamedSharding(devices_mesh,
    P(('x',)))`: "Resource axis: x not found in mesh"): the finding says why, with no fix."""
    text = textwrap.dedent(text)
    (finding,) = lint_text(text, "m.py", (LegacyPjit,), TARGET)
    assert finding.fix is None and "not rewritten: " in finding.message
    assert fix_text(text, "m.py", (LegacyPjit,), TARGET, unsafe=True).text == text


def test_a_suppressed_mention_is_not_rewritten():
    text = textwrap.dedent("""\
        import jax
        import jax.experimental.pjit as pj
        a = pj.pjit(abs)
        b = pj.pjit(abs)  # noqa: JM201
    """)
    fixed = fix_text(text, "m.py", RULES, TARGET).text
    assert "a = jax.jit(abs)" in fixed and "b = pj.pjit(abs)  # noqa: JM201" in fixed
    assert "import jax.experimental.pjit as pj" in fixed


def test_a_name_that_may_be_pjit_or_something_else_is_kept():
    text = textwrap.dedent("""\
        if OLD_JAX:
            from jax.experimental.pjit import pjit as maybe
        else:
            from jax import jit as maybe
        either = maybe(abs)
    """)
    (site,) = analyse_pjit(text)
    assert not site.rewritable and "may be jax.experimental.pjit.pjit, jax.jit" in site.reason
    assert rewrite_pjit(text, unsafe=True) == text


def test_an_except_import_error_fallback_is_no_pjit_site():
    # The try import is what runs on current JAX; the fallback is for older ones (names.py).
    text = textwrap.dedent("""\
        try:
            from jax import jit as maybe
        except ImportError:
            from jax.experimental.pjit import pjit as maybe
        either = maybe(abs)
    """)
    assert analyse_pjit(text) == []
    assert rewrite_pjit(text, unsafe=True) == text


def test_the_keyword_rename_is_refused_when_the_new_name_is_there_too():
    text = "from jax.experimental.pjit import pjit\nf = pjit(abs, in_shardings=a, in_axis_resources=b)\n"
    (finding,) = lint_text(text, "m.py", (PjitAxisResources,), TARGET)
    assert finding.fix is None
    assert "given twice" in lint_text(text, "m.py", (LegacyPjit,), TARGET)[0].message


@pytest.mark.parametrize(("before", "after"), [
    pytest.param("a = pjit(jax.jit(f))", "a = jax.jit(f)", id="pjit of a bare jit"),
    pytest.param("b = jax.jit(pjit(g, donate_argnums=0))", "b = jax.jit(g, donate_argnums=0)",
                 id="a bare jit of pjit"),
    pytest.param("c = jax.jit(pjit(h), static_argnums=0)", "c = jax.jit(jax.jit(h), static_argnums=0)",
                 id="an outer jit with options stays"),
    pytest.param("d = pjit(jax.jit(k, donate_argnums=0))", "d = jax.jit(jax.jit(k, donate_argnums=0))",
                 id="an inner jit with options stays"),
])
def test_no_jit_is_nested_in_a_bare_jit(before, after):
    """pjit -> jit never writes `jax.jit(jax.jit(f))` where one jit has no options (the same program)."""
    text = f"import jax\nfrom jax.experimental.pjit import pjit\n{before}\n"
    assert fix_text(text, "m.py", RULES, TARGET, unsafe=True).text == f"import jax\n{after}\n"
