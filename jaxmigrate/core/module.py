"""One parsed module and the facts planners ask of it, shared by detection and rewriting.

Built either from text (``parse_module``, on the fix path) or from what the lint context already
has (``ParsedModule(text, tree, resolver, source)``): a planner called by a rule reuses the rule's
parse and resolver instead of parsing the file again. Every fact is computed on first use.
"""

from __future__ import annotations

import ast
import bisect
import io
import tokenize
from contextlib import contextmanager
from functools import cached_property
from typing import Iterator

from jaxmigrate.core.ast_fields import MANY, ONE, child_fields, children_in
from jaxmigrate.core.source import CELL_BOUNDARY, SourceText, continuation_unit, indent_unit
from jaxmigrate.names import ImportBinding, NameResolver


Index = tuple[list[ast.AST], dict[type, list[tuple[int, ast.AST]]]]


def index(tree: ast.AST) -> Index:
    """Every node in ``ast.walk`` (breadth-first) order, and (position, node) by node type, in one
    pass that reads only the fields that hold nodes (``ast.walk`` costs 3x as much). The
    Load/Store/Del markers (three in ten nodes) are left out: code reads ``node.ctx``, never visits
    the markers."""
    nodes = [tree]
    append, extend = nodes.append, nodes.extend
    by_type: dict[type, list[tuple[int, ast.AST]]] = {}
    fields_of: dict[type, tuple[tuple[str, int], ...]] = {}
    for position, node in enumerate(nodes):  # the list grows while it is walked
        cls = node.__class__
        bucket = by_type.get(cls)
        if bucket is None:
            bucket = by_type[cls] = []
            fields_of[cls] = child_fields(cls)
        bucket.append((position, node))
        for name, kind in fields_of[cls]:
            if kind == ONE:
                value = getattr(node, name)
                if value is not None:
                    append(value)
            elif kind == MANY:
                extend(getattr(node, name))
            else:
                extend(children_in(node, name, kind))
    return nodes, by_type


class ParsedModule:
    """Source positions, the resolver, parents, comments and identifiers of one module."""

    def __init__(self, text: str, tree: ast.Module | None = None, names: NameResolver | None = None,
                 source: SourceText | None = None, walked: Index | None = None) -> None:
        self.text = text
        self.tree = ast.parse(text) if tree is None else tree
        self.src = SourceText(text) if source is None else source
        self._names = names
        self._walked = walked
        # Analyses that several planners of one module share (built once, only read).
        self.shared: dict[str, object] = {}

    @property
    def nodes(self) -> list[ast.AST]:
        """Every node but the Load/Store/Del markers, in ``ast.walk`` order: what a planner loops
        over instead of walking the tree again."""
        if self._walked is None:
            self._walked = index(self.tree)
        return self._walked[0]

    def of_type(self, *types: type) -> list[ast.AST]:
        """The nodes of exactly these types, in ``ast.walk`` order."""
        if self._walked is None:
            self._walked = index(self.tree)
        by_type = self._walked[1]
        if len(types) == 1:
            return [node for _, node in by_type.get(types[0], ())]
        return [node for _, node in sorted(item for t in types for item in by_type.get(t, ()))]

    @cached_property
    def names_at(self) -> dict[str, list[tuple[int, ast.Name]]]:
        """(walk position, node) of the Name nodes by identifier."""
        if self._walked is None:
            self._walked = index(self.tree)
        found: dict[str, list[tuple[int, ast.Name]]] = {}
        for item in self._walked[1].get(ast.Name, ()):
            found.setdefault(item[1].id, []).append(item)
        return found

    @property
    def names(self) -> NameResolver:
        if self._names is None:
            self._names = NameResolver(self.tree)
        return self._names

    @cached_property
    def parent(self) -> dict[int, ast.AST]:
        """The parent of every node, by the node's id (the fields that hold nodes read as the
        index reads them: a third less time than asking ``children`` of each node)."""
        parent: dict[int, ast.AST] = {}
        fields_of: dict[type, tuple[tuple[str, int], ...]] = {}
        for node in self.nodes:
            cls = node.__class__
            fields = fields_of.get(cls)
            if fields is None:
                fields = fields_of[cls] = child_fields(cls)
            for name, kind in fields:
                if kind == ONE:
                    value = getattr(node, name)
                    if value is not None:
                        parent[id(value)] = node
                elif kind == MANY:
                    for child in getattr(node, name):
                        parent[id(child)] = node
                else:
                    for child in children_in(node, name, kind):
                        parent[id(child)] = node
        return parent

    @cached_property
    def identifiers(self) -> set[str]:
        """Every name the module binds or reads, in any scope: a new name must avoid them all."""
        if self._walked is None:
            self._walked = index(self.tree)
        get = self._walked[1].get  # by exact type: an isinstance chain per node cost 10x as much
        found = {node.id for _, node in get(ast.Name, ())}
        for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            found.update(node.name for _, node in get(kind, ()))
        found.update(node.arg for _, node in get(ast.arg, ()))
        found.update((node.asname or node.name).partition(".")[0] for _, node in get(ast.alias, ()))
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
        return self.comment_between(*self.span(node))

    def comment_between(self, start: int, end: int) -> bool:
        """Whether a comment starts between the text offsets ``start`` and ``end``."""
        if "#" not in self.text[start:end]:
            return False  # no comment can start here: no need to tokenize the whole file
        comments = self.comments
        return bisect.bisect_left(comments, start) < bisect.bisect_left(comments, end)

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
        while line - 1 > floor and self.src.line(line - 1).lstrip().startswith("#") \
                and self.src.line(line - 1).strip() != CELL_BOUNDARY:
            line -= 1  # a notebook's cell boundary is no comment of the statement: above it is the last cell's end
        return self.src.line_starts[line - 1]

    def mention_positions(self, expr: ast.expr) -> frozenset[tuple[int, int]]:
        """Where the lint rules report the legacy name ``expr`` stands for (alias or attribute)."""
        return frozenset(self.position(node) for node in self.names.mentions(expr))

    # -- naming ------------------------------------------------------------------------------

    def module_alias(self, qualname: str) -> str | None:
        """A module-level name every binding of which imports ``qualname``, one of them in a
        statement of the module's own body (an import under a ``try:`` or an ``if`` may not run;
        beside an unconditional one it only binds the same module again: ``import jax`` and, in
        an ``if``, ``import jax.experimental.pjit``), and that no inner scope rebinds."""
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
            ) and any(isinstance(self.parent.get(id(self.parent.get(id(b.node)))), ast.Module) for b in bindings):
                aliases.setdefault(first.qualname, name)
        return aliases

    @cached_property
    def indent(self) -> str:
        """The file's indentation unit (``core.source.indent_unit``)."""
        return indent_unit(self.text)

    @cached_property
    def continuation(self) -> str:
        """The file's step for lines inside brackets (``core.source.continuation_unit``)."""
        return continuation_unit(self.text)

    def free(self, name: str) -> bool:
        return name not in self.identifiers and not self.names.star_imports


