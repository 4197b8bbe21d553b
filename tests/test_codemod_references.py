"""Fixes name their codemods and site planners as "module:function" strings (they are imported only
when a file needs them, and the cache stores fixes as JSON). A string that names nothing would only
fail when a user runs --fix; here every one is resolved."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import lint_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
TARGET = (0, 10)


def _resolve(reference: str):
    module, sep, function = reference.partition(":")
    assert sep and module and function, f"{reference!r} is not 'module:function'"
    return getattr(import_module(module), function)


def _declared() -> list[tuple[str, str]]:
    found = []
    for rule in registry.all_rules():
        for attribute in ("site_planner", "site_codemod"):
            reference = getattr(rule, attribute, None)
            if reference is not None:
                found.append((f"{rule.code}.{attribute}", reference))
    return found


def _offered() -> set[str]:
    """Every codemod a finding offers on the rules' own examples and on the lint fixtures."""
    rules = registry.all_rules()
    texts = [example.code for rule in rules for example in rule.INVALID]
    texts += [path.read_text(encoding="utf-8") for path in sorted(FIXTURES.glob("*/*.py"))]
    offered = set()
    for text in texts:
        for finding in lint_text(text, "example.py", rules, TARGET):
            fix = finding.fix
            while fix is not None:
                if fix.codemod:
                    offered.add(fix.codemod)
                fix = getattr(fix, "fallback", None)
    return offered


@pytest.mark.parametrize(("where", "reference"), _declared(), ids=[where for where, _ in _declared()])
def test_declared_site_references_resolve(where, reference):
    assert callable(_resolve(reference)), where


def test_every_offered_codemod_resolves():
    offered = _offered()
    # The pmap, pjit and moved-name codemods are all among them: the walk saw real fixes.
    assert len(offered) >= 4, offered
    for reference in sorted(offered):
        assert callable(_resolve(reference)), reference


def test_a_reference_that_names_nothing_fails():
    with pytest.raises(AttributeError):
        _resolve("jaxmigrate.migrate.moved_names:no_such_codemod")
