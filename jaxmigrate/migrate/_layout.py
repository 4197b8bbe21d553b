"""Rewritten lines kept within the file's line length, the way a formatter would break them.

A line a plan's edits made longer than the file's width is broken at its outermost bracket that
opens and closes on it: one element per line, indented one step (the file's own continuation step)
past the line, a trailing comma, the closing bracket back at the line's indentation - black's
"magic trailing comma" layout, which every formatter reads as intended. An element still too long
is broken the same way. Lines the edits did not lengthen are never touched, nor are brackets with
a comprehension or a comment inside, nor a line that also closes a bracket opened above it, unless
it holds every element of that bracket, opened at the end of the line above: then that bracket is
the one broken. So is a bracket whose elements, two or more, are the whole of a line between its
opener, ending the line above, and its closer, starting the line below (black's layout for
arguments that fit one line): one element per line there.

The width is the project's configured line length (``line-length``, or ruff's or black's in the
same pyproject.toml) when it has one; else the file's: the narrowest usual width (79, 80, 88, 100, 120) its lines keep to, so a
file written to 80 columns gets 80-column rewrites; 88 (black's and ruff's default) for a file
whose lines are all too short to tell.
"""

from __future__ import annotations

import ast
import bisect
import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.fstrings import FStrings
from jaxmigrate.core.module import index as index_nodes
from jaxmigrate.core.source import SourceText, continuation_unit

_WIDTHS = (79, 80, 88, 100, 120)
_NO_EVIDENCE = 72  # a file of shorter lines could be written to any of the widths
_BRACKETS = {ast.Call: "()", ast.Tuple: "()", ast.List: "[]", ast.Dict: "{}", ast.Set: "{}"}
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_QUOTE_OR_COMMENT = re.compile(r"[\'\"#]")
_BRACKET_CHARS = re.compile(r"[()\[\]{}]")


_CONFIGURED: ContextVar[int | None] = ContextVar("line_width", default=None)


@contextmanager
def line_width(width: int | None) -> Iterator[None]:
    """Rewritten lines keep to ``width`` (the project's configured line length) while fixing; None:
    to each file's own width."""
    token = _CONFIGURED.set(width)
    try:
        yield
    finally:
        _CONFIGURED.reset(token)