def is_main_guard(node: ast.AST) -> bool:
    """``node`` is ``if __name__ == "__main__":`` (either way round)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
            and isinstance(node.test.ops[0], ast.Eq) and len(node.test.comparators) == 1):
        return False
    sides = (node.test.left, node.test.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant) and b.value == "__main__"
               for a, b in (sides, sides[::-1]))


def is_script(module: "ParsedModule") -> bool:
    """The module runs as a program: it has an ``if __name__ == "__main__":`` block."""
    return any(is_main_guard(node) for node in module.tree.body)


def as_module(source: "ParsedModule | str") -> "ParsedModule | None":
    """A planner's input: the lint context's module as it is, or text parsed (None: no parse)."""
    return source if isinstance(source, ParsedModule) else parse_module(source)


# The modules last parsed or checked, most recent last. On the fix path a codemod asks for the
# module of exactly the text the checker just linted: it gets the checker's (its tree, resolver,
# node index and the planners' analyses, built while the rules planned their fixes) instead of
# parsing and analysing the file a second time. Only while fixing (``reusing_checked_modules``):
# a check keeps no tree alive after its file, and the fix loop drops them after each pass, so no
# more than one version of a big file is ever held.
_RECENT: list[tuple[str, "ParsedModule | None"]] = []
_KEEP = 2
_remembering = False


@contextmanager
def reusing_checked_modules() -> Iterator[None]:
    global _remembering
    _remembering = True
    try:
        yield
    finally:
        _remembering = False
        forget()


def remember(module: ParsedModule) -> None:
    """Offer ``module`` to the next ``parse_module`` of the same text (planners only read it)."""
    if _remembering:
        _keep(module.text, module)


def forget() -> None:
    _RECENT.clear()


def release(text: str) -> None:
    """Drop the module of ``text``: it is not asked for again (a codemod is writing its result)."""
    _RECENT[:] = [(t, m) for t, m in _RECENT if t is not text and t != text]


def recent_module(text: str) -> ParsedModule | None:
    """The module of ``text`` if one was just parsed or checked (None otherwise): for a reader of
    intermediate texts that should not keep what it parses."""
    for seen, module in reversed(_RECENT):
        if seen is text or seen == text:
            return module
    return None


def parse_module(text: str) -> ParsedModule | None:
    """The parsed module (None: it does not parse), shared by every planner that looks at the same
    text in a row on the fix path. Planners only read it."""
    for seen, module in reversed(_RECENT):
        if seen is text or seen == text:
            return module
    try:
        module = ParsedModule(text)
    except SyntaxError:
        module = None
    _keep(text, module)
    return module


def _keep(text: str, module: ParsedModule | None) -> None:
    _RECENT[:] = [(t, m) for t, m in _RECENT if t is not text and t != text][-(_KEEP - 1):] + [(text, module)]
