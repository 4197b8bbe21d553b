"""A program that runs in one of two modes chosen at run time: pmap where a flag holds, plain
code where it does not (``if args.pmap: state = jax.device_put_replicated(state, devices)`` ...
``if args.pmap: loss = p_train_step(state, batch) else: loss = train_step(state, batch)``).

The global view follows the pmap mode: the driving analysis reads each ``if`` (and ``a if t else
b``) on the mode's test as the branch that mode runs, and the rewrite may touch only code that
runs in that mode alone, so the other mode runs as it did. A test is a mode's when it is the same
value wherever it is read: names bound once (not in a loop) or parameters never rebound, their
attributes and constant entries never assigned, the device counts, literals, and operators over
those; never the process index, which differs between the processes of one run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from jaxmigrate.core.flow import ancestors, enclosing_scope, loop_between
from jaxmigrate.core.module import is_main_guard
from jaxmigrate.names import OpaqueBinding, ValueBinding

_COUNTS = frozenset({"jax.device_count", "jax.local_device_count"})


@dataclass(frozen=True)
class Mode:
    """The pmap mode: where ``text`` holds (``held``) or, for ``not text``, where it does not."""

    key: str  # the test's structure (``ast.dump``), without a leading ``not``
    held: bool
    text: str  # as written, for messages

    def branch(self, test: ast.expr) -> bool | None:
        """Whether the body of an ``if`` on ``test`` runs in this mode (False: its ``else`` does);
        None where ``test`` is not this mode's."""
        inner, negated = without_not(test)
        if ast.dump(inner) != self.key:
            return None
        return self.held != negated

    def described(self) -> str:
        return f"where `{self.text}` {'holds' if self.held else 'does not hold'}"


def candidate_modes(module, steps: list[tuple[ast.AST, set[str]]]) -> list[Mode]:
    """The modes a program may run its pmaps in (``steps``: each pmap's binding with the names its
    step is called by): the test of an ``if`` that binds a step where the same function binds that
    name another way too, or has an ``else``; or of an ``if`` that calls a step where its ``else``
    does other work and calls no step (DeiT's ``train_step`` in the ``else`` of
    ``train_step_pmap``) -- when the test is the same value at each of its reads (``_one_value``).
    An ``if`` around a step's call alone (``if config.fid.on_use: p_sample_step(...)``) is no mode."""
    called = set().union(*(names for _, names in steps)) if steps else set()
    pmapped = {id(binding) for binding, _ in steps}
    found: list[Mode] = []

    def consider(mode: Mode) -> None:
        if all(m.key != mode.key for m in found) and _one_value(module, mode):
            found.append(mode)

    def without_pmap(other: list) -> bool:
        """The other branch does something, and neither pmaps nor calls a step."""
        return bool(other) and not any(id(n) in pmapped or isinstance(n, ast.Name) and n.id in called
                                       for part in other for n in ast.walk(part))

    for binding, names in steps:
        rebound = any(id(binding_of) not in pmapped and binding_of is not binding
                      for name in names for binding_of in _scope_bindings(module, binding, name))
        for mode, _, other in _around(module, binding):
            if rebound or without_pmap(other):
                consider(mode)
    for node in module.of_type(ast.Name):
        if node.id in called and isinstance(node.ctx, ast.Load):
            for mode, _, other in _around(module, node):
                if without_pmap(other):
                    consider(mode)
    return found


def _scope_bindings(module, node: ast.AST, name: str) -> list[ast.AST]:
    """What ``name`` is bound to in the scope of ``node`` (defs, assigned values, ...), each once
    as the statement that binds it."""
    scope = module.names.scope_opened_by(enclosing_scope(module, node))
    found = []
    for binding in scope.bindings.get(name, ()) if scope is not None else ():
        bound = getattr(binding, "value", None) or getattr(binding, "node", None)
        while bound is not None and not isinstance(bound, ast.stmt):
            bound = module.parent_of(bound)
        if bound is not None:
            found.append(bound)
    return found