def line_limit(text: str) -> int:
    """The width this file is written to: the narrowest usual width that at most one line in a
    hundred (and at least one line) goes past. A stray long line does not widen it, and neither do
    the fix passes before this one (they see the file with earlier rewrites made)."""
    if (configured := _CONFIGURED.get()) is not None:
        return configured
    lengths = [len(line) for line in text.splitlines()]
    if max(lengths, default=0) <= _NO_EVIDENCE:
        return 88  # nothing says how wide the file may be: black's and ruff's default
    allowed = max(1, len(lengths) // 100)
    return next((w for w in _WIDTHS if sum(n > w for n in lengths) <= allowed), _WIDTHS[-1])


def fit_edits(original: str, edits: list[Edit], text: str, fstrings: FStrings | None = None) -> str:
    """``text`` (``original`` with ``edits`` made) with every line an edit made longer than the
    file's width broken at its brackets."""
    limit = line_limit(original)
    old = SourceText(original)
    lengthened = set()
    shift = 0
    new_starts = SourceText(text).line_starts
    fstrings = fstrings or FStrings(original)
    line_starts = set(old.line_starts)
    for edit in sorted(edits):
        old_line = old.position(edit.start)[0]
        start = edit.start + shift
        shift += len(edit.content) - (edit.end - edit.start)
        if fstrings.inside(edit):  # a line break there does not parse before Python 3.12
            continue
        whole_lines = edit.start in line_starts and edit.end in line_starts
        if whole_lines and not edit.content:
            continue  # whole lines removed (a `pmean` gone): the line after them is as it was
        first = _line_of(new_starts, start)
        # What ends with its own line break ends on that line, not on the unchanged one after it.
        last = _line_of(new_starts, start + len(edit.content) - (whole_lines and edit.content.endswith("\n")))
        for line in range(first, last + 1):
            lengthened.add((line, len(old.line(old_line))))
    unit = functools.cache(lambda: continuation_unit(original))  # most passes break no line
    # Bottom up: fitting a line changes only the lines from it down, so the spliced text's line
    # table and (one) parse still hold for every line above. Reading them afresh for each line
    # made a file with many rewritten long lines quadratic.
    # The broken lines are collected, bottom up, and joined into the text once: splicing each into
    # the whole text made a file with many of them quadratic (a copy of the file per line).
    layout, seen = _Layout(text), set()
    pieces: list[tuple[int, int, str]] = []  # (start, end, new text), starts decreasing
    for line, was in sorted(lengthened, reverse=True):
        if line in seen:
            # A line two edits lengthened is looked at again as it now is.
            text, pieces = _joined(text, pieces), []
            text = _fit_line(text, line, limit, unit, was)
        else:
            piece = _fitted_line(text, line, limit, unit, was, layout)
            if piece is not None:
                pieces.append(piece)
                lines = piece[2].split("\n")
                # Broken at its largest bracket, the line may still open or close too long: two
                # rewrites side by side (`a, b = <long>, <long>`), the other one broken in turn
                # (the last line first: fitting it leaves the lines above as they are).
                ends = [i for i in dict.fromkeys((len(lines) - 1, 0)) if len(lines[i].rstrip("\r")) > limit]
                if ends:
                    text, pieces = _joined(text, pieces), []
                    for end in ends:
                        for _ in range(8):
                            fitted = _fit_line(text, line + end, limit, unit, was)
                            if fitted == text:
                                break
                            text = fitted
        seen.add(line)
    return _joined(text, pieces)


def _joined(text: str, pieces: list[tuple[int, int, str]]) -> str:
    """``text`` with the non-overlapping ``pieces`` (starts decreasing) put in."""
    if not pieces:
        return text
    parts, at = [], 0
    for start, end, new in reversed(pieces):
        parts += (text[at:start], new)
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _unmatched(fragment: str) -> tuple[int, int]:
    """(closing brackets that close nothing opened in ``fragment``, brackets left open), counted
    outside string literals and comments."""
    closers = opened = 0
    if not _QUOTE_OR_COMMENT.search(fragment):
        # No string or comment: every bracket is one (tokenizing each line costs 10x as much).
        brackets = _BRACKET_CHARS.findall(fragment)
    else:
        brackets = [tok.string for tok in _tokens(fragment) if tok.type == tokenize.OP]
    for bracket in brackets:
        if bracket in "([{":
            opened += 1
        elif bracket in ")]}":
            if opened:
                opened -= 1
            else:
                closers += 1
    return closers, opened


def _tokens(fragment: str) -> list[tokenize.TokenInfo]:
    """The fragment's tokens, up to where the tokenizer gives up (at the end, on an open bracket)."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(fragment).readline):
            found.append(tok)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return found


def _line_of(starts: list[int], offset: int) -> int:
    return bisect.bisect_right(starts, offset)


class _Layout:
    """A text's line table and, on first need, its brackets that open and close on one line."""

    def __init__(self, text: str) -> None:
        self.source = SourceText(text)
        self._brackets: dict[int, list[ast.expr]] | None = None
        self._hugged: dict[int, ast.expr] = {}

    def hugged(self, line: int) -> ast.expr | None:
        """The bracket whose two or more elements are all on ``line``, opened on the line above and
        closed on the line below (``f(\\n    a, b\\n)``); None if there is none."""
        return self._hugged.get(line) if self.brackets(line) is not None else None

    def brackets(self, line: int) -> list[ast.expr] | None:
        """The bracket nodes on ``line`` in walk order; None when the text does not parse."""
        if self._brackets is None:
            try:
                tree = ast.parse(self.source.text)
            except SyntaxError:
                return None
            self._brackets = {}
            nodes, by_type = index_nodes(tree)  # one fast walk, not two of ast.walk
            # `[f(\n    a,\n) for a in b]` is no one's layout: nothing inside a comprehension on
            # one line (one broken black's way, a clause a line, may break its element further).
            inside = {id(inner) for kind in _COMPREHENSIONS for _, comp in by_type.get(kind, ())
                      if comp.lineno == comp.end_lineno for inner in ast.walk(comp) if inner is not comp}
            kinds = (*_BRACKETS, *_COMPREHENSIONS)
            for _, node in sorted(item for kind in kinds for item in by_type.get(kind, ())):
                if node.lineno == node.end_lineno and id(node) not in inside:
                    self._brackets.setdefault(node.lineno, []).append(node)
                elif node.end_lineno == node.lineno + 2 and isinstance(node, tuple(_BRACKETS)):
                    elements = _elements(node)
                    if len(elements) >= 2 and all(e.lineno == e.end_lineno == node.lineno + 1 for e in elements):
                        self._hugged[node.lineno + 1] = node
        return self._brackets.get(line, [])


def _fit_line(text: str, line: int, limit: int, unit: Callable[[], str], was: int,
              layout: _Layout | None = None) -> str:
    """``text`` with ``line`` broken at its brackets if it is too long. ``layout`` is the text as
    it was before any line from ``line`` down changed (the same as ``text`` above it)."""
    piece = _fitted_line(text, line, limit, unit, was, layout)
    if piece is None:
        return text
    start, end, new = piece
    return text[:start] + new + text[end:]


def _fitted_line(text: str, line: int, limit: int, unit: Callable[[], str], was: int,
                 layout: _Layout | None = None) -> tuple[int, int, str] | None:
    """``line`` broken at its brackets if it is too long: (start, end, the text to put there), or
    None to leave it as it is (``_fit_line``'s answer, as a piece of ``text``)."""
    if layout is None:
        layout = _Layout(text)
    source = layout.source
    if line > len(source.line_starts):
        return None
    current = source.line(line)
    if len(current) <= limit or len(current) <= was:
        return None
    brackets = layout.brackets(line)
    if brackets is None:
        return None
    hugged = layout.hugged(line)
    broken = _hugged_bracket_broken(text, source, line, hugged, limit, unit) if hugged is not None else None
    if broken is not None:
        return broken
    node = _outermost_bracket(brackets, source)
    if node is None:
        return None
    head = text[source.line_starts[line - 1]:source.span(node)[0]]
    tail = text[source.span(node)[1]:source.line_starts[line - 1] + len(current)]
    if _unmatched(tail)[0] > _unmatched(head)[1]:
        # The line also closes a bracket opened on a line above: breaking it here would stack
        # closing brackets. Where it holds all of that bracket's elements, hanging below its
        # opener (`tree_map(` / `    lambda v: ..., value)`), that bracket is the one broken.
        return _closing_bracket_broken(text, layout, line, limit, unit)
    new_lines = _explode(source, node, line, unit())
    if new_lines is None:
        return None
    start = source.line_starts[line - 1]
    end = start + len(current)
    nl = source.newline
    block = nl.join(new_lines)
    # The elements may still be too long: each gets the same treatment, bottom up (an element
    # within the width needs no second look).
    long = [index for index in range(len(new_lines) - 1, 0, -1) if len(new_lines[index]) > limit]
    if long:
        block = _fit_elements(text, start, end, block, line, source.span(node)[0], new_lines, nl, long, limit,
                              unit)
    return start, end, block


def _closing_bracket_broken(text: str, layout: _Layout, line: int, limit: int,
                            unit: Callable[[], str]) -> tuple[int, int, str] | None:
    """``line`` holding every element of a bracket opened at the end of the line above and closed
    at the end of this one, rewritten one element per line at this line's indentation (a trailing
    comma each), the closing bracket on its own line at the opener's; each element still too long
    broken in turn. None where the line is not that."""
    source = layout.source
    current = source.line(line)
    start = source.line_starts[line - 1]
    end = start + len(current)
    enclosing = _hanging_bracket(source, line, start + len(current.rstrip()))
    if enclosing is None or isinstance(enclosing, ast.Dict):
        return None
    opener = _opener(source, enclosing)
    if opener is None or text[opener:start].strip() or "#" in _comments(text[opener:source.span(enclosing)[1] - 1]):
        return None
    indent = current[: len(current) - len(current.lstrip())]
    above = source.line(line - 1)
    items = _element_texts(source, enclosing)
    closing = text[source.span(enclosing)[1] - 1]
    lines = [*(f"{indent}{item}," for item in items), above[: len(above) - len(above.lstrip())] + closing]
    nl = source.newline
    block = nl.join(lines)
    whole = text[:start] + block + text[end:]
    del enclosing  # (the parse it came from is not held while the elements' lines are parsed)
    for index in range(len(items) - 1, -1, -1):
        if len(lines[index]) > limit:
            whole = _fit_line(whole, line + index, limit, unit, 0)
    return start, end, whole[start:len(whole) - (len(text) - end)]


def _hugged_bracket_broken(text: str, source: SourceText, line: int, node: ast.expr, limit: int,
                           unit: Callable[[], str]) -> tuple[int, int, str] | None:
    """``line``, the elements of ``node`` between its opener ending the line above and its closer
    starting the line below, rewritten one element per line at this line's indentation, a trailing
    comma each (black's next layout once they no longer fit one line); each element still too long
    broken in turn. None where the line holds more than the elements, or a comment."""
    opener = _opener(source, node)
    if opener is None:
        return None
    current = source.line(line)
    start = source.line_starts[line - 1]
    end = start + len(current)
    close = source.span(node)[1] - 1
    elements = _elements(node)
    first, last = source.span(elements[0])[0], source.span(elements[-1])[1]
    if isinstance(elements[0], ast.keyword) and elements[0].arg is None:
        first = text.rindex("**", 0, source.span(elements[0].value)[0])
    if text[opener:start].strip() or text[start:first].strip() or text[last:end].strip() not in ("", ",") \
            or text[end:close].strip() or "#" in _comments(text[opener:close]):
        return None
    indent = current[: len(current) - len(current.lstrip())]
    lines = [f"{indent}{item}," for item in _element_texts(source, node)]
    block = source.newline.join(lines)
    whole = text[:start] + block + text[end:]
    for index in range(len(lines) - 1, -1, -1):
        if len(lines[index]) > limit:
            whole = _fit_line(whole, line + index, limit, unit, 0)
    return start, end, whole[start:len(whole) - (len(text) - end)]


def _hanging_bracket(source: SourceText, line: int, line_end: int) -> ast.expr | None:
    """The bracket opened on the line above ``line`` and closed at its end (``line_end``), whose
    elements are all on ``line``; None if there is none (or the text does not parse)."""
    try:
        tree = ast.parse(source.text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, tuple(_BRACKETS)) and node.lineno == line - 1 and node.end_lineno == line \
                and source.span(node)[1] == line_end:
            elements = _elements(node)
            if elements and all(e.lineno == line and e.end_lineno == line for e in elements):
                return node
    return None


def _fit_elements(text: str, start: int, end: int, block: str, line: int, node_start: int, new_lines: list[str],
                  nl: str, long: list[int], limit: int, unit: Callable[[], str]) -> str:
    """``block`` (the bracket just broken at ``line``, to replace ``text[start:end]``) with the
    element lines ``long`` (indexes into ``new_lines``) fitted in turn, bottom up. They are fitted
    within the bracket's own text, parsed alone: parsing the whole file again for each such line
    made a file with many of them quadratic. (Should that text not parse alone, the whole file is
    read again.)"""
    last = new_lines[-1]  # the closing bracket, at the line's indentation
    node_end = start + sum(len(piece) + len(nl) for piece in new_lines[:-1]) + len(last) - len(last.lstrip()) + 1
    fragment = block[node_start - start:node_end - start]
    try:
        ast.parse(fragment)
    except SyntaxError:
        fragment = None
    if fragment is None:
        whole = text[:start] + block + text[end:]
        for index in long:
            whole = _fit_line(whole, line + index, limit, unit, 0)
        return whole[start:len(whole) - (len(text) - end)]  # the lines after the block are as they were
    for index in long:
        fragment = _fit_line(fragment, 1 + index, limit, unit, 0)  # line 1 is the bracket's first
    return block[:node_start - start] + fragment + block[node_end - start:]


def _outermost_bracket(brackets: list[ast.expr], source: SourceText) -> ast.expr | None:
    """The bracket of its line holding the most text (with elements): in
    ``jax.jit(f, in_shardings=...)(x)`` the arguments of ``jit``, not the ``(x)``."""
    best, best_len = None, 0
    for node in brackets:
        if not _elements(node) or isinstance(getattr(node, "ctx", None), ast.Store):
            continue  # nothing to break, or an assignment's targets: a formatter breaks the value
        opener = _opener(source, node)
        if opener is None:
            continue
        inside = source.span(node)[1] - opener
        if inside > best_len:
            best, best_len = node, inside
    return best


def _elements(node: ast.expr) -> list[ast.AST]:
    if isinstance(node, _COMPREHENSIONS):
        element = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return [*element, *node.generators]
    if isinstance(node, ast.Call):
        if any(isinstance(a, ast.GeneratorExp) for a in node.args) and len(node.args) + len(node.keywords) == 1:
            return []
        return sorted([*node.args, *node.keywords], key=lambda n: (n.lineno, n.col_offset))
    if isinstance(node, ast.Dict):
        return node.values if all(k is not None for k in node.keys) else []
    return list(node.elts)  # type: ignore[attr-defined]


def has_own_brackets(source: SourceText, node: ast.expr) -> bool:
    """Whether ``node`` is written inside brackets of its own: ``(a, b)``, not ``(a), (b)``."""
    return _opener(source, node) is not None


def _opener(source: SourceText, node: ast.expr) -> int | None:
    """The offset just after the opening bracket, or None when ``node`` has no bracket of its own
    (a tuple without parentheses)."""
    start, _ = source.span(node)
    text = source.text
    if isinstance(node, ast.Call):
        _, func_end = source.span(node.func)
        at = text.index("(", func_end)
        return at + 1
    opening = "([{"[[ast.GeneratorExp, ast.ListComp, ast.SetComp].index(type(node))] if isinstance(
        node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)) else "{" if isinstance(node, ast.DictComp) \
        else _BRACKETS[type(node)][0]
    if text[start] != opening:
        return None
    if isinstance(node, ast.Tuple):
        # `(a, b), c` starts with its first element's bracket, not one of its own: its own
        # closes at its very end, with nothing unbalanced between (`(a), (c)` has a `)` too).
        _, end = source.span(node)
        if text[end - 1] != ")" or _unmatched(text[start + 1:end - 1]) != (0, 0):
            return None
    return start + 1


