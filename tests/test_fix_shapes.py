"""Issue 19: every shape of code a fixer meets - a fix is applied or not offered, never computed and
thrown away (JM001), and a finding is fixed or still reported, never lost."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import fix_text, lint_text

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