def runs_only_in(module, node: ast.AST, mode: Mode, _seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``node`` runs only in ``mode``: it is in the branch of an ``if`` on the mode's test
    that the mode runs, or in a function of this module that is only called from such code."""
    child = node
    for parent in ancestors(module, node):
        branch = branch_decided(parent, child, mode.branch)
        if branch is not None:
            return branch
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(parent) not in _seen:
            uses = [n for _, n in module.names_at.get(parent.name, ()) if isinstance(n.ctx, ast.Load)]
            return bool(uses) and all(runs_only_in(module, use, mode, _seen | {id(parent)}) for use in uses)
        if isinstance(parent, (ast.Lambda, ast.ClassDef)):
            return False
        child = parent
    return False


def runs_only_outside(module, node: ast.AST, mode: Mode) -> bool:
    """Whether ``node`` is in the branch of an ``if`` on the mode's test that the mode skips."""
    return skipped(module, node, mode.branch)


def skipped(module, node: ast.AST, decide: Callable[[ast.expr], bool | None]) -> bool:
    """Whether an ``if`` (or ``a if t else b``) around ``node`` in its own scope takes the other
    branch, as ``decide`` says of its test (True: the body runs; None: not known)."""
    child = node
    for parent in ancestors(module, node):
        if branch_decided(parent, child, decide) is False:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        child = parent
    return False


def branch_decided(parent: ast.AST, child: ast.AST, decide: Callable[[ast.expr], bool | None]) -> bool | None:
    """True where ``child`` is the part of ``parent`` (an ``if`` or ``a if t else b``) that runs, as
    ``decide`` says of its test, False where it is the part skipped, else None."""
    if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
        held = decide(parent.test)
        if held is not None:
            return held == (child in parent.body if isinstance(parent, ast.If) else child is parent.body)
    return None


def _around(module, node: ast.AST) -> list[tuple[Mode, list, list]]:
    """The modes of the ``if``s around ``node`` in its function, the branch it is in being the one
    the mode runs: each with that branch and the other (statements, or ``[expression]``)."""
    found, child = [], node
    for parent in ancestors(module, node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
            break
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and not is_main_guard(parent):
            inner, negated = without_not(parent.test)
            if isinstance(parent, ast.If):
                in_body = child in parent.body
                branch, other = (parent.body, parent.orelse) if in_body else (parent.orelse, parent.body)
            else:
                in_body = child is parent.body
                branch, other = ([parent.body], [parent.orelse]) if in_body else ([parent.orelse], [parent.body])
            found.append((Mode(ast.dump(inner), in_body != negated, module.segment(inner)), branch, other))
        child = parent
    return found


def _one_value(module, mode: Mode) -> bool:
    """Every test of ``mode`` in the module reads the same stable value: each is ``stable`` and the
    names they read resolve to the same bindings."""
    seen = None
    for node in module.of_type(ast.If, ast.IfExp):
        inner, _ = without_not(node.test)
        if ast.dump(inner) != mode.key:
            continue
        if not _stable(module, inner):
            return False
        bound = tuple(tuple(_binding_id(b) for b in module.names.bindings(n))
                      for n in ast.walk(inner) if isinstance(n, ast.Name))
        if seen is not None and bound != seen:
            return False
        seen = bound
    return seen is not None


def _stable(module, node: ast.expr) -> bool:
    """The same value wherever and whenever it is read."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return _bound_once(module, node)
    if isinstance(node, ast.Attribute):
        return _stable(module, node.value) and not any(
            isinstance(n.ctx, (ast.Store, ast.Del)) and n.attr == node.attr for n in module.of_type(ast.Attribute))
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and isinstance(node.value, ast.Name) \
            and _stable(module, node.value) and not _items_assigned(module, node.value.id)
    if isinstance(node, ast.Call):
        qualified = module.names.qualified_name(node.func)
        if qualified in _COUNTS:
            return not node.args and not node.keywords
        if module.names.builtin(node.func) == "len":
            return len(node.args) == 1 and not node.keywords and _stable(module, node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and not node.keywords \
                and 1 <= len(node.args) <= 2 and all(isinstance(a, ast.Constant) for a in node.args) \
                and isinstance(node.func.value, ast.Name):  # `config.get("multi")`
            return _stable(module, node.func.value) and not _items_assigned(module, node.func.value.id)
        return False
    if isinstance(node, ast.BoolOp):
        return all(_stable(module, v) for v in node.values)
    if isinstance(node, ast.Compare):
        return all(_stable(module, v) for v in (node.left, *node.comparators))
    if isinstance(node, ast.UnaryOp):
        return _stable(module, node.operand)
    if isinstance(node, ast.BinOp):
        return _stable(module, node.left) and _stable(module, node.right)
    return False


def _bound_once(module, name: ast.Name) -> bool:
    """A name with one binding: a parameter, or an assignment run once (not in a loop of its
    function), that no ``global`` / ``nonlocal`` lets other code rebind."""
    bindings = module.names.bindings(name)
    if len(bindings) != 1 or module.names.declared_shared(name.id):
        return False
    binding = bindings[0]
    if isinstance(binding, OpaqueBinding):
        return isinstance(binding.node, ast.arg)
    if not isinstance(binding, ValueBinding):
        return False
    statement = module.parent_of(binding.value)
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return False
    return loop_between(module, statement, enclosing_scope(module, statement)) is None


def _items_assigned(module, name: str) -> bool:
    """Whether some statement assigns, deletes or updates an item of a name spelled ``name``."""
    for node in module.of_type(ast.Subscript):
        if isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name) and node.value.id == name:
            return True
    for node in module.of_type(ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("update", "pop", "setdefault", "clear", "unlock") \
                and isinstance(func.value, ast.Name) and func.value.id == name:
            return True
    return False


def _binding_id(binding) -> int:
    return id(getattr(binding, "node", None) or getattr(binding, "value", None))


def without_not(test: ast.expr) -> tuple[ast.expr, bool]:
    """``test`` without a leading ``not``, and whether it had one."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand, True
    return test, False
