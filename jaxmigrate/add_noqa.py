"""``--add-noqa``, as ruff's: a ``# noqa: CODE`` comment on each line with findings, so a codebase
can adopt jaxmigrate now and remove the comments as it migrates.

A line that already has a ``# noqa: A, B`` gets its codes merged in (sorted, once each); a line
with another comment (``# type: ignore``) gets the directive after it. Findings are suppressed by
a comment on their first line (``lint/suppressions.py``); where that line ends inside a string
that goes on to the next line, no comment can be added without changing the string, and the
finding is counted as skipped instead. Notebooks are skipped too (as ruff does: a cell's comment
is the user's text to write). Files are written atomically, and only if unchanged since read.
"""

from __future__ import annotations

import io
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from jaxmigrate.core.source import SourceText
from jaxmigrate.files import (
    NOTEBOOK_SUFFIX,
    FileChanged,
    SourceError,
    decode,
    encode,
    fingerprint,
    write_atomic,
)
# The checker's own grammar of a directive: what is added here is what it reads.
from jaxmigrate.lint.suppressions import _CODE, _NOQA
from jaxmigrate.lint.findings import Finding

# Findings of the tool itself: a noqa does not suppress them (lint/suppressions.py).
UNSUPPRESSIBLE = frozenset({"JM000", "JM001"})


@dataclass
class Added:
    directives: int = 0  # lines given (or extended with) a noqa
    skipped: list[str] = field(default_factory=list)  # why some findings got none, one line each


def add_noqa(findings: list[Finding]) -> Added:
    added = Added()
    by_file: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for finding in findings:
        if finding.code in UNSUPPRESSIBLE:
            continue
        if finding.path.endswith(NOTEBOOK_SUFFIX) or finding.cell is not None:
            added.skipped.append(f"{finding.location}: {finding.code} (notebooks are not edited)")
            continue
        by_file[finding.path][finding.line].add(finding.code)
    for path, codes_by_line in sorted(by_file.items()):
        added.directives += _add_to_file(Path(path), codes_by_line, added.skipped)
    return added


def _add_to_file(path: Path, codes_by_line: dict[int, set[str]], skipped: list[str]) -> int:
    try:
        raw = path.read_bytes()
        source = decode(raw, str(path))
    except (OSError, SourceError) as error:
        skipped.append(f"{path}: cannot read it ({error})")
        return 0
    new_text, count = with_noqa(source.text, codes_by_line, str(path), skipped)
    if count:
        try:
            write_atomic(path, encode(source, new_text), expected=fingerprint(raw))
        except (OSError, SourceError, FileChanged) as error:
            skipped.append(f"{path}: not written ({type(error).__name__}: {error})")
            return 0
    return count


def with_noqa(text: str, codes_by_line: dict[int, set[str]], path: str = "<text>",
              skipped: list[str] | None = None) -> tuple[str, int]:
    """``text`` with the codes added to each line's noqa directive, and how many lines changed."""
    skipped = skipped if skipped is not None else []
    source = SourceText(text)
    comments, in_string = _comments_and_open_strings(text)
    pieces = []
    count = 0
    previous_end = 0
    for line in sorted(codes_by_line):
        if line > len(source.line_starts):
            continue
        if line in in_string:
            codes = ", ".join(sorted(codes_by_line[line]))
            skipped.append(f"{path}:{line}: {codes} (the line ends inside a multi-line string)")
            continue
        content = source.line(line)
        if line not in comments and content.rstrip().endswith("\\"):
            codes = ", ".join(sorted(codes_by_line[line]))
            skipped.append(f"{path}:{line}: {codes} (the line goes on with a backslash)")
            continue
        start = source.line_starts[line - 1]
        end = start + len(content)
        new = _with_codes(content, comments.get(line), codes_by_line[line])
        if new != content:
            pieces.append(text[previous_end:start] + new)
            previous_end = end
            count += 1
    pieces.append(text[previous_end:])
    return "".join(pieces), count


def _with_codes(content: str, comment: tuple[int, str] | None, codes: set[str]) -> str:
    """The line with a noqa for ``codes``: merged into its noqa comment, or added after its code
    (or comment)."""
    if comment is not None:
        column, text = comment
        match = _NOQA.search(text)
        if match is not None:
            if not match.group("codes"):
                return content  # a blanket directive (no codes) suppresses every code already
            merged = sorted({c.upper() for c in _CODE.findall(match.group("codes"))} | codes)
            directive = f"# noqa: {', '.join(merged)}"
            return content[:column] + text[: match.start()] + directive + text[match.end():]
    body = content.rstrip()
    return f"{body}  # noqa: {', '.join(sorted(codes))}"


def _comments_and_open_strings(text: str) -> tuple[dict[int, tuple[int, str]], set[int]]:
    """The comment on each line (its column and text), and the lines whose end lies inside a
    string token that goes on past it (a triple-quoted string, an f-string spanning lines)."""
    comments: dict[int, tuple[int, str]] = {}
    in_string: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = (token.start[1], token.string)
            elif token.start[0] < token.end[0] and token.type in _STRING_TYPES:
                in_string.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass  # no findings but JM000 come from a text that does not tokenize
    return comments, in_string


_STRING_TYPES = {tokenize.STRING} | {getattr(tokenize, name) for name in ("FSTRING_MIDDLE", "FSTRING_START")
                                     if hasattr(tokenize, name)}
