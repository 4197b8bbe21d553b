"""Positions: ast's (1-based line, UTF-8 byte column) to text offsets and back."""

from __future__ import annotations

import ast
import bisect
import re
from functools import cached_property

_NEWLINE = re.compile(r"\r\n|\r|\n")  # what Python's tokenizer counts as a line break, no more

# The comment line the code cells of a notebook are joined with (``jaxmigrate.notebooks``): a
# line inserted right below one starts the next cell, right above one ends the previous cell.
CELL_BOUNDARY = "# jaxmigrate-notebook-cell-boundary"


class SourceText:
    """Maps between ast positions (1-based line, UTF-8 byte column) and text offsets."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def line_starts(self) -> list[int]:
        # Built on first use: most checked files report nothing and never need it.
        return [0] + [m.end() for m in _NEWLINE.finditer(self.text)]

    @cached_property
    def _ascii(self) -> bool:
        return self.text.isascii()

    def offset(self, line: int, byte_col: int) -> int:
        start = self.line_starts[line - 1]
        if self._ascii:  # bytes are characters: no line to read (most files, most positions)
            return start + byte_col
        line_text = self.line(line)
        if line_text.isascii():
            return start + byte_col
        return start + len(line_text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def line(self, line: int) -> str:
        """The text of a 1-based line, without its line break."""
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, character column) of a text offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno, node.end_col_offset)
        return start, end

    @cached_property
    def newline(self) -> str:
        match = _NEWLINE.search(self.text)
        return match.group() if match else "\n"


def continuation_unit(text: str) -> str:
    """How much deeper than a line ending in an open bracket the file writes the next line: the
    most common such step (Google style writes 4 in a 2-space file), else its indentation unit."""
    steps: dict[str, int] = {}
    opener = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if opener is not None and len(indent) > len(opener) and indent.startswith(opener):
            step = indent[len(opener):]
            steps[step] = steps.get(step, 0) + 1
        opener = indent if stripped.split("  #", 1)[0].rstrip().endswith(("(", "[", "{")) else None
    return max(steps, key=steps.get) if steps else indent_unit(text)


def indent_unit(text: str) -> str:
    """The file's indentation step, four spaces when it has none: how much deeper than a line
    ending in ``:`` the next line of code starts. Read off the lines, not the tokens: tokenizing a
    whole file for this on every fix pass cost more than the rest of the pass."""
    opener = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if opener is not None and len(indent) > len(opener) and indent.startswith(opener):
            return indent[len(opener):]
        opener = indent if stripped.split("  #", 1)[0].rstrip().endswith(":") else None
    return "    "
