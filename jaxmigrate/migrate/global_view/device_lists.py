"""Batches built one per device and stacked: ``jnp.stack(xs)`` of a list filled by one loader
call per local device.

Scripts that feed a pmap without splitting one host batch often draw one batch per device::

    xs, ys = [], []
    for _ in range(n_devices):
        x, y = loader.next_batch()
        xs.append(np.asarray(x))
        ys.append(np.asarray(y))
    return jnp.stack(xs), jnp.stack(ys)

Device i gets ``xs[i]``. The global view's batch is their rows one after the other,
``jnp.concatenate(xs)``, which a layout over the batch axis splits back into the same ``xs[i]``
per device. That holds only where the list holds exactly one batch per device, in order: it is
bound to ``[]`` once, and the only other use of it (here or in a function nested here) is one
``xs.append(...)`` statement directly in the body of a ``for`` over ``range(n)``, ``n`` the local
device count, with no ``break``, ``continue`` or ``return`` in that body, the ``[]`` above the
loop in the same block, the stack below it; ``stack`` is given the list alone (``axis`` 0).
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import reads_of, statement_list, statement_of, unpacked
from jaxmigrate.lint.patterns import STACK_FUNCTIONS
from jaxmigrate.names import OpaqueBinding, ValueBinding


def stacked_per_device(module, is_device_count, node: ast.Call) -> ast.Name | None:
    """The list ``node`` (``jnp.stack(xs)``) stacks, where it holds one batch per local device as
    the module's docstring says; None otherwise. ``is_device_count``: whether an expression is the
    local device count (``shapes.DeviceAxisShapes.is_device_count``)."""
    if not (isinstance(node.func, ast.Attribute) and module.names.qualified_name(node.func) in STACK_FUNCTIONS
            and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and not node.keywords):
        return None
    listed = node.args[0]
    bindings = module.names.every_binding(listed)
    empty = _empty_list(module, bindings[0]) if len(bindings) == 1 else None
    if empty is None:
        return None
    bound = bindings[0].value if isinstance(bindings[0], ValueBinding) else bindings[0].node
    uses = reads_of(module, listed.id, bound)  # (a nested function's reads too)
    appends = [n for n in uses if n is not listed and _append_statement(module, n) is not None]
    if len(appends) != 1 or any(n is not listed and n not in appends for n in uses):
        return None
    loop = module.parent_of(_append_statement(module, appends[0]))
    if not (isinstance(loop, ast.For) and _device_range(module, loop.iter, is_device_count) and not loop.orelse
            and not _leaves_early(loop)):
        return None
    statement = statement_of(module, empty)
    block = statement_list(module, statement)
    if block is None or loop not in block or block.index(loop) < block.index(statement):
        return None
    if (node.lineno, node.col_offset) < (loop.end_lineno, loop.end_col_offset):
        return None
    return listed


def _empty_list(module, binding) -> ast.AST | None:
    """The ``[]`` a binding gives its name: ``xs = []``, or ``xs, ys = [], []``."""
    if isinstance(binding, ValueBinding):
        value = binding.value
        return value if isinstance(value, ast.List) and not value.elts else None
    found = unpacked(module, binding.node) if isinstance(binding, OpaqueBinding) \
        and isinstance(binding.node, ast.Name) else None
    if found is None:
        return None
    target, position, value = found
    if not (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts)):
        return None
    value = value.elts[position]
    return value if isinstance(value, ast.List) and not value.elts else None


def _append_statement(module, name: ast.Name) -> ast.Expr | None:
    """The statement ``name.append(value)`` where ``name`` is read so."""
    attribute = module.parent_of(name)
    call = module.parent_of(attribute)
    statement = module.parent_of(call)
    if isinstance(attribute, ast.Attribute) and attribute.attr == "append" and isinstance(call, ast.Call) \
            and call.func is attribute and len(call.args) == 1 and not call.keywords \
            and not isinstance(call.args[0], ast.Starred) and isinstance(statement, ast.Expr):
        return statement
    return None


def _device_range(module, node: ast.expr, is_device_count) -> bool:
    """``range(n)``, ``n`` the local device count."""
    return isinstance(node, ast.Call) and module.names.builtin(node.func) == "range" \
        and len(node.args) == 1 and not node.keywords and is_device_count(node.args[0])


def _leaves_early(loop: ast.For) -> bool:
    """Whether an iteration may end before its end: a ``break`` or ``continue`` of its own (not of
    a loop nested in it), a ``return`` or ``raise`` (not of a function nested in it), or a ``try``
    that may skip statements."""
    pending = [(node, False) for node in loop.body]
    while pending:
        node, nested = pending.pop()
        if isinstance(node, (ast.Return, ast.Try, ast.Raise)) or not nested and isinstance(node, (ast.Break,
                                                                                                ast.Continue)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            inner = nested or isinstance(node, (ast.For, ast.While))
            pending.extend((child, inner) for child in ast.iter_child_nodes(node))
    return False
