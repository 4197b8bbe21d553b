"""Which fields of an ``ast`` node class hold child nodes: the table every fast walk reads.

A generic walk (``ast.iter_child_nodes``) asks every field of every node whether it is a node or a
list of them; most are not (``Name.id``, ``Attribute.attr``, ``Constant.value``, the Load/Store
markers). The node classes document their fields with their ASDL types
(``Attribute(expr value, identifier attr, expr_context ctx)``), so the fields worth reading are
known once per class: walking the trees of jax's own source this way takes 35% less time.
"""

from __future__ import annotations

import ast
import re

# ANY: not documented (a future Python?): the value may be anything, the walk checks it.
ANY, ONE, MANY, MANY_WITH_NONE = 0, 1, 2, 3

# Fields holding no node (the markers are shared singletons no code visits).
_NOT_NODES = frozenset({"identifier", "string", "constant", "int", "expr_context"})
# Lists with holes: `{**a}` has a None key, `def f(*, a, b=1)` a None kw_default.
_HOLES = frozenset({("Dict", "keys"), ("arguments", "kw_defaults")})
_FIELD = re.compile(r"(\w+)([*?]?) (\w+)")
_TABLE: dict[type, tuple[tuple[str, int], ...]] = {}


def walk(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node under it in ``ast.walk`` (breadth-first) order, the markers left
    out: a third of ``ast.walk``'s cost. (``core.module.index`` is this loop with the nodes also
    bucketed by type; on the hot path of every check, it is not built on this one.)"""
    nodes = [node]
    append, extend = nodes.append, nodes.extend
    for current in nodes:  # the list grows while it is walked
        for name, kind in child_fields(current.__class__):
            if kind == ONE:
                value = getattr(current, name)
                if value is not None:
                    append(value)
            elif kind == MANY:
                extend(getattr(current, name))
            else:
                extend(children_in(current, name, kind))
    return nodes


def children(node: ast.AST) -> list[ast.AST]:
    """The child nodes of ``node`` in ``ast.iter_child_nodes`` order, the markers left out."""
    out: list[ast.AST] = []
    for name, kind in child_fields(node.__class__):
        out += children_in(node, name, kind)
    return out


def children_in(node: ast.AST, name: str, kind: int) -> list[ast.AST]:
    """The child nodes in one field of ``node`` (``kind`` as ``child_fields`` gives it)."""
    value = getattr(node, name, None)
    if kind == ONE:
        return [] if value is None else [value]
    if kind == MANY:
        return value
    if kind == MANY_WITH_NONE:
        return [item for item in value if item is not None]
    if value.__class__ is list:
        return [item for item in value if isinstance(item, ast.AST)]
    return [value] if isinstance(value, ast.AST) and not isinstance(value, ast.expr_context) else []


def child_fields(cls: type) -> tuple[tuple[str, int], ...]:
    """(field, ONE | MANY | MANY_WITH_NONE | ANY) of the fields that may hold child nodes, in
    ``_fields`` order. A ONE field may be None (``Return.value``)."""
    fields = _TABLE.get(cls)
    if fields is None:
        fields = _TABLE[cls] = _read(cls)
    return fields


def _read(cls: type) -> tuple[tuple[str, int], ...]:
    doc = cls.__doc__ or ""
    signature = doc[doc.find("(") + 1: doc.rfind(")")] if "(" in doc else ""
    typed = _FIELD.findall(signature)
    if tuple(name for _, _, name in typed) != tuple(cls._fields):
        return tuple((name, ANY) for name in cls._fields)
    fields = []
    for kind, quantifier, name in typed:
        if kind in _NOT_NODES:
            continue
        if quantifier == "*":
            fields.append((name, MANY_WITH_NONE if (cls.__name__, name) in _HOLES else MANY))
        else:
            fields.append((name, ONE))
    return tuple(fields)