def _explode(source: SourceText, node: ast.expr, line: int, unit: str) -> list[str] | None:
    text = source.text
    line_start = source.line_starts[line - 1]
    current = source.line(line)
    indent = current[: len(current) - len(current.lstrip())]
    opener = _opener(source, node)
    _, end = source.span(node)
    close = end - 1
    inner = text[opener:close]
    if "#" in _comments(inner):
        return None
    head = text[line_start:opener]
    tail = text[close:line_start + len(current)]
    if isinstance(node, _COMPREHENSIONS):
        # black's: the element, then each `for ... in ...` (and its `if`s) on a line, no commas
        lines = _comprehension_lines(text, source, node)
        return None if lines is None else [head, *(f"{indent}{unit}{item}" for item in lines), f"{indent}{tail}"]
    return [head, *(f"{indent}{unit}{item}," for item in _element_texts(source, node)), f"{indent}{tail}"]


def _element_texts(source: SourceText, node: ast.expr) -> list[str]:
    """The text of each element of the bracket ``node``: a dict's items with their keys, a call's
    keyword arguments with their names and ``*`` / ``**`` ones with their operators."""
    text = source.text
    if isinstance(node, ast.Call):
        # keyword nodes span `name=value`; ** arguments start at their operator
        return [_with_operator(text, source, e) for e in _elements(node)]
    items = []
    for element in _elements(node):
        if isinstance(node, ast.Dict):
            key = node.keys[node.values.index(element)]
            start = source.span(key)[0]
        else:
            start = source.span(element)[0]
        items.append(text[start:source.span(element)[1]])
    return items


