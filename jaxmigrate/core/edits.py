"""Text edits at exact offsets, the one currency of every fix and codemod."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``source[start:end]`` with ``content`` (offsets index the decoded text)."""

    start: int
    end: int
    content: str


def splice(text: str, edits: Iterable[Edit]) -> str:
    """``text`` with every edit made; edits must not overlap (an insertion may touch a neighbour)."""
    out, last = [], len(text)
    for edit in sorted(edits, reverse=True):
        if edit.end > last:
            raise AssertionError(f"overlapping edits at offset {edit.start}")
        out += [text[edit.end:last], edit.content]
        last = edit.start
    return text[:last] + "".join(reversed(out))
