"""One parsed module and the facts planners ask of it, shared by detection and rewriting.

Built either from text (``parse_module``, on the fix path) or from what the lint context already
has (``ParsedModule(text, tree, resolver, source)``): a planner called by a rule reuses the rule's
parse and resolver instead of parsing the file again. Every fact is computed on first use.
"""

from __future__ import annotations

import ast
import io
import tokenize
from functools import cached_property, lru_cache

from jaxmigrate.core.source import SourceText
from jaxmigrate.names import ImportBinding, NameResolver


class ParsedModule:
    """Source positions, the resolver, parents, comments and identifiers of one module."""

    def __init__(self, text: str, tree: ast.Module | None = None, names: NameResolver | None = None,
                 source: SourceText | None = None) -> None:
        self.text = text
        self.tree = ast.parse(text) if tree is None else tree
        self.src = SourceText(text) if source is None else source
        self._names = names
        # Analyses that several planners of one module share (built once, only read).
        self.shared: dict[str, object] = {}

    @property
    def names(self) -> NameResolver:
        if self._names is None:
            self._names = NameResolver(self.tree)
        return self._names

    @cached_property
    def parent(self) -> dict[int, ast.AST]:
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        return parents

    @cached_property
    def identifiers(self) -> set[str]:
        """Every name the module binds or reads, in any scope: a new name must avoid them all."""
        found: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.alias):
                found.add((node.asname or node.name).partition(".")[0])
        return found

    @cached_property
    def comments(self) -> list[int]:
        """Text offsets of every comment, in order."""
        found = []
        try:
            for tok in tokenize.generate_tokens(io.StringIO(self.text).readline):
                if tok.type == tokenize.COMMENT:
                    found.append(self.src.line_starts[tok.start[0] - 1] + tok.start[1])
        except (tokenize.TokenError, SyntaxError):  # pragma: no cover - ast.parse succeeded
            pass
        return found

    # -- positions ---------------------------------------------------------------------------

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.src.span(node)

    def position(self, node: ast.AST) -> tuple[int, int]:
        return self.src.position(self.span(node)[0])

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def has_comment(self, node: ast.AST) -> bool:
        start, end = self.span(node)
        return any(start <= c < end for c in self.comments)

    def parent_of(self, node: ast.AST) -> ast.AST | None:
        return self.parent.get(id(node))

    def top_level(self, node: ast.AST) -> ast.stmt:
        """The module-level statement ``node`` is part of."""
        while not isinstance(self.parent.get(id(node)), ast.Module):
            node = self.parent[id(node)]
        return node  # type: ignore[return-value]

    def insertion_point(self, stmt: ast.stmt) -> int:
        """The offset where a new module-level statement goes to run just before ``stmt``: the start
        of its first line, above its decorators and the comment lines directly over it."""
        line = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        body = self.tree.body
        index = next(i for i, s in enumerate(body) if s is stmt)
        floor = body[index - 1].end_lineno if index else 0
        while line - 1 > floor and self.src.line(line - 1).lstrip().startswith("#"):
            line -= 1
        return self.src.line_starts[line - 1]

    def mention_positions(self, expr: ast.expr) -> frozenset[tuple[int, int]]:
        """Where the lint rules report the legacy name ``expr`` stands for (alias or attribute)."""
        return frozenset(self.position(node) for node in self.names.mentions(expr))

    # -- naming ------------------------------------------------------------------------------

    def module_alias(self, qualname: str) -> str | None:
        """A module-level name every binding of which imports ``qualname``, and that no inner scope
        rebinds."""
        return self._aliases.get(qualname)

    @cached_property
    def _aliases(self) -> dict[str, str]:
        # Once per module: planners ask once per site, and a scan of every binding per site made
        # planning quadratic in pmap-dense files.
        scope, aliases = self.names.module_scope, {}
        inner = {name for s in self.names.scopes if s is not scope for name in s.bindings}
        for name, bindings in scope.bindings.items():
            first = bindings[0] if bindings else None
            if isinstance(first, ImportBinding) and name not in inner and all(
                isinstance(b, ImportBinding) and b.qualname == first.qualname for b in bindings
            ):
                aliases.setdefault(first.qualname, name)
        return aliases

    @cached_property
    def indent(self) -> str:
        """The file's indentation unit (its first indented block's), four spaces when it has none."""
        try:
            for tok in tokenize.generate_tokens(io.StringIO(self.text).readline):
                if tok.type == tokenize.INDENT:
                    return tok.string
        except (tokenize.TokenError, SyntaxError):  # pragma: no cover - ast.parse succeeded
            pass
        return "    "

    def free(self, name: str) -> bool:
        return name not in self.identifiers and not self.names.star_imports


def as_module(source: "ParsedModule | str") -> "ParsedModule | None":
    """A planner's input: the lint context's module as it is, or text parsed (None: no parse)."""
    return source if isinstance(source, ParsedModule) else parse_module(source)


@lru_cache(maxsize=2)
def parse_module(text: str) -> ParsedModule | None:
    """The parsed module (None: it does not parse), shared by every planner that looks at the same
    text in a row on the fix path. Planners only read it."""
    try:
        return ParsedModule(text)
    except SyntaxError:
        return None
