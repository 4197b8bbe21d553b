"""Optimizer states, whose ``[i]`` is a part of the state, not device i's copy.

The driving code reads device 0's copy of a replicated array as ``x[0]``, which the global view
drops. An optax state is a tuple (``optax.chain``'s, ``optax.adam``'s) or a named tuple, so on a
replicated one ``opt_state[0]`` is its first part under pmap too: dropping the index would give the
program the whole state in its place. So an index of a value that is an optimizer state is not
read as a device's copy:

- a ``.opt_state`` (flax's ``TrainState`` field, a trainer's attribute);
- a name the function binds, anywhere in it, to such a state: ``tx.init(params)`` or the second
  item of ``tx.update(...)`` for ``tx`` an optax transformation (``optax.adam(...)``, or a name
  bound once to one), or a part of a tuple given such a state (``params, opt_state =
  replicate((params, opt_state))``).
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import unpacked
from jaxmigrate.lint.patterns import single_value
from jaxmigrate.names import OpaqueBinding, ValueBinding

_FIELDS = frozenset({"opt_state"})


def optimizer_state(module, node: ast.expr) -> bool:
    """Whether ``node`` is, or may be, an optimizer's state (see the module's docstring)."""
    return _state(module, node, frozenset())


def _state(module, node: ast.expr, seen: frozenset[str]) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in _FIELDS
    if not isinstance(node, ast.Name) or node.id in seen:
        return False
    for binding in module.names.every_binding(node):
        value = _bound(module, binding)
        if value is not None and _makes_state(module, value, seen | {node.id}):
            return True
    return False


def _bound(module, binding) -> ast.expr | None:
    """What a binding gives its name: the value assigned, or the part of it an unpacking gives (a
    tuple literal's item; a call's result, whole, for ``updates, opt_state = tx.update(...)``)."""
    if isinstance(binding, ValueBinding):
        return binding.value
    found = unpacked(module, binding.node) if isinstance(binding, OpaqueBinding) \
        and isinstance(binding.node, ast.Name) else None
    if found is None:
        return None
    target, position, value = found
    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
        return value.elts[position]
    return _unpacked_update(module, value, position)


def _unpacked_update(module, value: ast.expr, position: int) -> ast.expr | None:
    """``value`` itself where it is ``tx.update(...)`` unpacked at the state's position (1), or a
    call that may return a state among others (a replicate of a tuple); else None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "update":
        return value if position == 1 else None
    if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], (ast.Tuple, ast.List)):
        items = value.args[0].elts  # `replicate((params, opt_state))`, `jax.device_put((...), ...)`
        return items[position] if position < len(items) else None
    return None


def _makes_state(module, value: ast.expr, seen: frozenset[str]) -> bool:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in ("init", "update") and _transformation(module, value.func.value):
        return True
    if isinstance(value, ast.Call) and len(value.args) >= 1 and not isinstance(value.args[0], ast.Starred):
        # a copy of one made by a call given it first: `replicate(opt_state)`, `jax.device_put(opt_state, s)`
        return _state(module, value.args[0], seen)
    return _state(module, value, seen)


def _transformation(module, node: ast.expr) -> bool:
    """An optax gradient transformation: made by a call of optax, here or bound once to a name."""
    if isinstance(node, ast.Name):
        node = single_value(module.names, node)
    if not isinstance(node, ast.Call):
        return False
    qualified = module.names.qualified_name(node.func) or ""
    return qualified == "optax" or qualified.startswith("optax.")
