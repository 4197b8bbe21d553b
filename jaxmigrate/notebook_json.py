"""Write new cell sources into a notebook's JSON text in place, keeping every other byte.

A notebook's JSON is formatted by whatever wrote it (nbformat's one-space indent, a compact one
line, ``ensure_ascii`` or not, a final newline or none). Dumping the parsed document again would
rewrite all of it; instead the ``source`` values of the changed cells are found in the text (a
walk over the JSON that reads positions, with the standard library's own string and value
scanners) and only they are replaced, in the style of the value they replace.
"""

from __future__ import annotations

import json
import re

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class JsonLayoutError(ValueError):
    """The text is not the JSON object expected (the caller parsed it already: not expected)."""


def replace_sources(text: str, sources: dict[int, str | list[str]]) -> str:
    """``text`` with ``cells[i]["source"]`` replaced by ``sources[i]`` for every i given."""
    spans = _source_spans(text)
    for index in sorted(sources, reverse=True):  # from the end: earlier offsets stay right
        if index not in spans:
            raise JsonLayoutError(f"cell {index + 1} has no source in the notebook's text")
        start, end = spans[index]
        text = text[:start] + _dumped_like(sources[index], text[start:end], text) + text[end:]
    return text


def _dumped_like(value: str | list[str], original: str, document: str) -> str:
    """``value`` as JSON written the way ``original`` (the value it replaces) was."""
    ascii_only = "\\u" in document and document.isascii()
    if isinstance(value, str) or not value:
        return json.dumps(value, ensure_ascii=ascii_only)
    items = [json.dumps(item, ensure_ascii=ascii_only) for item in value]
    if "\n" not in original:  # all on one line, as json.dumps writes it without indent
        separator = ", " if '": ' in document else ","
        return "[" + separator.join(items) + "]"
    first = re.match(r"\[([ \t]*\r?\n)([ \t]*)", original)
    last = re.search(r"(\r?\n[ \t]*)\]$", original)
    if not first or not last:
        return json.dumps(value, ensure_ascii=ascii_only)
    newline, indent = first.group(1), first.group(2)
    return "[" + newline + indent + ("," + newline + indent).join(items) + last.group(1) + "]"


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """(start, end) offsets of each cell's ``source`` value, by the cell's index."""
    spans: dict[int, tuple[int, int]] = {}
    index = _skip(text, 1 if text.startswith("\ufeff") else 0)
    for key, start, end in _members(text, index):
        if key != "cells":
            continue
        for number, (cell_start, _) in enumerate(_elements(text, start)):
            for cell_key, value_start, value_end in _members(text, cell_start):
                if cell_key == "source":
                    spans[number] = (value_start, value_end)
    return spans


def _members(text: str, index: int):
    """(key, value start, value end) of each member of the object at ``index``."""
    if text[index : index + 1] != "{":
        raise JsonLayoutError(f"expected an object at offset {index}")
    index = _skip(text, index + 1)
    if text[index : index + 1] == "}":
        return
    while True:
        if text[index : index + 1] != '"':
            raise JsonLayoutError(f"expected a key at offset {index}")
        key, index = json.decoder.scanstring(text, index + 1)
        index = _skip(text, index)
        if text[index : index + 1] != ":":
            raise JsonLayoutError(f"expected ':' at offset {index}")
        start = _skip(text, index + 1)
        _, end = _DECODER.raw_decode(text, start)
        yield key, start, end
        index = _skip(text, end)
        if text[index : index + 1] == "}":
            return
        index = _skip(text, index + 1)  # the comma


def _elements(text: str, index: int):
    """(start, end) of each element of the array at ``index``."""
    if text[index : index + 1] != "[":
        raise JsonLayoutError(f"expected an array at offset {index}")
    index = _skip(text, index + 1)
    if text[index : index + 1] == "]":
        return
    while True:
        _, end = _DECODER.raw_decode(text, index)
        yield index, end
        index = _skip(text, end)
        if text[index : index + 1] == "]":
            return
        index = _skip(text, index + 1)


def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()
