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

_BOUNDARY = CELL_BOUNDARY
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as the findings count lines (lint/context.py)
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
    indent: int

    @classmethod
    def parse(cls, raw: bytes, name: str = "<notebook>") -> "Notebook":
        try:
            document = json.loads(raw.decode("utf-8-sig"))
            cells = _checked_cells(document)
        except (ValueError, KeyError, TypeError) as error:
            raise NotebookError(f"cannot read {name} as a Jupyter notebook: {error}") from None
        if not _is_python(document):
            return cls(document, [], [], [], "", _indent_of(raw))
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
        return cls(document, code_cells, _cell_starts(text), magics, text, _indent_of(raw))

    def located_in(self, text: str) -> "Notebook":
        """This notebook with its cells found in ``text`` (the fixed text): a fix that adds lines
        to one cell moves the start of every later cell."""
        return replace(self, cell_start_lines=_cell_starts(text), text=text)

    def locate(self, finding: Finding) -> Finding:
        """The finding with its lines made relative to its cell, and the cell's 1-based number."""
        cell = max((i for i, start in enumerate(self.cell_start_lines) if start <= finding.line), default=0)
        offset = self.cell_start_lines[cell] - 1 if self.cell_start_lines else 0
        return replace(
            finding,
            line=finding.line - offset,
            end_line=max(finding.end_line - offset, 1),
            cell=self.code_cells[cell] + 1 if self.code_cells else None,
        )

    def with_text(self, new_text: str) -> bytes:
        """The notebook's bytes with the code cells replaced by the (fixed) joined text."""
        parts = new_text.removesuffix("\n").split("\n" + _BOUNDARY + "\n")
        if len(parts) != len(self.code_cells):
            raise NotebookError("a fix changed the notebook's cell structure; not written")
        cells = self.document["cells"]
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
                cells[index]["source"] = restored
            else:
                cells[index]["source"] = restored.splitlines(keepends=True)
        dumped = json.dumps(self.document, indent=self.indent, ensure_ascii=False)
        return (dumped + "\n").encode("utf-8")

    def _unmask(self, line: str) -> str:
        match = _MAGIC.match(line)
        return self.magics[int(match.group("index"))] if match else line


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


def _indent_of(raw: bytes) -> int:
    match = re.search(rb"\n( +)\"", raw)
    return len(match.group(1)) if match else 1
