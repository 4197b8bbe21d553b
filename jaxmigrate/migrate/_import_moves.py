"""Import statements rewritten so the names they import from an old module come from the new one.

``from jax.experimental.maps import Mesh, xmap`` with ``Mesh`` moved becomes the kept statement
plus ``from jax.sharding import Mesh`` on a line of its own (with the comment the name had); a
statement whose names all go to one module is edited in place. LibCST re-renders the statement
(its parentheses, commas and comments), and is imported only when a fix writes one.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.module import ParsedModule


def move_imports(module: ParsedModule, moved: list[tuple[ast.ImportFrom, ast.alias, str]]) -> list[Edit]:
    """Edits moving each ``(statement, alias, new qualified name)`` to its new module."""
    statements: dict[int, tuple[ast.ImportFrom, dict[int, str]]] = {}
    for stmt, alias, new in moved:
        statements.setdefault(id(stmt), (stmt, {}))[1][id(alias)] = new
    return [edit for stmt, targets in statements.values() for edit in _move(module, stmt, targets)]


def _move(source: ParsedModule, stmt: ast.ImportFrom, targets: dict[int, str]) -> list[Edit]:
    """Edits moving the aliases in ``targets``: the statement edited in place when all of it goes
    to one module; else it keeps the rest and the moved names follow on lines of their own,
    each with the comment it had."""
    import libcst as cst  # only when a fix is written

    start, end = source.span(stmt)
    module = cst.parse_module(source.text[start:end])
    node = module.body[0].body[0]
    news = [targets.get(id(alias)) for alias in stmt.names]
    homes = {new.rpartition(".")[0] for new in news if new}
    if None not in news and len(homes) == 1:
        names = []
        for cst_alias, alias, new in zip(node.names, stmt.names, news):
            local = _local(alias, new)
            asname = None if local is None else cst_alias.asname or cst.AsName(name=cst.Name(local))
            names.append(cst_alias.with_changes(name=cst.Name(new.rpartition(".")[2]), asname=asname))
        node = node.with_changes(module=cst.parse_expression(homes.pop()), names=names)
        return [Edit(start, end, module.code_for_node(node))]
    added: dict[str, tuple[list[str], list[str]]] = {}
    for cst_alias, alias, new in zip(node.names, stmt.names, news):
        if new:
            names, comments = added.setdefault(new.rpartition(".")[0], ([], []))
            local, last = _local(alias, new), new.rpartition(".")[2]
            names.append(f"{last} as {local}" if local else last)
            comma = cst_alias.comma  # only the last name can lack one
            trailing = comma.whitespace_after if isinstance(comma, cst.Comma) else getattr(
                node.rpar, "whitespace_before", None)
            if isinstance(trailing, cst.ParenthesizedWhitespace) and trailing.first_line.comment:
                comments.append(trailing.first_line.comment.value)
    kept = [a for a, new in zip(node.names, news) if not new]
    if kept and kept[-1] is not node.names[-1]:  # the last name moved: the kept one ends the list
        last = node.names[-1]
        if isinstance(last.comma, cst.Comma) and isinstance(kept[-1].comma, cst.Comma):
            ws = _uncommented(cst, last.comma.whitespace_after)
            kept[-1] = kept[-1].with_changes(comma=kept[-1].comma.with_changes(whitespace_after=ws))
        else:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            if node.rpar:
                node = node.with_changes(rpar=node.rpar.with_changes(
                    whitespace_before=_uncommented(cst, node.rpar.whitespace_before)))
    lines = [f"from {home} import {', '.join(names)}" for home, (names, _) in added.items()]
    notes = ["  " + " ".join(comments) if comments else "" for _, comments in added.values()]
    if kept:
        lines.insert(0, module.code_for_node(node.with_changes(names=kept)))
        notes.insert(0, "")
    indent = source.text[source.src.line_starts[stmt.lineno - 1]:start]
    line_end = source.src.line_starts[stmt.end_lineno - 1] + len(source.src.line(stmt.end_lineno))
    rest = source.text[end:line_end].strip()
    if indent.strip() or (rest and not rest.startswith("#")):  # `if x: from ...` / `...; y = 1`
        return [Edit(start, end, "; ".join(lines))]
    after = "".join(source.src.newline + indent + line + note for line, note in zip(lines[1:], notes[1:]))
    return [Edit(start, end, lines[0]), Edit(line_end, line_end, after)]


def _uncommented(cst, whitespace):
    """``whitespace`` without the comment on its first line (the comment of a name that moved)."""
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return whitespace.with_changes(first_line=cst.TrailingWhitespace())
    return whitespace


def _local(alias: ast.alias, new: str) -> str | None:
    """The `as` name an import of ``new`` needs to bind what ``alias`` bound (None: none needed).
    An explicit `X as X` stays: it marks a re-export for type checkers."""
    local = alias.asname or alias.name
    return None if local == new.rpartition(".")[2] and alias.asname != alias.name else local
