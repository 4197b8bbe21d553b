"""Where a node sits and which definition reaches it, for structured code, on ``ast`` alone.

Enough for the codemods' question "is this the one assignment a use reads?": the last assignment
before the use in the same scope, on the use's own path through the enclosing blocks, with no
other assignment between them or later in a loop around the use. Anything less clear is None:
the caller keeps the site and says why.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from jaxmigrate.core.module import ParsedModule

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
_LOOPS = (ast.For, ast.While, ast.AsyncFor)


def ancestors(module: ParsedModule, node: ast.AST) -> list[ast.AST]:
    """The nodes around ``node``, innermost first."""
    out = []
    parent = module.parent_of(node)
    while parent is not None:
        out.append(parent)
        parent = module.parent_of(parent)
    return out


def child_of(module: ParsedModule, node: ast.AST, scope: ast.AST) -> ast.AST | None:
    """The child of ``scope`` that is ``node`` or holds it (for a function, a statement of its body,
    its arguments or a decorator); None when ``node`` is not inside ``scope``."""
    current = node
    while current is not None and module.parent_of(current) is not scope:
        current = module.parent_of(current)
    return current


def statement_of(module: ParsedModule, node: ast.AST) -> ast.stmt | None:
    """The statement ``node`` is part of (``node`` itself if it is one); None above the module's."""
    while node is not None and not isinstance(node, ast.stmt):
        node = module.parent_of(node)
    return node


def statement_list(module: ParsedModule, statement: ast.stmt) -> list[ast.stmt] | None:
    """The statement list ``statement`` is in: its parent's body, ``else:``, ``finally:``..."""
    parent = module.parent_of(statement)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return block
    return None


def unpacked(module: ParsedModule, name: ast.Name) -> tuple[ast.Tuple | ast.List, int, ast.expr] | None:
    """Where an assignment unpacks into ``name`` (``xs, ys = value``): the target, ``name``'s
    position in it and the value assigned; None for any other name."""
    target = module.parent_of(name)
    statement = module.parent_of(target) if isinstance(target, (ast.Tuple, ast.List)) else None
    if not isinstance(statement, ast.Assign):
        return None
    return target, next(i for i, element in enumerate(target.elts) if element is name), statement.value


def enclosing_scope(module: ParsedModule, node: ast.AST) -> ast.AST:
    """The function, lambda, class or module whose names ``node`` is evaluated among."""
    return next((n for n in ancestors(module, node) if isinstance(n, SCOPES)), module.tree)


def loop_between(module: ParsedModule, node: ast.AST, stop: ast.AST, loops: tuple = _LOOPS) -> ast.AST | None:
    """The innermost of ``loops`` around ``node`` below ``stop`` (a function, a block), or None."""
    for around in ancestors(module, node):
        if around is stop:
            return None
        if isinstance(around, loops):
            return around
    return None


def reaching_assignment(module: ParsedModule, use: ast.Name, assigns: Sequence[ast.stmt]) -> ast.stmt | None:
    """The one of ``assigns`` (the assignments of ``use``'s variable) that reaches ``use``, or None
    when that is not clear from the structure of the code."""
    use_start = module.span(use)[0]
    around_use = ancestors(module, use)
    around_ids = {id(n) for n in around_use}
    before = [a for a in assigns if module.span(a)[1] <= use_start]
    if not before:
        return None
    last = max(before, key=lambda a: module.span(a)[0])
    if enclosing_scope(module, last) is not enclosing_scope(module, use):
        return None
    if id(module.parent_of(last)) not in around_ids:
        return None  # in a branch the use is not on
    last_end = module.span(last)[1]
    loops = [n for n in around_use if isinstance(n, _LOOPS)]
    for other in assigns:
        if other is last:
            continue
        start = module.span(other)[0]
        if last_end <= start < use_start:
            return None
        if start > use_start and any(id(loop) in {id(n) for n in ancestors(module, other)} for loop in loops):
            return None  # assigned again later in a loop that also holds the use
    return last


def reads_of(module: ParsedModule, name: str, value: ast.AST) -> list[ast.Name]:
    """The module's reads of ``name`` that resolve to ``value``: a def, or what an assignment
    binds to it (a lambda, a call)."""
    return [node for _, node in module.names_at.get(name, ()) if isinstance(node.ctx, ast.Load)
            and any(getattr(b, "node", None) is value or getattr(b, "value", None) is value
                    for b in module.names.bindings(node))]
