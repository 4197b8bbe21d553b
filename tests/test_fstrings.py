"""Rewrites inside f-strings still parse on Python 3.11 (issue 19): the fix the lint offers is the
fix --fix makes."""

from __future__ import annotations

import ast

import pytest

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.fstrings import FStrings, requoted
from test_fix_shapes import RULES, TARGET, fixed, lint_text


def _edit(text: str, old: str, new: str) -> Edit:
    start = text.index(old)
    return Edit(start, start + len(old), new)


def test_a_literal_in_the_fstrings_own_quote_takes_the_other():
    text = 'print(f"{f(x)}")\n'
    [edit] = requoted(FStrings(text), [_edit(text, "f(x)", 'g(x, "a", b"b")')])
    assert edit.content == "g(x, 'a', b'b')"


def test_outside_fstrings_and_where_it_cannot_the_content_is_kept():
    text = 'print(f"{f(x)}", f(x))\n'
    inside, outside = text.index("f(x)"), text.rindex("f(x)")
    edits = [Edit(inside, inside + 4, 'g("it\'s")'), Edit(outside, outside + 4, 'g("a")')]
    assert requoted(FStrings(text), edits) == edits


def test_only_spans_inside_an_fstring_are_inside():
    text = "a = 'f(x)' + rf'{f(x)}' + f'''{\nf(y)}'''\n"
    fstrings = FStrings(text)
    plain, raw, triple = text.index("f(x)"), text.rindex("f(x)"), text.index("f(y)")
    assert fstrings.around(plain, plain + 4) is None
    assert fstrings.around(raw, raw + 4) == "'"
    assert fstrings.around(triple, triple + 4) == "'''"


@pytest.mark.parametrize("header, call", [
    ("", "jax.device_put_replicated(1, jax.devices())"),
    ("from jax.sharding import PositionalSharding\n", "jax.device_put(1, PositionalSharding(jax.devices()))"),
])
def test_a_fix_offered_inside_an_fstring_is_made(header, call):
    text = f'import jax\n{header}print(f"{{{call}}}")\n'
    offered = [f for f in lint_text(text, "t.py", RULES, TARGET) if f.fix is not None]
    result = fixed(text)
    assert offered and not result.errors and not result.findings
    ast.parse(result.text)
    assert "print(f\"{jax.device_put(" in result.text and '"devices"' not in result.text
