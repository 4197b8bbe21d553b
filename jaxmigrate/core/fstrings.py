"""Edits that land inside an f-string's replacement field, made so the f-string still parses.

Before Python 3.12 a replacement field cannot hold the f-string's own quote character, and a
single-quoted f-string cannot hold a line break: ``print(f"{jax.device_put_replicated(x, ds)}")``
rewritten with ``P("devices")``, or broken over lines to fit the file's width, no longer parsed,
and the fix was thrown away after the lint had offered it. Every codemod's edits pass through
here, so none has to know: string literals of the rewrite take the other quote character, and the
layout leaves those lines alone (``inside``). ``_plan.apply`` reads a text's f-strings once for both.
"""

from __future__ import annotations

import io
import re
import tokenize
from bisect import bisect_right

from jaxmigrate.core.edits import Edit

_MAYBE_FSTRING = re.compile(r"""(?<![\w'"])(?:[fF][rR]?|[rR][fF])['"]""")
_PREFIX = re.compile(r"""^[a-zA-Z]*""")


class FStrings:
    """The f-string literals of one text: their spans and quote characters."""

    def __init__(self, text: str) -> None:
        self._starts: list[int] = []
        self._spans: list[tuple[int, int, str]] = []  # (start, end, quote)
        if _MAYBE_FSTRING.search(text):
            self._read(text)

    def _read(self, text: str) -> None:
        try:
            for start, end, prefix, string in _strings(text):
                if "f" in prefix.lower():
                    body = string[len(prefix):]
                    quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
                    self._starts.append(start)
                    self._spans.append((start, end, quote))
        except (tokenize.TokenError, SyntaxError, IndexError):
            self._starts, self._spans = [], []

    def around(self, start: int, end: int) -> str | None:
        """The quote of the f-string the span ``start:end`` lies inside (None: in none)."""
        index = bisect_right(self._starts, start) - 1
        if index < 0:
            return None
        f_start, f_end, quote = self._spans[index]
        return quote if f_start < start and end < f_end else None

    def inside(self, edit: Edit) -> bool:
        return self.around(edit.start, edit.end) is not None


def requoted(fstrings: FStrings, edits: list[Edit]) -> list[Edit]:
    """``edits`` with every one inside an f-string spelling its string literals with the quote
    character the f-string does not use (where a literal holds neither quote nor backslash)."""
    out = []
    for edit in edits:
        quote = fstrings.around(edit.start, edit.end)
        out.append(edit if quote is None or quote[0] not in edit.content
                   else Edit(edit.start, edit.end, _requote(edit.content, quote[0])))
    return out


def _requote(content: str, quote: str) -> str:
    other = "'" if quote == '"' else '"'
    pieces, last = [], 0
    try:
        strings = list(_strings(content))
    except (tokenize.TokenError, SyntaxError):
        return content
    for start, end, prefix, string in strings:
        literal = string[len(prefix):]
        if not literal.startswith(quote) or literal.startswith(quote * 3):
            continue
        inner = literal[1:-1]
        if quote in inner or other in inner or "\\" in inner:
            continue  # left as it is: the fix loop's parse check declines the rewrite
        pieces += [content[last:start], prefix + other + inner + other]
        last = end
    return "".join(pieces) + content[last:]


def _strings(text: str):
    """(start offset, end offset, prefix, token text) of each string literal token of ``text``."""
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING:
            yield (line_starts[token.start[0] - 1] + token.start[1], line_starts[token.end[0] - 1] + token.end[1],
                   _PREFIX.match(token.string).group(), token.string)
