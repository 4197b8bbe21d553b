"""The program's own helpers that add or read pmap's leading device axis, known by their bodies.

Training programs replicate and unreplicate with two-line helpers of their own more often than with
flax's::

    def replicate(tree):
        n = jax.local_device_count()
        return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)

    unreplicate = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)

A helper is summarised by what its body does to its one parameter, never by its name: a ``def``
or a lambda bound to a name, taking one positional parameter, whose body (after assignments that do
not read the parameter) returns either a tree map over the parameter of a per-leaf expression the
driving code recognises (``shapes.DeviceAxisShapes.leaf_action``: a broadcast, stack or array
of ``[x] * n`` onto a leading device-count axis, a device-count reshape, ``x[0]``), or that
expression applied to the parameter itself. The summary is that action: ``replicate``, ``shard`` or
``index``; a call of the helper is then rewritten like the call it stands for.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from jaxmigrate.migrate.global_view.kinds import TREE_MAPS
from jaxmigrate.names import OpaqueBinding, ValueBinding


@dataclass(frozen=True, eq=False)
class Helper:
    """A function of the module that adds or reads the device axis of its one argument."""

    name: str
    fn: ast.FunctionDef | ast.Lambda
    statement: ast.stmt  # the def, or the assignment binding the lambda
    action: str  # replicate | shard | index


class HelperSummaries:
    """The helper (if any) each call calls; one summary per function, computed when first asked."""

    def __init__(self, module, leaf_action: Callable[[ast.expr, str], str | None]) -> None:
        self.module = module
        self.leaf_action = leaf_action
        self._summaries: dict[int, str | None] = {}

    def of_call(self, call: ast.Call) -> Helper | None:
        if not (isinstance(call.func, ast.Name) and len(call.args) == 1 and not call.keywords
                and not isinstance(call.args[0], ast.Starred)):
            return None
        bindings = self.module.names.bindings(call.func)
        if len(bindings) != 1:
            return None  # rebound, or not bound here: which function runs is not known
        binding = bindings[0]
        if isinstance(binding, OpaqueBinding) and isinstance(binding.node, ast.FunctionDef):
            fn, statement = binding.node, binding.node
        elif isinstance(binding, ValueBinding) and isinstance(binding.value, ast.Lambda):
            fn, statement = binding.value, self.module.parent_of(binding.value)
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                return None
        else:
            return None
        if id(fn) not in self._summaries:
            self._summaries[id(fn)] = self._summarise(fn)
        action = self._summaries[id(fn)]
        return Helper(call.func.id, fn, statement, action) if action else None

    def _summarise(self, fn: ast.FunctionDef | ast.Lambda) -> str | None:
        args = fn.args
        if args.posonlyargs or args.vararg or args.kwarg or args.kwonlyargs or args.defaults or len(args.args) != 1:
            return None
        param = args.args[0].arg
        if isinstance(fn, ast.Lambda):
            return self._action(fn.body, param)
        if fn.decorator_list:
            return None
        body = list(fn.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        for statement in body[:-1]:
            # Only host values computed aside (`n = jax.local_device_count()`): the parameter flows
            # through the returned expression alone.
            if not (isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) and t.id != param
                                                               for t in statement.targets)):
                return None
            if any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(statement.value)):
                return None
        return self._action(body[-1].value, param)

    def _action(self, result: ast.expr, param: str) -> str | None:
        if isinstance(result, ast.Call) and self.module.names.qualified_name(result.func) in TREE_MAPS \
                and len(result.args) == 2 and not result.keywords and isinstance(result.args[0], ast.Lambda) \
                and isinstance(result.args[1], ast.Name) and result.args[1].id == param:
            leaf = result.args[0]
            leaf_args = leaf.args
            if leaf_args.posonlyargs or leaf_args.vararg or leaf_args.kwarg or leaf_args.kwonlyargs \
                    or leaf_args.defaults or len(leaf_args.args) != 1:
                return None
            return self.leaf_action(leaf.body, leaf_args.args[0].arg)
        return self.leaf_action(result, param)