def _comprehension_lines(text: str, source: SourceText, node: ast.expr) -> list[str] | None:
    """The element of a comprehension (``key: value``), then each of its clauses, as written."""
    if isinstance(node, ast.DictComp):
        lines = [text[source.span(node.key)[0]:source.span(node.value)[1]]]
    else:
        lines = [text[slice(*source.span(node.elt))]]
    previous_end = source.span(node.value if isinstance(node, ast.DictComp) else node.elt)[1]
    for clause in node.generators:
        start = text.find("for", previous_end)  # `async for` has its `async` first
        if clause.is_async:
            start = text.rfind("async", previous_end, start)
        if start < 0:
            return None
        lines.append(text[start:source.span(clause.iter)[1]])
        previous_end = source.span(clause.iter)[1]
        for condition in clause.ifs:
            start = text.find("if", previous_end)
            lines.append(text[start:source.span(condition)[1]])
            previous_end = source.span(condition)[1]
    return lines


def _with_operator(text: str, source: SourceText, element: ast.AST) -> str:
    start, end = source.span(element)
    if isinstance(element, ast.keyword) and element.arg is None:
        value_start = source.span(element.value)[0]
        start = text.rindex("**", 0, value_start)
    return text[start:end]


def _comments(fragment: str) -> str:
    """``#`` when the fragment holds a comment token, else ''."""
    if not _QUOTE_OR_COMMENT.search(fragment) and "\\" not in fragment:
        # No comment can be there; the tokenizer would fail (as below) only where as many
        # brackets do not open as close. (Tokenizing each rewritten line's brackets cost a
        # tenth of a fix.)
        brackets = _BRACKET_CHARS.findall(fragment)
        return "#" if 2 * sum(b in "([{" for b in brackets) != len(brackets) else ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(fragment).readline):
            if tok.type == tokenize.COMMENT:
                return "#"
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return "#"  # unbalanced on its own: treat as unsafe to move
    return ""
