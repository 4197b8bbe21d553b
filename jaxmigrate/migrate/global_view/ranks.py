"""How many axes a value of a step has at least, read off the code that makes it.

A matrix product of two per-example arrays (``q @ k.transpose(0, 1, 3, 2)`` in attention written
out) keeps examples apart only where both have at least three axes: ``@`` then multiplies their
last two axes and broadcasts the ones before, the batch axis first among them. With two axes or
fewer it would multiply the batch axis itself. The kinds of ``step`` say which values are
per-example; this says which have the axes for that. Only a lower bound is known: a reshape or
transpose to written sizes has exactly that many, elementwise operations broadcast (never fewer
than their operands), a value bound once before its read has its value's; anything else counts 0.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import reaching_assignment

# Functions of an array that keep its axes (the first argument's), as jax.numpy and jax.nn write them.
_SAME_AXES = frozenset({f"jax.nn.{f}" for f in ("softmax", "log_softmax", "relu", "gelu", "silu", "sigmoid",
                                                "tanh", "swish", "elu", "softplus")}
                       | {f"jax.numpy.{f}" for f in ("exp", "log", "tanh", "abs", "sqrt", "square", "negative",
                                                     "swapaxes", "moveaxis", "flip", "roll", "clip", "asarray")})
_SAME_AXES_METHODS = frozenset({"astype", "swapaxes", "clip", "conj"})
_WRITTEN_SHAPE = frozenset({"jax.numpy.reshape", "jax.numpy.transpose"})
_DEPTH = 24


def at_least(module, node: ast.expr, _depth: int = 0) -> int:
    """A lower bound on the number of axes of ``node``'s value (0 where nothing is known)."""
    if _depth > _DEPTH:
        return 0
    again = lambda n: at_least(module, n, _depth + 1)  # noqa: E731
    if isinstance(node, ast.Name):
        value = _reaching_value(module, node)
        return 0 if value is None else again(value)
    if isinstance(node, ast.BinOp):
        left, right = again(node.left), again(node.right)
        if isinstance(node.op, ast.MatMult):
            return max(left, right) if min(left, right) >= 2 else 0
        return max(left, right)  # (broadcasting never drops an axis)
    if isinstance(node, ast.UnaryOp):
        return again(node.operand)
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
        return 0
    func = node.func
    qualified = module.names.qualified_name(func)
    if isinstance(func, ast.Attribute) and qualified is None:  # a method of the array
        if func.attr in ("reshape", "transpose") and node.args and not node.keywords:
            return _written_sizes(node.args)
        if func.attr in _SAME_AXES_METHODS:
            return again(func.value)
        return 0
    if qualified in _WRITTEN_SHAPE and len(node.args) == 2:
        return _written_sizes(node.args[1:])
    if qualified == "jax.numpy.where" and len(node.args) == 3:
        return max(again(a) for a in node.args)
    if qualified == "jax.numpy.einsum" and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) and "->" in node.args[0].value:
        output = node.args[0].value.split("->")[1].strip()
        return 0 if "." in output else len(output)
    if qualified in _SAME_AXES and node.args:
        return again(node.args[0])
    return 0


def _written_sizes(args: list[ast.expr]) -> int:
    """``(2, 3, 4)`` or ``2, 3, 4``: three axes."""
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    return 0 if any(isinstance(a, ast.Starred) for a in args) else len(args)


def _reaching_value(module, use: ast.Name) -> ast.expr | None:
    """The value of the one assignment ``name = value`` that reaches ``use``, in its function."""
    statements = []
    for binding in module.names.bindings(use):
        node = getattr(binding, "value", None) or getattr(binding, "node", None)
        while node is not None and not isinstance(node, ast.stmt):
            node = module.parent_of(node)
        if node is None:
            return None
        statements.append(node)
    # (`scores = jnp.where(mask, scores, -1e10)` reads the `scores` bound before it)
    start = module.span(use)[0]
    statements = [s for s in statements if not module.span(s)[0] <= start < module.span(s)[1]]
    if not statements:
        return None
    reaching = reaching_assignment(module, use, statements)
    if isinstance(reaching, ast.Assign) and len(reaching.targets) == 1 and isinstance(reaching.targets[0], ast.Name) \
            and reaching.targets[0].id == use.id:
        return reaching.value
    return None
