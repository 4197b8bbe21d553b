"""Shared machinery of the sharding-API codemods: decide on ``ast``, splice text, fix imports with LibCST.

Decisions are made on the ``ast`` tree through the one resolver (``jaxmigrate.names``). The rewrite
itself replaces exact source spans (so everything outside a rewritten expression keeps its bytes,
comments and layout), then LibCST inserts generated helpers after the imports and schedules import
changes with ``AddImportsVisitor`` / ``RemoveImportsVisitor``, which add an import once and remove
one only when nothing uses it any more.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field
from functools import lru_cache

from jaxmigrate.lint.context import SourceText
from jaxmigrate.names import ImportBinding, NameResolver


@dataclass(frozen=True)
class Site:
    """A place a lint rule reports (1-based line, 1-based character column) and what the codemod
    can do there: rewrite it, or keep it for ``reason``."""

    line: int
    column: int
    rewritable: bool
    reason: str | None = None


class Unprovable(Exception):
    """Raised while planning a site whose rewrite cannot be shown to keep its meaning."""


class Module:
    """One parsed module: source positions, the resolver, parents, comments, identifiers in use.

    ``tree`` and ``names`` may be given when the caller (a lint rule) already has them for ``text``.
    """

    def __init__(self, text: str, tree: ast.Module | None = None, names: NameResolver | None = None) -> None:
        self.text = text
        self.tree = ast.parse(text) if tree is None else tree
        self.src = SourceText(text)
        self.names = NameResolver(self.tree) if names is None else names
        self._aliases: dict[str, str] | None = None
        self.parent: dict[int, ast.AST] = {}
        self.identifiers: set[str] = set()
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
            if isinstance(node, ast.Name):
                self.identifiers.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.identifiers.add(node.name)
            elif isinstance(node, ast.arg):
                self.identifiers.add(node.arg)
            elif isinstance(node, ast.alias):
                self.identifiers.add((node.asname or node.name).partition(".")[0])
        self.comments: list[int] = []
        self.indent = ""  # the file's indentation unit (its first indented block's), "    " if none
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT:
                    self.comments.append(self.src.line_starts[tok.start[0] - 1] + tok.start[1])
                elif tok.type == tokenize.INDENT and not self.indent:
                    self.indent = tok.string
        except (tokenize.TokenError, SyntaxError):  # pragma: no cover - ast.parse succeeded
            pass
        self.indent = self.indent or "    "

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
        rebinds. Memoized (the module is read-only): planners ask once per site, and a scan of
        every binding per site made planning quadratic in pmap-dense files."""
        if self._aliases is None:
            scope, self._aliases = self.names.module_scope, {}
            inner = {name for s in self.names.scopes if s is not scope for name in s.bindings}
            for name, bindings in scope.bindings.items():
                first = bindings[0] if bindings else None
                if isinstance(first, ImportBinding) and name not in inner and all(
                    isinstance(b, ImportBinding) and b.qualname == first.qualname for b in bindings
                ):
                    self._aliases.setdefault(first.qualname, name)
        return self._aliases.get(qualname)

    def free(self, name: str) -> bool:
        return name not in self.identifiers and not self.names.star_imports


@lru_cache(maxsize=2)
def parse_module(text: str) -> Module | None:
    """The parsed module (None: it does not parse), shared by every planner that looks at the same
    text in a row: several rules plan one file on the check path, and a rewrite analyses first.
    Planners only read it."""
    try:
        return Module(text)
    except SyntaxError:
        return None


@dataclass
class Plan:
    """Text edits plus the imports and helpers they need."""

    edits: list[tuple[int, int, str]] = field(default_factory=list)
    add_imports: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    remove_imports: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    helpers: dict[str, str] = field(default_factory=dict)  # name -> source of a top-level def


class Namer:
    """Spells jax names in the module's own terms: its aliases first, a new import when the short
    name is free, else the attribute path from the module's ``jax`` alias."""

    def __init__(self, module: Module, plan: Plan) -> None:
        self.module = module
        self.plan = plan

    def jax(self) -> str:
        alias = self.module.module_alias("jax")
        if alias:
            return alias
        if self.module.free("jax"):
            self.plan.add_imports.add(("jax", None, None))
            return "jax"
        raise Unprovable("the name `jax` is bound to something else here, so jax cannot be named")

    def numpy(self) -> str:
        alias = self.module.module_alias("numpy")
        if alias:
            return alias
        if self.module.free("np"):
            self.plan.add_imports.add(("numpy", None, "np"))
            return "np"
        raise Unprovable("the name `np` is bound to something other than numpy here")

    def sharding(self, obj: str, short: str | None = None) -> str:
        """``jax.sharding.<obj>`` as this module can spell it (``short`` is a preferred alias)."""
        for qualname in (f"jax.sharding.{obj}", f"jax.{obj}"):
            alias = self.module.module_alias(qualname)
            if alias:
                return alias
        name = short or obj
        if self.module.free(name):
            self.plan.add_imports.add(("jax.sharding", obj, short if short and short != obj else None))
            return name
        return f"{self.jax()}.sharding.{obj}"


def apply(text: str, plan: Plan) -> str:
    """Splice the plan's edits into ``text``, insert helpers, add and remove imports."""
    if not plan.edits and not plan.helpers:
        return text
    out = splice(text, plan.edits)
    if not (plan.helpers or plan.add_imports or plan.remove_imports):
        return out  # nothing for LibCST to do: no parse of the whole module
    # LibCST loads only here, when a fix is written: lint rules call the planners on the check
    # path, which must not pay for importing it.
    from jaxmigrate.migrate._cst_apply import add_helpers_and_imports

    return add_helpers_and_imports(out, plan)


def splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with every ``(start, end, new)`` edit made; edits must not overlap."""
    out, last = [], len(text)
    for start, end, new in sorted(edits, reverse=True):
        if end > last:
            raise AssertionError("overlapping edits")
        out += [text[end:last], new]
        last = start
    return text[:last] + "".join(reversed(out))


def literal_ints(node: ast.expr) -> tuple[int, ...] | None:
    """``(4, 2)`` / ``[4, 2]`` / ``8`` / ``-1`` as ints, or None when not a literal."""
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [literal_int(e) for e in node.elts]
        return None if any(v is None for v in values) else tuple(values)  # type: ignore[arg-type]
    value = literal_int(node)
    return None if value is None else (value,)


def literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = literal_int(node.operand)
        return None if inner is None else -inner
    return None
