"""One mesh per program: where the driving code lays out values in several functions of the module,
the mesh is built once, in the function that calls the others (the lowest one that reaches each of
them through calls of the module), and handed down to them as a parameter, ``mesh``, the way a JAX
engineer passes it; not built again at the top of each.

It is handed only where every path to a function that needs it is known: each function given the
mesh is a plain ``def`` at module level whose every use in the module is a call (no decorator, no
``*args`` / ``**kwargs``, never passed as a value, called in no lambda), and each of those calls is
in the function that builds the mesh or in another function given it. Anything else keeps one
(identical) mesh per function, as before: correct, only less tidy.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from jaxmigrate.core.flow import child_of, enclosing_scope, reads_of
from jaxmigrate.core.module import is_main_guard


@dataclass
class MeshPassing:
    """Where the one mesh is built and the functions and calls it is handed to."""

    root: ast.AST  # a function, a script's `__main__` block, or the module
    first: ast.stmt  # the statement of ``root``'s body the mesh goes above
    receivers: list[ast.FunctionDef] = field(default_factory=list)
    calls: list[tuple[ast.Call, ast.FunctionDef]] = field(default_factory=list)  # (call, the receiver it calls)

    def by_keyword(self, func: ast.FunctionDef) -> bool:
        """Whether ``func`` takes the mesh as a keyword-only parameter: after defaults, a plain
        positional one would change which argument a positional call binds."""
        return bool(func.args.defaults or func.args.kwonlyargs)

    def can_take(self, name: str) -> bool:
        """Whether ``name`` is a name in none of the functions given the mesh (a parameter, a
        local, or a global one of them reads)."""
        return not any(_names(func, name) for func in self.receivers)


def pass_one_mesh(module, firsts: list[tuple[ast.AST, ast.stmt]],
                  scope_of: Callable[[ast.AST], ast.AST]) -> MeshPassing | None:
    """The plan for building one mesh and handing it down, or None where the driving scopes of
    ``firsts`` (each with the first statement that lays out a value there) are one already, or
    cannot be given one mesh this way. ``scope_of`` is the driving analysis's placement scope."""
    if len(firsts) < 2:
        return None
    graph = _CallGraph(module, scope_of)
    placing = [scope for scope, _ in firsts]
    reaching = [graph.callers_closure(scope) for scope in placing]
    common = [s for s in reaching[0].values() if all(id(s) in each for each in reaching[1:])]
    # The lowest of the scopes that reach every placing one: every other is above it.
    roots = [r for r in common if all(id(other) in graph.callers_closure(r) for other in common)]
    if len(roots) != 1:
        return None
    root = roots[0]
    below = {id(s): s for each in reaching for s in each.values()
             if s is not root and id(root) in graph.callers_closure(s)}
    receivers = []
    calls: list[tuple[ast.Call, ast.FunctionDef]] = []
    for scope in below.values():
        found = graph.calls_of(scope)
        if found is None or any(id(caller) not in below and caller is not root for _, caller in found):
            return None
        if initializes_jax(module, scope):
            return None
        receivers.append(scope)
        calls += [(call, scope) for call, _ in found]
    first_of_root = next((first for scope, first in firsts if scope is root), None)
    statements = [child_of(module, call, root) for call, caller in graph.all_calls(receivers) if caller is root]
    statements += [first_of_root] if first_of_root is not None else []
    first = min(statements, key=lambda s: s.lineno)
    return MeshPassing(root, first, sorted(receivers, key=lambda f: f.lineno),
                       sorted(calls, key=lambda pair: (pair[0].lineno, pair[0].col_offset)))


class _CallGraph:
    """Who calls the module-level functions of a module, by scope, as far as it can be told."""

    def __init__(self, module, scope_of) -> None:
        self.module = module
        self.scope_of = scope_of
        self._calls: dict[int, list[tuple[ast.Call, ast.AST]] | None] = {}
        self._closures: dict[int, dict[int, ast.AST]] = {}

    def scope(self, node: ast.AST) -> ast.AST:
        """The driving scope ``node`` runs in: a script's `__main__` block counts as its own, and a
        function nested in another is part of the outer one (it reads the outer one's mesh)."""
        scope = self.scope_of(node)
        while isinstance(scope, ast.FunctionDef) and isinstance(enclosing_scope(self.module, scope), ast.FunctionDef):
            scope = enclosing_scope(self.module, scope)
        if isinstance(scope, ast.Module):
            statement = child_of(self.module, node, scope)
            if is_main_guard(statement):
                return statement
        return scope

    def calls_of(self, func: ast.AST) -> list[tuple[ast.Call, ast.AST]] | None:
        """Each call of ``func`` in the module and the scope it is in; None where ``func`` could
        not take one more parameter from its callers (not a plain module-level def, with
        positional-only parameters, used other than by calling it, called with ``*args`` /
        ``**kwargs`` or in a lambda, never called)."""
        if id(func) not in self._calls:
            self._calls[id(func)] = self._find_calls(func)
        return self._calls[id(func)]

    def _find_calls(self, func: ast.AST) -> list[tuple[ast.Call, ast.AST]] | None:
        if not isinstance(func, ast.FunctionDef) or self.module.parent_of(func) is not self.module.tree \
                or func.decorator_list or func.args.vararg or func.args.kwarg or func.args.posonlyargs:
            return None
        found = []
        for use in reads_of(self.module, func.name, func):
            call = self.module.parent_of(use)
            if not (isinstance(call, ast.Call) and call.func is use) \
                    or any(isinstance(a, ast.Starred) for a in call.args) \
                    or any(k.arg is None for k in call.keywords):
                return None
            scope = self.scope(call)
            if isinstance(scope, ast.Lambda):
                return None
            found.append((call, scope))
        return found or None

    def all_calls(self, funcs: list[ast.AST]) -> list[tuple[ast.Call, ast.AST]]:
        return [found for func in funcs for found in self.calls_of(func) or ()]

    def callers_closure(self, scope: ast.AST) -> dict[int, ast.AST]:
        """``scope`` and every scope that reaches it through calls of the module, by id."""
        if id(scope) not in self._closures:
            seen = {id(scope): scope}
            todo = [scope]
            while todo:
                for _, caller in self.calls_of(todo.pop()) or ():
                    if id(caller) not in seen:
                        seen[id(caller)] = caller
                        todo.append(caller)
            self._closures[id(scope)] = seen
        return self._closures[id(scope)]


def _names(func: ast.FunctionDef, name: str) -> bool:
    """Whether ``name`` is already a name in ``func`` (a parameter, a local or a global it reads)."""
    params = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
    return any(a.arg == name for a in params) or any(
        isinstance(n, ast.Name) and n.id == name for n in ast.walk(func))


def initializes_jax(module, scope: ast.AST, before: int | None = None) -> bool:
    """Whether ``scope`` (above line ``before``, where given) calls ``jax.distributed.initialize()``:
    a mesh built in its caller, before the call, or a device list taken above it, would see only
    this process's devices."""
    return any(isinstance(n, ast.Call) and module.names.qualified_name(n.func) == "jax.distributed.initialize"
               and (before is None or n.lineno < before) for n in ast.walk(scope))
