"""jax.numpy functions that join, split, move or reorder axes of per-example arrays.

Along axes other than the batch axis each example's row is rearranged on its own, so what a
device computes on its slice of the batch is the same rows of what ``jax.jit`` computes over all
of it (rows, ``S``): ``jnp.concatenate([-x2, x1], axis=-1)`` of rotary embeddings,
``jnp.split(x, 2, axis=-1)``, ``q.transpose(0, 2, 1, 3)``, ``jnp.einsum("bqhd,bkhd->bhqk", q, k)``.
Along the batch axis (and by default, which for most of them is axis 0, or all axes) they mix
examples or move the batch off the first axis: not known here. An axis is read as ``kinds``'
``off_the_batch_axis`` reads it (a positive position, or -1).
"""

from __future__ import annotations

import ast
import re

from jaxmigrate.migrate.global_view.kinds import BOT, R, S, U, Kind, Seq, flat, off_the_batch_axis

# name -> position of its axis argument; joins take their arrays in a sequence first
_JOINS = {"concatenate": 1, "stack": 1}
_ONE_AXIS = {"expand_dims": 1, "repeat": 2, "flip": 1, "roll": 2, "squeeze": 1}
_SPLITS = {"split": 2, "array_split": 2}
_EINSUM_SUBSCRIPTS = re.compile(r"[A-Za-z]+(,[A-Za-z]+)*->[A-Za-z]*")


def is_layout_op(qualified: str | None) -> bool:
    module, _, short = (qualified or "").rpartition(".")
    return module == "jax.numpy" and short in {*_JOINS, *_ONE_AXIS, *_SPLITS, "transpose", "swapaxes", "moveaxis",
                                                "einsum"}


def layout_op(node: ast.Call, qualified: str, kinds: list[Kind], rank: int = 0) -> Kind:
    """The kind of ``jnp.<op>(...)`` (``is_layout_op``), given its positional arguments' kinds and
    how many axes its first argument has at least (``ranks``: ``jnp.swapaxes(k, -1, -2)`` leaves
    the batch axis first where k has three)."""
    short = qualified.rpartition(".")[2]
    first = flat(kinds[0], node.lineno) if kinds else BOT
    if isinstance(first, U):
        return first
    for kind in kinds[1:]:
        if short != "einsum" and flat(kind) not in (R, BOT):
            return U(f"`{short}` with a per-device count or axis", node.lineno)
    if short == "einsum":
        return _einsum(node, kinds)
    if first != S:
        return U(f"`{short}` of a value that is not per-example", node.lineno)
    if short in _JOINS:
        if not (node.args and isinstance(node.args[0], (ast.List, ast.Tuple))) \
                or any(flat(item) != S for item in kinds[0].items):
            return U(f"`{short}` of a sequence not written out of per-example arrays", node.lineno)
        return _along(node, short, _JOINS[short], rank)
    if short in _ONE_AXIS:
        return _along(node, short, _ONE_AXIS[short], rank)
    if short in _SPLITS:
        along = _along(node, short, _SPLITS[short], rank)
        parts = _parts(node)
        if along != S or parts is None:
            return along if along != S else U(f"`{short}` into a number of parts not written here", node.lineno)
        return Seq((S,) * parts)
    axes = [_literal(a) for a in node.args[1:]] + [_literal(k.value) for k in node.keywords]
    if short == "transpose" and axes and isinstance(axes[0], (tuple, list)) and axes[0] and axes[0][0] == 0:
        return S
    if short in ("swapaxes", "moveaxis") and len(axes) == 2 and all(_off(axis, rank) for axis in axes):
        return S
    return U(f"`{short}` that moves the batch axis, or by axes not written here", node.lineno)


def method_layout(node: ast.Call, rank: int = 0) -> bool:
    """``x.transpose(0, 2, 1, 3)`` / ``x.swapaxes(1, 2)`` / ``x.squeeze(-1)`` of per-example ``x``
    (with ``rank`` axes at least), the batch axis left first."""
    attr = node.func.attr  # type: ignore[attr-defined]
    if node.keywords or not node.args:
        return False
    axes = [_literal(a) for a in node.args]
    if attr == "transpose":
        order = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return bool(order) and order[0] == 0 and all(type(a) is int for a in order)
    if attr == "swapaxes":
        return len(axes) == 2 and all(_off(axis, rank) for axis in axes)
    if attr == "squeeze":
        return len(axes) == 1 and _off(axes[0], rank)
    return False


def _off(axis, rank: int) -> bool:
    """Off the batch axis: as ``off_the_batch_axis`` reads it, or a negative position that an array
    of ``rank`` axes at least puts after the first (-2 of three axes)."""
    return off_the_batch_axis(axis) or type(axis) is int and axis < 0 and rank >= 1 - axis


def _along(node: ast.Call, short: str, position: int, rank: int = 0) -> Kind:
    """S when the op's axis is written and off the batch axis."""
    value = node.args[position] if len(node.args) > position else next(
        (k.value for k in node.keywords if k.arg == "axis"), None)
    axis = _literal(value) if value is not None else None
    if value is None or not _off(axis, rank):
        return U(f"`{short}` along the batch axis (or all axes)" if value is None or axis in (0, None)
                 else f"`{short}` along an axis not known to be off the batch axis", node.lineno)
    return S


def _parts(node: ast.Call) -> int | None:
    sections = _literal(node.args[1]) if len(node.args) > 1 else None
    if type(sections) is int and sections > 0:
        return sections
    if isinstance(sections, (tuple, list)) and all(type(i) is int for i in sections):
        return len(sections) + 1
    return None


def _einsum(node: ast.Call, kinds: list[Kind]) -> Kind:
    """``jnp.einsum("bqhd,bkhd->bhqk", q, k)``: per example when every per-example operand's
    subscripts start with one letter, the output's do too, and no replicated operand has it (the
    batch letter is never summed over, nor met by another array's axis)."""
    subscripts = _literal(node.args[0]) if node.args else None
    operands = [flat(kind, node.lineno) for kind in kinds[1:]]
    if node.keywords or not isinstance(subscripts, str) \
            or not _EINSUM_SUBSCRIPTS.fullmatch(subscripts.replace(" ", "")):
        return U("an `einsum` whose subscripts are not written out here (or use `...`)", node.lineno)
    inputs, output = subscripts.replace(" ", "").split("->")
    terms = inputs.split(",")
    unknown = next((kind for kind in operands if isinstance(kind, U)), None)
    if unknown is not None:
        return unknown
    if len(terms) != len(operands) or any(kind not in (R, S) for kind in operands):
        return U("an `einsum` of values that are not per-example or replicated", node.lineno)
    if all(kind == R for kind in operands):
        return R
    letter = next(term[0] for term, kind in zip(terms, operands) if kind == S)
    rows = all(term[:1] == letter and term.count(letter) == 1 for term, kind in zip(terms, operands) if kind == S)
    if rows and output[:1] == letter and output.count(letter) == 1 \
            and not any(letter in term for term, kind in zip(terms, operands) if kind == R):
        return S
    return U("an `einsum` that sums over or moves the batch axis", node.lineno)


def _literal(node: ast.expr | None):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return "?"
