"""A pmap call with comments inside, made a ``jax.jit`` call by editing only what changes.

``jax.pmap(f, ...)`` is otherwise written anew, which would drop the comments between its
arguments (a commented-out option, a note on one). Here the callee becomes ``jax.jit``, the
options jit takes keep their place (``static_broadcasted_argnums=`` renamed), and the others go:
an option on lines of its own goes with those lines, a comment ending them included (it speaks
of that option); one sharing a line goes with its comma. Where that would delete a comment
anywhere else, the call is ``Blocked``.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.edits import Edit
from jaxmigrate.migrate.global_view.kinds import Blocked

LOST = "comments inside the pmap call would be lost; migrate by hand"


def jit_in_place(module, call: ast.Call, jit: str, renamed: dict[str, str]) -> list[Edit]:
    """The edits making ``call`` (``jax.pmap(f, <options>)``) ``<jit>(f, <options jit takes>)``:
    ``renamed`` maps each pmap option jit takes to jit's name for it; every other option goes."""
    edits = [Edit(*module.span(call.func), jit), *_realigned(module, call, len(jit) - len(module.segment(call.func)))]
    items = call_arguments(call)
    going = [isinstance(item, ast.keyword) and item.arg not in renamed or item in call.args[1:] for item in items]
    for item in items:
        if isinstance(item, ast.keyword) and item.arg in renamed and renamed[item.arg] != item.arg:
            start = module.span(item)[0]
            edits.append(Edit(start, start + len(item.arg), renamed[item.arg]))
    index = 0
    while index < len(items):
        if not going[index]:
            index += 1
            continue
        last = index
        while last + 1 < len(items) and going[last + 1]:
            last += 1
        run = items[index:last + 1]
        lines = [_own_lines(module, item) for item in run]
        if all(lines):
            edits += [Edit(start, end, "") for start, end in lines]
        else:
            start, end = arguments_span(module, items, index, last)
            if module.comment_between(start, end):
                raise Blocked(call.lineno, LOST)
            edits.append(Edit(start, end, ""))
        index = last + 1
    return edits


def call_arguments(call: ast.Call) -> list[ast.AST]:
    """``call``'s arguments and keywords, in the order they are written."""
    return sorted([*call.args, *call.keywords], key=lambda item: (item.lineno, item.col_offset))


def arguments_span(module, items: list[ast.AST], first: int, last: int) -> tuple[int, int]:
    """The text that takes ``items[first:last + 1]`` (of ``call_arguments``) out of their call with
    one of their commas: up to the next argument (`f, axis_name="i", donate_argnums=0`), or, for
    the last, from the end of the one before."""
    if last + 1 < len(items):
        return module.span(items[first])[0], module.span(items[last + 1])[0]
    return module.span(items[first - 1])[1], module.span(items[last])[1]


def _own_lines(module, item: ast.AST) -> tuple[int, int] | None:
    """The span of the whole lines ``item`` fills, with its comma and a comment ending them."""
    text, starts = module.text, module.src.line_starts
    start, end = module.span(item)
    first = starts[item.lineno - 1]
    if text[first:start].strip():
        return None
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    rest = text[end:line_end].strip()
    if rest.startswith(","):
        rest = rest[1:].strip()
    if rest and not (rest.startswith("#") and module.comment_between(end, line_end)):
        return None
    return first, min(line_end + 1, len(text))


def _realigned(module, call: ast.Call, shift: int) -> list[Edit]:
    """Lines aligned under the call's opening bracket (``jax.pmap(step, "i",`` then its options
    under ``step``) move with it, by the callee's change of length."""
    if not shift:
        return []
    starts = module.src.line_starts
    column = module.src.position(module.span(call.func)[1])[1]  # (1-based: the 0-based column after the bracket)
    edits = []
    for number in range(call.lineno + 1, call.end_lineno + 1):
        start = starts[number - 1]
        line = module.src.line(number)
        indent = len(line) - len(line.lstrip(" "))
        if indent == column and line.strip():
            edits.append(Edit(start, start + indent, " " * (indent + shift)))
    return edits
