"""The one name resolver: which qualified name does an expression refer to?

It follows what Python itself would bind, statically: ``import jax``, ``import jax as J``,
``import jax.experimental.pjit as pj``, ``from jax import pmap as pm``, ``from jax import *``,
local rebinding (``pm = jax.pmap``), ``functools.partial(jax.pmap, ...)`` and Python's scoping rules
(function, class, lambda and comprehension scopes, ``global`` / ``nonlocal``), so a local
``def pmap`` or a parameter named ``jax`` is not jax's.

The analysis is flow-insensitive within a scope: every binding of a name in a scope is a candidate.
A name bound both by ``from jax import pmap`` and by a ``def pmap`` resolves to two candidates,
``jax.pmap`` and ``LOCAL``; rules then report without a fix rather than guess. The one exception
is a name imported several times by unconditional statements of its scope and read below all of
them: only the last import reaches it (``_reaching``).

Following rebindings enumerates paths through them (``x = x.T`` bound k times in one scope has k!
orders), so one question gets at most ``STEPS`` steps; past them the answer is ``LOCAL`` alone, the
"cannot be jax's" answer, which no rule reports or rewrites.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator

from jaxmigrate.core.ast_fields import MANY, ONE, child_fields, children, children_in
from jaxmigrate.core.fallbacks import catches_import_error

LOCAL = "<local>"  # bound by something this resolver cannot see through: def, parameter, loop, ...

PARTIAL = frozenset({"functools.partial"})


@dataclass(frozen=True)
class Target:
    """One thing an expression may evaluate to: a qualified name (or ``LOCAL``), possibly wrapped
    in ``functools.partial`` calls (outermost first) that pre-bind arguments."""

    name: str
    partials: tuple[ast.Call, ...] = ()

    @property
    def bound_keywords(self) -> list[ast.keyword]:
        return [kw for call in reversed(self.partials) for kw in call.keywords]

    @property
    def bound_args(self) -> list[ast.expr]:
        return [arg for call in reversed(self.partials) for arg in call.args[1:]]


STEPS = 10_000  # a real module's hardest question takes a few hundred

_LOCAL_TARGET = Target(LOCAL)


class _OutOfSteps(Exception):
    pass
_NOTHING: frozenset[int] = frozenset()


@dataclass(frozen=True)
class ImportBinding:
    qualname: str
    node: ast.alias
    statement: ast.stmt | None = None  # the import statement, for the order of several imports


@dataclass(frozen=True)
class ValueBinding:
    value: ast.expr


@dataclass(frozen=True)
class OpaqueBinding:
    node: ast.AST


Binding = ImportBinding | ValueBinding | OpaqueBinding


@dataclass(eq=False)
class Scope:
    node: ast.AST
    parent: "Scope | None"
    is_class: bool = False
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    globals: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)

    def bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)


class NameResolver:
    """Built once per module; answers for any expression node of that module."""

    def __init__(self, tree: ast.Module) -> None:
        self.module_scope = Scope(tree, None)
        self.star_imports: list[str] = []
        self._scope_of: dict[int, Scope] = {}
        self.scopes: list[Scope] = [self.module_scope]
        self._resolved: dict[int, tuple[Target, ...]] = {}
        self._qualified: dict[int, str | None] = {}
        self._targets: dict[str, Target] = {}
        self._steps = -1  # steps left for the question being answered; -1: none being answered
        _ScopeBuilder(self).build(tree)

    # -- public API -------------------------------------------------------------------------

    def resolve(self, expr: ast.AST) -> tuple[Target, ...]:
        """Every target ``expr`` may evaluate to; empty when it cannot name anything imported."""
        # Several rules ask about the same nodes; the tree does not change while they do.
        cached = self._resolved.get(id(expr))
        if cached is None:
            outermost = self._steps < 0
            if outermost:
                self._steps = STEPS
            try:
                found = self._resolve(expr, _NOTHING)
            except _OutOfSteps:
                if not outermost:
                    raise
                found = [_LOCAL_TARGET]
            finally:
                if outermost:
                    self._steps = -1
            cached = self._resolved[id(expr)] = tuple(dict.fromkeys(found) if len(found) > 1 else found)
        return cached

    def candidates(self, expr: ast.AST) -> frozenset[str]:
        """The qualified names ``expr`` may refer to (``LOCAL`` included when it may be local)."""
        return frozenset(t.name for t in self.resolve(expr))

    def qualified_name(self, expr: ast.AST) -> str | None:
        """The one qualified name ``expr`` refers to, or None when it is unknown or ambiguous."""
        # Asked of every call's callee by several rules: one dict lookup after the first time.
        key = id(expr)
        if key in self._qualified:
            return self._qualified[key]
        targets = self.resolve(expr)
        name = None
        if len(targets) == 1 and targets[0].name != LOCAL and not targets[0].partials:
            name = targets[0].name
        self._qualified[key] = name
        return name

    def builtin(self, expr: ast.AST) -> str | None:
        """The builtin ``expr`` names (``len``, ``builtins.len``): a name no scope binds, in a module
        whose star imports cannot bind it either; None for anything else."""
        if isinstance(expr, ast.Name):
            return expr.id if not self.bindings(expr) and not self._star_bound(expr.id) else None
        qualified = self.qualified_name(expr)
        return qualified.removeprefix("builtins.") if qualified and qualified.startswith("builtins.") else None

    def mentions(self, expr: ast.expr) -> list[ast.AST]:
        """Where the name ``expr`` refers to is spelled out: the attribute chain itself, or the
        import alias / assigned value a bare name was bound by (followed through rebinding).
        Lint rules report at these nodes, so a fix can find the uses a finding stands for."""
        found: list[ast.AST] = []
        seen: set[int] = set()
        stack = [expr]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, ast.Call):  # functools.partial(X, ...): X is what is named
                if node.args and self.candidates(node.func) & PARTIAL:
                    stack.append(node.args[0])
            elif not isinstance(node, ast.Name):
                found.append(node)
            else:
                bindings = self.bindings(node)
                if not bindings and self.star_imports:
                    found.append(node)
                for binding in bindings:
                    if isinstance(binding, ImportBinding):
                        found.append(binding.node)
                    elif isinstance(binding, ValueBinding):
                        stack.append(binding.value)
        return found

    def bindings(self, name: ast.Name) -> list[Binding]:
        """The bindings a Name may read, from the scope Python would look in."""
        scope = self._binding_scope(name.id, self._scope_of.get(id(name), self.module_scope))
        return _reaching(name, scope, scope.bindings[name.id]) if scope else []

    def every_binding(self, name: ast.Name) -> list[Binding]:
        """Every binding of the variable a Name reads, wherever it is in its scope (no reaching
        rule: what the variable holds at some time)."""
        scope = self._binding_scope(name.id, self._scope_of.get(id(name), self.module_scope))
        return list(scope.bindings[name.id]) if scope else []

    def scope_opened_by(self, node: ast.AST) -> Scope | None:
        """The scope a def, lambda, class (or the module's tree) opens; None for any other node."""
        return next((scope for scope in self.scopes if scope.node is node), None)

    def declared_shared(self, name: str) -> bool:
        """Whether some scope declares ``name`` ``global`` or ``nonlocal``: code elsewhere may then
        rebind the variable a use reads."""
        return any(name in scope.globals or name in scope.nonlocals for scope in self.scopes)

    def imports(self) -> Iterator[tuple[ImportBinding, Scope]]:
        """Every import binding in the module, in every scope."""
        for scope in self.scopes:
            for bindings in scope.bindings.values():
                for binding in bindings:
                    if isinstance(binding, ImportBinding):
                        yield binding, scope

    # -- resolution -------------------------------------------------------------------------

    # Lists rather than generators, and one Target object per name: every callee of a file is
    # resolved at least once, so this is on the hot path of checking.
    def _resolve(self, expr: ast.AST, seen: frozenset[int]) -> list[Target]:
        self._steps -= 1
        if self._steps < 0:
            raise _OutOfSteps
        if isinstance(expr, ast.Name):
            return self._resolve_name(expr, seen)
        if isinstance(expr, ast.Attribute):
            # Unless inside a rebinding walk, the base's answer is the cached one: each link of
            # `a.b.c.d` is asked about, and resolving every link anew made a chain quadratic.
            bases = self._resolve(expr.value, seen) if seen else self.resolve(expr.value)
            return [_LOCAL_TARGET if base.name == LOCAL or base.partials else self._target(f"{base.name}.{expr.attr}")
                    for base in bases]
        if isinstance(expr, ast.Call) and expr.args:
            if isinstance(expr.func, ast.Attribute) and expr.func.attr != "partial":
                # `x.attr` can only name `<base>.attr` or something local, never functools.partial:
                # resolving its base would cost a walk through every rebinding of `x`, and
                # `x = x.map(...)` repeated k times made that k! walks.
                return []
            func = frozenset(t.name for t in self._resolve(expr.func, seen))
            if func & PARTIAL:
                return [Target(target.name, (expr, *target.partials))
                        for target in self._resolve(expr.args[0], seen | {id(expr)})]
        return []

    def _resolve_name(self, name: ast.Name, seen: frozenset[int]) -> list[Target]:
        scope = self._binding_scope(name.id, self._scope_of.get(id(name), self.module_scope))
        if scope is None:
            # Unbound here: a builtin, or a name a star import brought in.
            return [self._target(bound) for bound in self._star_bound(name.id)]
        found: list[Target] = []
        for binding in _reaching(name, scope, scope.bindings[name.id]):
            if isinstance(binding, ImportBinding):
                found.append(self._target(binding.qualname))
            elif isinstance(binding, ValueBinding) and id(binding.value) not in seen:
                found += self._resolve(binding.value, seen | {id(binding.value)}) or [_LOCAL_TARGET]
            else:
                found.append(_LOCAL_TARGET)
        return found

    def _star_bound(self, name: str) -> list[str]:
        """What the module's star imports may bind ``name`` to: the qualified name each gives it
        where the program's module says (``jax`` for ``from utils import *`` where ``utils.py``
        says ``import jax``), ``<module>.<name>`` where that is not known (a library's star import,
        a module not found), nothing where the module's star import does not bind it."""
        if not self.star_imports:
            return []
        from jaxmigrate import program_modules

        found = []
        for module in self.star_imports:
            bound = program_modules.star_binding(module, name)
            if bound is None:
                found.append(f"{module}.{name}")
            elif bound != program_modules.NOT_EXPORTED:
                found.append(bound)
        return found

    def _target(self, name: str) -> Target:
        target = self._targets.get(name)
        if target is None:
            target = self._targets[name] = Target(name)
        return target

    def _binding_scope(self, name: str, scope: Scope) -> Scope | None:
        start = scope
        while scope is not None:
            if name in scope.globals:
                return self.module_scope if name in self.module_scope.bindings else None
            if name in scope.bindings and name not in scope.nonlocals:
                return scope
            scope = scope.parent
            # Class bodies are not enclosing scopes for the functions nested in them.
            while scope is not None and scope.is_class and scope is not start:
                scope = scope.parent
        return None


def _reaching(use: ast.Name, scope: Scope, bindings: list[Binding]) -> list[Binding]:
    """The one exception to flow-insensitivity: a name imported several times by statements of the
    scope's own body (none under an ``if`` or ``try``), read after all of them, can only read the
    last. ``from jax.experimental.maps import Mesh`` followed by ``from jax.sharding import Mesh``
    makes ``Mesh`` below them jax.sharding's; a use in a function defined below runs after both too.
    Anything else (a def or assignment among the bindings, an import under a condition) keeps
    every candidate."""
    if len(bindings) < 2 or not all(isinstance(b, ImportBinding) and b.statement for b in bindings):
        return bindings
    body = getattr(scope.node, "body", None)
    if not isinstance(body, list):
        return bindings
    direct = {id(stmt) for stmt in body}
    if not all(id(b.statement) in direct for b in bindings):
        return bindings
    last = bindings[-1].statement
    if (use.lineno, use.col_offset) < (last.end_lineno, last.end_col_offset):
        return bindings
    return bindings[-1:]


class _ScopeBuilder:
    """One recursive pass that records bindings per scope and the scope of every Name."""

    def __init__(self, resolver: NameResolver) -> None:
        self.resolver = resolver

    def _scope(self, node: ast.AST, parent: Scope, is_class: bool = False) -> Scope:
        scope = Scope(node, parent, is_class)
        self.resolver.scopes.append(scope)
        return scope

    def build(self, tree: ast.Module) -> None:
        self._body(tree.body, self.resolver.module_scope)

    def _body(self, stmts: list[ast.stmt], scope: Scope) -> None:
        for stmt in stmts:
            self._stmt(stmt, scope)

    def _fallback(self, stmts: list[ast.stmt], scope: Scope, imported: set[str]) -> None:
        """An ``except ImportError:`` body after a ``try:`` that imports ``imported``: an import
        there of one of those names is the fallback for an older library, not a second binding.
        The code runs the ``try:`` import wherever it succeeds, so the name resolves to that one
        (the lint rules do not report such fallbacks either: ``lint.legacy``). Without this, the
        two imports made the name ambiguous, and a rewrite of the ``try:`` one changed what
        other rules saw (JM308 on a mesh built from it disappeared)."""
        for stmt in stmts:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                kept = [a for a in stmt.names if (a.asname or a.name.partition(".")[0]) not in imported]
                if len(kept) < len(stmt.names):
                    if kept:
                        self._stmt(type(stmt)(**{**stmt.__dict__, "names": kept}), scope)
                    continue
            self._stmt(stmt, scope)

    def _stmt(self, node: ast.stmt, scope: Scope) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._exprs([*node.decorator_list, *_defaults(node.args), node.returns], scope)
            self._annotations(node.args, scope)
            scope.bind(node.name, OpaqueBinding(node))
            inner = self._scope(node, scope)
            self._params(node.args, inner)
            self._body(node.body, inner)
        elif isinstance(node, ast.ClassDef):
            self._exprs([*node.decorator_list, *node.bases, *(k.value for k in node.keywords)], scope)
            scope.bind(node.name, OpaqueBinding(node))
            self._body(node.body, self._scope(node, scope, is_class=True))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    scope.bind(alias.asname, ImportBinding(alias.name, alias, node))
                else:
                    top = alias.name.partition(".")[0]
                    scope.bind(top, ImportBinding(top, alias, node))
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    if scope is self.resolver.module_scope:
                        self.resolver.star_imports.append(module)
                    continue
                qualname = f"{module}.{alias.name}" if node.module else module + alias.name
                scope.bind(alias.asname or alias.name, ImportBinding(qualname, alias, node))
        elif isinstance(node, ast.Assign):
            self._expr(node.value, scope)
            for target in node.targets:
                self._target(target, scope, node.value if len(node.targets) == 1 else None)
        elif isinstance(node, ast.AnnAssign):
            self._exprs([node.value, node.annotation], scope)
            self._target(node.target, scope, node.value)
        elif isinstance(node, ast.AugAssign):
            self._expr(node.value, scope)
            self._target(node.target, scope, None)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._expr(node.iter, scope)
            self._target(node.target, scope, None)
            self._body(node.body + node.orelse, scope)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self._expr(item.context_expr, scope)
                if item.optional_vars is not None:
                    self._target(item.optional_vars, scope, None)
            self._body(node.body, scope)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._body(node.body, scope)
            imported = {alias.asname or alias.name.partition(".")[0] for stmt in node.body
                        if isinstance(stmt, (ast.Import, ast.ImportFrom)) for alias in stmt.names}
            for handler in node.handlers:
                self._expr(handler.type, scope)
                if handler.name:
                    scope.bind(handler.name, OpaqueBinding(handler))
                if imported and catches_import_error(handler.type):
                    self._fallback(handler.body, scope, imported)
                else:
                    self._body(handler.body, scope)
            self._body(node.orelse + node.finalbody, scope)
        elif isinstance(node, ast.Global):
            scope.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scope.nonlocals.update(node.names)
        elif isinstance(node, ast.Match):
            self._expr(node.subject, scope)
            for case in node.cases:
                for sub in ast.walk(case.pattern):
                    captured = getattr(sub, "name", None) or getattr(sub, "rest", None)
                    if isinstance(captured, str):
                        scope.bind(captured, OpaqueBinding(sub))
                    if isinstance(sub, ast.MatchValue):
                        self._expr(sub.value, scope)
                self._expr(case.guard, scope)
                self._body(case.body, scope)
        else:
            # if / while / return / expression statements / raise / assert / delete ...
            for child in children(node):
                if isinstance(child, ast.stmt):
                    self._stmt(child, scope)
                elif isinstance(child, ast.expr):
                    self._expr(child, scope)

    def _target(self, target: ast.expr, scope: Scope, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            scope.bind(target.id, ValueBinding(value) if value is not None else OpaqueBinding(target))
            self.resolver._scope_of[id(target)] = scope
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, scope, None)
        elif isinstance(target, ast.Starred):
            self._target(target.value, scope, None)
        else:  # attribute or subscript: evaluates names, binds none
            self._expr(target, scope)

    def _params(self, args: ast.arguments, scope: Scope) -> None:
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                scope.bind(arg.arg, OpaqueBinding(arg))

    def _annotations(self, args: ast.arguments, scope: Scope) -> None:
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                self._expr(arg.annotation, scope)

    def _exprs(self, exprs, scope: Scope) -> None:
        for expr in exprs:
            if expr is not None:
                self._expr(expr, scope)

    def _expr(self, node: ast.AST | None, scope: Scope) -> None:
        # Iterative: deeply nested expressions must not hit the recursion limit. The children are
        # pushed inline, without the Load/Store markers: this loop sees every expression node.
        stack = [node] if node is not None else []
        push, extend, pop, scope_of = stack.append, stack.extend, stack.pop, self.resolver._scope_of
        in_module = scope is self.resolver.module_scope  # the default scope of a Name: not recorded
        generic = _GENERIC_FIELDS
        while stack:
            node = pop()
            kind = node.__class__
            if kind is ast.Name:
                if not in_module:
                    scope_of[id(node)] = scope
                continue
            fields = generic.get(kind)
            if fields is None:  # a node that binds or opens a scope (or a class not seen yet)
                if kind is ast.Constant:
                    continue
                if kind is ast.Lambda:
                    stack.extend(_defaults(node.args))
                    inner = self._scope(node, scope)
                    self._params(node.args, inner)
                    self._expr(node.body, inner)
                    continue
                if kind in _COMPREHENSIONS:
                    self._comprehension(node, scope)
                    continue
                if kind is ast.NamedExpr:
                    # The walrus binds in the nearest enclosing non-comprehension scope.
                    owner = scope
                    while isinstance(owner.node, _COMPREHENSIONS) and owner.parent is not None:
                        owner = owner.parent
                    owner.bind(node.target.id, ValueBinding(node.value))
                    scope_of[id(node.target)] = owner
                    push(node.value)
                    continue
                fields = generic[kind] = child_fields(kind)
            for name, field_kind in fields:
                if field_kind == ONE:
                    value = getattr(node, name)
                    if value is not None:
                        push(value)
                elif field_kind == MANY:
                    extend(getattr(node, name))
                else:
                    extend(children_in(node, name, field_kind))

    def _comprehension(self, node: ast.expr, scope: Scope) -> None:
        first, *rest = node.generators
        self._expr(first.iter, scope)
        inner = self._scope(node, scope)
        for generator in node.generators:
            self._target(generator.target, inner, None)
        for generator in rest:
            self._expr(generator.iter, inner)
        for generator in node.generators:
            self._exprs(generator.ifs, inner)
        if isinstance(node, ast.DictComp):
            self._exprs([node.key, node.value], inner)
        else:
            self._expr(node.elt, inner)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
# Node class -> its child fields, for the classes the expression walk just descends into.
_GENERIC_FIELDS: dict[type, tuple[tuple[str, int], ...]] = {}


def _defaults(args: ast.arguments) -> list[ast.expr]:
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
