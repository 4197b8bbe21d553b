"""Where arrays were explicitly committed: a small, flow-sensitive walk of one scope's body.

Only straight-line facts are kept. A statement binds ``name = jax.device_put(value, placement)``
(or names a device / sharding: ``d0 = jax.devices()[0]``, ``s = NamedSharding(mesh, P("x"))``);
any other binding of a name - a second assignment, a loop target, an assignment inside an ``if``
- forgets what was known about it. What is not known is never reported: the rules built on this
stay silent rather than guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from jaxmigrate.lint.patterns import DEVICE_LISTS, argument, call_name, calls_to
from jaxmigrate.names import NameResolver

DEVICE_PUT = "jax.device_put"
SHARDINGS = frozenset({
    "jax.sharding.NamedSharding", "jax.NamedSharding", "jax.sharding.PositionalSharding",
})
SINGLE_DEVICE_SHARDING = frozenset({"jax.sharding.SingleDeviceSharding"})


@dataclass(frozen=True)
class Placement:
    """``device`` (one device: ``key`` is (device list call, its arguments' text, index)) or
    ``sharded`` (a multi-device sharding; ``key`` is its source text)."""

    kind: str
    key: tuple
    text: str  # how the user wrote it, for messages

    def conflicts_with(self, other: "Placement") -> bool:
        if self.kind == other.kind == "device":
            return self.key[:2] == other.key[:2] and self.key[2] != other.key[2]
        # A single device against a sharding over several devices: never the same device set.
        return {self.kind, other.kind} == {"device", "sharded"}


@dataclass(frozen=True)
class Committed:
    placement: Placement  # an array committed there


class PlacementWalk:
    """Runs ``visit(node, env)`` on every expression statement part of a scope, in order, with
    ``env`` mapping names to what is known of them at that point (``Placement`` for device and
    sharding objects, ``Committed`` for arrays)."""

    def __init__(self, names: NameResolver, source_of) -> None:
        self.names = names
        self.source_of = source_of  # node -> its source text

    def busy_scopes(self, tree: ast.Module, calls, functions) -> Iterator[list[ast.stmt]]:
        """The scopes with at least two ``jax.device_put`` calls of their own: a scope's facts come
        from its own statements only, so two arrays committed apart need two calls in it. Each
        call counts for the innermost def whose lines hold it (a lambda or class body in between
        only makes a scope look busier, never quieter), so most scopes are never walked."""
        puts = [c for c in calls if call_name(self.names, c) == DEVICE_PUT]
        if len(puts) < 2:
            return
        counts: dict[int, int] = {}
        for put in puts:
            around = [f for f in functions if f.lineno <= put.lineno <= (f.end_lineno or f.lineno)]
            owner = max(around, key=lambda f: (f.lineno, f.col_offset), default=tree)
            counts[id(owner)] = counts.get(id(owner), 0) + 1
        for scope in [tree, *functions]:
            if counts.get(id(scope), 0) >= 2:
                yield scope.body

    def walk(self, body: list[ast.stmt]) -> Iterator[tuple[ast.stmt, dict]]:
        env: dict[str, object] = {}
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                env.pop(stmt.name, None)
                continue
            simple = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name
            )
            if not simple:
                for name in _bound_names(stmt):
                    env.pop(name, None)
            yield stmt, env
            if simple:
                fact = self.classify(stmt.value, env)
                if fact is None:
                    env.pop(stmt.targets[0].id, None)
                else:
                    env[stmt.targets[0].id] = fact

    def classify(self, expr: ast.expr, env: dict) -> Placement | Committed | None:
        if isinstance(expr, ast.Name):
            return env.get(expr.id)
        if isinstance(expr, ast.Subscript) and calls_to(self.names, expr.value, DEVICE_LISTS):
            index = expr.slice
            if isinstance(index, ast.Constant) and isinstance(index.value, int):
                call = expr.value
                key = (call_name(self.names, call), self.source_of(call.args + call.keywords), index.value)
                return Placement("device", key, self.source_of([expr]))
            return None
        name = call_name(self.names, expr)
        if name in SINGLE_DEVICE_SHARDING and expr.args:
            return self.classify(expr.args[0], env)
        if name in SHARDINGS:
            return Placement("sharded", (self.source_of([expr]),), self.source_of([expr]))
        if name == DEVICE_PUT:
            where = argument(expr, 1, "device")
            placement = self.classify(where, env) if where is not None else None
            return Committed(placement) if isinstance(placement, Placement) else None
        return None


def _bound_names(stmt: ast.stmt) -> set[str]:
    bound = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).partition(".")[0])
    return bound
