"""Issue 19: every shape of code a fixer meets - a fix is applied or not offered, never computed and
thrown away (JM001), and a finding is fixed or still reported, never lost."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.findings import Fix, Safety
from jaxmigrate.lint.rule import Rule

RULES = registry.all_rules()
TARGET = (0, 10)


def check(text: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in lint_text(text, "t.py", RULES, TARGET)]


def fixed(text: str, unsafe: bool = True):
    text = textwrap.dedent(text)
    result = fix_text(text, "t.py", RULES, TARGET, unsafe=unsafe)
    assert not [e.message for e in result.errors], "a fix was computed and thrown away"
    ast.parse(result.text)
    again = fix_text(result.text, "t.py", RULES, TARGET, unsafe=unsafe)
    assert again.text == result.text and not again.fixed, "a second fix changed the file"
    return result


def test_an_import_in_a_try_body_is_replaced_by_pass():
    result = fixed(
        """
        import jax
        try:
            from jax import tree_map
        except ImportError:
            pass
        y = tree_map(len, {})
        """, unsafe=False)
    assert result.text == textwrap.dedent(
        """
        import jax
        try:
            pass
        except ImportError:
            pass
        y = jax.tree.map(len, {})
        """)


def test_a_legacy_import_after_a_semicolon_goes_with_it():
    result = fixed("import os; from jax import pmap\nf = pmap(lambda x: x)\n")
    assert result.text.startswith("import jax\nimport os\n")
    assert "pmap" not in result.text


# -- the fix loop: one bad site must not sink the others -------------------------------------


class SiteCodemodRule(Rule):
    """Reports every ``old_api`` name with a codemod fix; the codemod breaks the file at a name
    written ``old_api`` on a line that says ``# bad`` (a stand-in for a planner's bug at one site)."""

    code = "JM905"
    name = "test-site-codemod"
    summary = "test rule: a codemod per site"
    trigger_words = ("old_api",)
    fixable = Safety.SAFE

    def visit_Name(self, node: ast.Name, ctx) -> None:
        if node.id == "old_api":
            ctx.report(node, "old api", Fix(Safety.SAFE, "use new_api", codemod=f"{__name__}:rename_sites"))


def rename_sites(text: str, sites) -> str:
    lines = text.splitlines(keepends=True)
    for line, column in sorted(sites, reverse=True):
        row = lines[line - 1]
        new = "new_api(((" if "# bad" in row else "new_api"
        lines[line - 1] = row[: column - 1] + new + row[column - 1 + len("old_api"):]
    return "".join(lines)


def test_a_codemod_that_breaks_one_site_still_rewrites_the_others():
    text = "a = old_api\nb = old_api  # bad\nc = old_api\n"
    result = fix_text(text, "t.py", (SiteCodemodRule,), TARGET)
    assert result.text == "a = new_api\nb = old_api  # bad\nc = new_api\n"
    assert result.fixed == 2
    assert [(e.code, e.line) for e in result.errors] == [("JM001", 2)]
    assert [(f.code, f.line) for f in result.findings] == [("JM905", 2)]


def test_nested_pmap_is_declined_with_a_reason_not_advertised():
    text = "import jax\ndef f(x):\n    return x\ng = jax.pmap(jax.pmap(f))\n"
    findings = lint_text(text, "t.py", RULES, TARGET)
    assert [(f.code, f.fix) for f in findings] == [("JM101", None), ("JM101", None)]
    assert all("overlaps that of the site at line 4" in f.message for f in findings)
    assert fixed(text).text == text


def test_a_pmap_in_an_f_string_is_declined_and_the_others_are_rewritten():
    result = fixed('from jax import pmap\nprint(f"{pmap(abs)}")\nh = pmap(lambda x: x * 2)\n')
    assert 'print(f"{pmap(abs)}")' in result.text and "h = jax.jit(" in result.text
    (left,) = result.findings
    assert left.fix is None and "inside an f-string" in left.message
