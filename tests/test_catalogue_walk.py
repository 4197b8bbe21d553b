"""Every entry of the catalogue is flagged on code that uses it, and fixed where it has a fix.

For each entry of ``symbols.toml`` (each of its names, each form a program writes it in) a small
program is generated: the name reached through ``import jax`` as an attribute chain, imported with
``from ... import ... as``, a legacy module imported whole, a removed keyword passed to its callee,
a legacy context manager entered, a function whose result changed called (by code written for
JAX 0.4). The check must report the entry's code on the line that uses
it. Where the entry has a rename fix (and ``import jax.config``'s rewrite), ``--fix
--unsafe-fixes`` must take the finding away, leave a file that parses, and a second fix must
change nothing. An entry the data marks ``manual`` must be reported without a fix.
"""

from __future__ import annotations

import ast

import pytest

from jaxmigrate import catalogue
from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules

TARGET = (0, 10)
FROM_JAX = (0, 4)  # the code is written for JAX 0.4: before every change a behaviour entry names
RULES = all_rules()
# Renames the data allows whose rule declines them in the generated program, and why.
DECLINED = {
    ("JM306", "import jax\ny = jax.experimental.shard_map.shard_map(f, check_rep=1)\n"):
        "the experimental wrapper takes only check_rep: JM305 renames it with the call it rewrites",
}


def _cases():
    for symbol in catalogue.symbols():
        for form, text, line in _programs(symbol):
            yield pytest.param(symbol, text, line, id=f"{symbol.code}:{symbol.name}:{symbol.keyword}:{form}")


def _programs(symbol):
    """(form, program, line of the use) for each way a program writes this entry."""
    if symbol.kind == "keyword":
        for callee in symbol.names:
            top = callee.partition(".")[0]
            yield "keyword", f"import {top}\ny = {callee}(f, {symbol.keyword}=1)\n", 2
        return
    if symbol.kind == "context-manager":
        for constructor in symbol.constructors:
            top = constructor.partition(".")[0]
            yield "with", f"import {top}\nwith {constructor}(devices, ('x',)):\n    pass\n", 2
        return
    if symbol.kind == "import":
        for name in symbol.names:
            yield "import", f"import {name}\n", 1
        return
    if symbol.kind == "behaviour":  # reported for code written before the change (FROM_JAX)
        for name in symbol.names:
            yield "call", f"import {name.partition('.')[0]}\ny = {name}(x)\n", 2
        return
    for name in symbol.names:
        parent, _, last = name.rpartition(".")
        top = name.partition(".")[0]
        if parent:
            yield "attribute", f"import {top}\ny = {name}\n", 2
            yield "from-import", f"from {parent} import {last} as legacy\ny = legacy\n", 1
        if symbol.kind == "module":
            yield "module-import", f"import {name} as legacy\ny = legacy\n", 1


def _mine(findings, symbol, line):
    return [f for f in findings if f.code == symbol.code and f.line == line]


def _fixed_by_data(symbol) -> bool:
    return symbol.fix == "rename" or (symbol.fix == "rewrite" and symbol.kind == "import")


@pytest.mark.parametrize(("symbol", "text", "line"), list(_cases()))
def test_entry_is_flagged_and_fixed_where_it_has_a_fix(symbol, text, line):
    findings = _mine(lint_text(text, "walk.py", RULES, TARGET, FROM_JAX), symbol, line)
    assert findings, f"{symbol.code} {symbol.name}: not reported in\n{text}"
    if symbol.fix == "manual":
        assert all(f.fix is None for f in findings), findings
    if not _fixed_by_data(symbol) or (symbol.code, text) in DECLINED:
        return
    assert all(f.fix is not None for f in findings), findings
    result = fix_text(text, "walk.py", RULES, TARGET, unsafe=True)
    ast.parse(result.text)
    assert result.fixed and not [f for f in result.findings if f.code == symbol.code], (result.text, result.findings)
    again = fix_text(result.text, "walk.py", RULES, TARGET, unsafe=True)
    assert again.text == result.text and again.fixed == 0, "the second fix changed the file"


def test_the_walk_covers_every_entry_and_both_outcomes():
    params = list(_cases())
    assert {p.values[0] for p in params} == set(catalogue.symbols())
    assert sum(_fixed_by_data(s) for s in catalogue.symbols()) >= 40
    assert sum(s.fix == "manual" for s in catalogue.symbols()) >= 60
