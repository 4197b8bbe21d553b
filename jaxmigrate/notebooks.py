"""Jupyter notebooks as Python source: the code cells joined into one text, IPython magics masked,
findings mapped back to (cell, line), fixed text split back into the cells.

A cell boundary is a sentinel comment line and a magic line a sentinel ``pass`` statement: fixes
never touch either (they are not the code the rules look at), so after fixing, the text splits
back into exactly the cells it came from and every magic is restored verbatim.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from jaxmigrate.core.source import CELL_BOUNDARY
from jaxmigrate.lint.findings import Finding
from jaxmigrate.notebook_json import JsonLayoutError, replace_sources

_BOUNDARY = CELL_BOUNDARY
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as the findings count lines (lint/context.py)
_LINE_NUMBER = re.compile(r"\b([Ll]ine) (\d+)\b")  # how messages name a line (see _lines_named_in)
_MAGIC = re.compile(r"^(?P<indent>[ \t]*)pass  # jaxmigrate-magic-(?P<index>\d+)$")
# `%magic`, `!shell`, `?name`, `name?`, and the assignment forms `x = !ls`, `a, b = %time f()`.
_LINE_MAGIC = re.compile(
    r"^[ \t]*(?:%|!|\?)|^[ \t]*\w[\w.]*\?\??[ \t]*$"
    r"|^[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[!%]"
)


class NotebookError(ValueError):
    pass


@dataclass
class Notebook:
    document: dict
    code_cells: list[int]  # indices into document["cells"] of the code cells, in order
    cell_start_lines: list[int]  # 1-based line of each code cell's first line in `text`
    magics: list[str]  # the original magic lines, by sentinel index
    text: str
    json_text: str  # the notebook's JSON as it was read: changed cells are written into it

    @classmethod
    def parse(cls, raw: bytes, name: str = "<notebook>") -> "Notebook":
        try:
            document = json.loads(raw.decode("utf-8-sig"))
            cells = _checked_cells(document)
        except (ValueError, KeyError, TypeError) as error:
            raise NotebookError(f"cannot read {name} as a Jupyter notebook: {error}") from None
        if not _is_python(document):
            return cls(document, [], [], [], "", raw.decode("utf-8-sig"))
        code_cells, magics, parts = [], [], []
        for index, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            source = _cell_text(cell)
            lines = source.split("\n")
            if lines and lines[0].lstrip().startswith("%%"):
                masked = [_mask(magics, text) for text in lines]  # a cell magic: not Python
            else:
                masked = [_mask(magics, text) if _LINE_MAGIC.match(text) else text for text in lines]
            code_cells.append(index)
            parts.append("\n".join(masked))
        text = ("\n" + _BOUNDARY + "\n").join(parts) + "\n" if parts else ""
        return cls(document, code_cells, _cell_starts(text), magics, text, raw.decode("utf-8-sig"))

    def located_in(self, text: str) -> "Notebook":
        """This notebook with its cells found in ``text`` (the fixed text): a fix that adds lines
        to one cell moves the start of every later cell."""
        return replace(self, cell_start_lines=_cell_starts(text), text=text)

    def locate(self, finding: Finding) -> Finding:
        """The finding with its lines made relative to its cell, and the cell's 1-based number;
        the lines its message names too."""
        cell, line = self._cell_and_line(finding.line)
        _, end_line = self._cell_and_line(finding.end_line)
        return replace(
            finding,
            message=self._lines_named_in(finding.message, cell),
            line=line,
            end_line=max(end_line if finding.end_line >= finding.line else line, line),
            cell=cell,
        )

    def _cell_and_line(self, line: int) -> tuple[int | None, int]:
        """The 1-based number of the cell that holds line ``line`` of the joined text, and the
        line within it."""
        if not self.cell_start_lines:
            return None, line
        index = max((i for i, start in enumerate(self.cell_start_lines) if start <= line), default=0)
        return self.code_cells[index] + 1, line - self.cell_start_lines[index] + 1

    def _lines_named_in(self, message: str, cell: int | None) -> str:
        """A message names lines of the text the rules saw, the cells joined ("line 20: argument
        2 of `train_step` ..."); a reader of the notebook wants the line in its cell, and the cell
        when it is another one. Code quoted in backticks is the user's and is left alone."""
        parts = message.split("`")
        for i in range(0, len(parts), 2):  # outside backticks
            parts[i] = _LINE_NUMBER.sub(lambda m: self._line_shown(int(m.group(2)), cell, m.group(1)), parts[i])
        return "`".join(parts)

    def _line_shown(self, line: int, cell: int | None, word: str) -> str:
        where, within = self._cell_and_line(line)
        return f"{word} {within}" if where == cell else f"cell {where}, {word.lower()} {within}"

    def with_text(self, new_text: str) -> bytes:
        """The notebook's bytes with the code cells replaced by the (fixed) joined text: the
        changed cells' sources written into the JSON as it was, every other byte kept."""
        parts = new_text.removesuffix("\n").split("\n" + _BOUNDARY + "\n")
        if len(parts) != len(self.code_cells):
            raise NotebookError("a fix changed the notebook's cell structure; not written")
        cells = self.document["cells"]
        changed: dict[int, str | list[str]] = {}
        for index, part in zip(self.code_cells, parts):
            restored = "\n".join(self._unmask(line) for line in part.split("\n"))
            original = _cell_text(cells[index])
            if restored == original:
                continue  # untouched cells keep their exact JSON form
            first = original.split("\n", 1)[0]
            if first.lstrip().startswith("%%") and restored.split("\n", 1)[0] != first:
                # A cell magic must stay the cell's first line (a fix's new imports went above it).
                raise NotebookError(f"a fix would put code above the cell magic {first.strip()!r}; not written")
            if isinstance(cells[index].get("source"), str):
                changed[index] = restored
            else:
                changed[index] = restored.splitlines(keepends=True)
        try:
            return replace_sources(self.json_text, changed).encode("utf-8")
        except JsonLayoutError as error:
            raise NotebookError(f"cannot write the fixed cells back: {error}") from None

    def _unmask(self, line: str) -> str:
        match = _MAGIC.match(line)
        return self.magics[int(match.group("index"))] if match else line


def cell_source(json_text: str, cell: int) -> str | None:
    """The source of the notebook's ``cell``-th cell (1-based, as findings number them), or None."""
    try:
        cells = _checked_cells(json.loads(json_text))
        return _cell_text(cells[cell - 1]) if 0 < cell <= len(cells) else None
    except (ValueError, KeyError, TypeError):
        return None


def _cell_starts(text: str) -> list[int]:
    """The 1-based line where each cell begins: the first, and the one after every boundary."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    return [1] + [number + 2 for number, line in enumerate(lines) if line == _BOUNDARY]


def _mask(magics: list[str], line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    magics.append(line)
    return f"{indent}pass  # jaxmigrate-magic-{len(magics) - 1}"


def _checked_cells(document) -> list[dict]:
    """The document's cells, once every part this module reads has the type nbformat gives it:
    a hand-edited or generated file must be a JM000 naming what is wrong, not a crash."""
    if not isinstance(document, dict):
        raise ValueError("the file is not a JSON object")
    cells = document["cells"]
    if not isinstance(cells, list):
        raise ValueError("'cells' is not a list")
    metadata = document.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("'metadata' is not an object")
    for key in ("language_info", "kernelspec"):
        if metadata.get(key) is not None and not isinstance(metadata[key], dict):
            raise ValueError(f"'metadata.{key}' is not an object")
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise ValueError(f"cell {number} is not an object")
        source = cell.get("source", "")
        if not (isinstance(source, str) or isinstance(source, list) and all(isinstance(s, str) for s in source)):
            raise ValueError(f"cell {number}'s source is neither a string nor a list of strings")
    return cells


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _is_python(document: dict) -> bool:
    metadata = document.get("metadata") or {}
    language = (
        (metadata.get("language_info") or {}).get("name")
        or (metadata.get("kernelspec") or {}).get("language")
        or "python"
    )
    return str(language).lower() == "python"


