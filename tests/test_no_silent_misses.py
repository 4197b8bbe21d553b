"""No silent misses: every reference to a legacy symbol in every fixture ends as exactly one of
fixed, a finding, suppressed by the user, or a compat fallback (an import in `except ImportError`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jaxmigrate import catalogue
from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import _SKIP_FILE, fix_text
from jaxmigrate.lint.suppressions import _NOQA
from jaxmigrate.core.source import SourceText
from jaxmigrate.names import LOCAL, NameResolver

FIXTURES = Path(__file__).parents[1] / "fixtures"
TARGET = (0, 10)


def _parseable_fixtures() -> list[Path]:
    files = []
    for path in sorted(FIXTURES.rglob("*.py")):
        try:
            ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue  # JM000 fixtures: nothing to resolve
        files.append(path)
    return files


def _fallback_imports(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                names = {getattr(n, "id", None) for n in ast.walk(handler.type)} if handler.type else set()
                if names & {"ImportError", "ModuleNotFoundError"}:
                    ids.update(id(n) for stmt in handler.body for n in ast.walk(stmt))
    return ids


def legacy_references(text: str):
    """(node, mention nodes) of every reference that may resolve to an applicable legacy symbol."""
    tree = ast.parse(text)
    resolver = NameResolver(tree)
    fallback = _fallback_imports(tree)
    for node in ast.walk(tree):
        if id(node) in fallback:
            continue
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            targets = [t for t in resolver.resolve(node) if t.name != LOCAL and not t.partials]
            hits = [catalogue.lookup(t.name) for t in targets]
            if any(s is not None and s.applies_to(TARGET) for s in hits):
                yield node, _mentions_along_the_chain(resolver, node)


def _mentions_along_the_chain(resolver: NameResolver, node: ast.expr) -> list[ast.AST]:
    """`maps.xmap` is reported where the removed module `maps` was imported: a reference counts
    as reported at its own mention or at the mention of any module it is reached through."""
    mentions = []
    while True:
        mentions.extend(resolver.mentions(node))
        if not isinstance(node, ast.Attribute):
            return mentions
        node = node.value


@pytest.mark.parametrize("path", _parseable_fixtures(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_legacy_reference_is_fixed_reported_or_suppressed(path):
    text = path.read_text(encoding="utf-8")
    if _SKIP_FILE.search(text):
        return
    result = fix_text(text, path.name, registry.all_rules(), TARGET, unsafe=True)
    source = SourceText(result.text)
    reported = {(f.line, f.column) for f in result.findings}
    missed = []
    for node, mentions in legacy_references(result.text):
        if any(_noqa(source, m.lineno) for m in [node, *mentions]):
            continue
        positions = {source.position(source.offset(m.lineno, m.col_offset)) for m in mentions}
        if not positions & reported:
            missed.append(f"line {node.lineno}: {ast.unparse(node)}")
    assert not missed, f"{path}: legacy references neither fixed, reported nor suppressed: {missed}"


def _noqa(source: SourceText, line: int) -> bool:
    return _NOQA.search(source.line(line)) is not None
