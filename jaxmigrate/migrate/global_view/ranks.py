"""How many axes a value of a step has at least, read off the code that makes it.

A matrix product of two per-example arrays (``q @ k.transpose(0, 1, 3, 2)`` in attention written
out) keeps examples apart only where both have at least three axes: ``@`` then multiplies their
last two axes and broadcasts the ones before, the batch axis first among them. With two axes or
fewer it would multiply the batch axis itself. The kinds of ``step`` say which values are
per-example; this says which have the axes for that. Only a lower bound is known: a reshape or
transpose to written sizes has exactly that many, elementwise operations broadcast (never fewer
than their operands), a value bound once before its read has its value's, a function's parameter
the fewest its calls give it; anything else counts 0.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import reaching_assignment, reads_of

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

    def again(inner: ast.expr) -> int:
        return at_least(module, inner, _depth + 1)

    if isinstance(node, ast.Name):
        bindings = module.names.bindings(node)
        if len(bindings) == 1 and isinstance(getattr(bindings[0], "node", None), ast.arg):
            return min(_given(module, bindings[0].node, _depth + 1), default=0)
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
    if qualified in ("jax.numpy.repeat", "jax.numpy.expand_dims") and node.args and (
            len(node.args) == 3 or any(k.arg == "axis" for k in node.keywords)):  # (no axis: flattened)
        return again(node.args[0]) + (qualified == "jax.numpy.expand_dims")
    return 0


def _given(module, param: ast.arg, depth: int) -> list[int]:
    """The bounds of what each call of the module gives ``param``, a positional parameter of a
    function called only by its name (``attention(q, k, v)`` from ``self_attention``); none where
    some use of it is not such a call."""
    fn = module.parent_of(module.parent_of(param))
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list or param not in fn.args.args \
            or fn.args.vararg or fn.args.kwarg:
        return []
    position, bounds = fn.args.args.index(param), []
    for read in reads_of(module, fn.name, fn):
        call = module.parent_of(read)
        if not (isinstance(call, ast.Call) and call.func is read) or any(isinstance(a, ast.Starred) for a in call.args) \
                or any(k.arg is None for k in call.keywords):
            return []
        given = call.args[position] if position < len(call.args) else next(
            (k.value for k in call.keywords if k.arg == param.arg), None)
        if given is None:
            return []
        bounds.append(at_least(module, given, depth))
    return bounds


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
    if not (isinstance(reaching, ast.Assign) and len(reaching.targets) == 1):
        return None
    target, value = reaching.targets[0], reaching.value
    if isinstance(target, ast.Name) and target.id == use.id:
        return value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        for name, item in zip(target.elts, value.elts):  # `k, v = jnp.repeat(k, 2, axis=2), ...`
            if isinstance(name, ast.Name) and name.id == use.id:
                return item
    return None
