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

from jaxmigrate.lint.rule import Finding

_BOUNDARY = "# jaxmigrate-notebook-cell-boundary"
_MAGIC = re.compile(r"^(?P<indent>[ \t]*)pass  # jaxmigrate-magic-(?P<index>\d+)$")
_LINE_MAGIC = re.compile(r"^[ \t]*(?:%|!|\?)|^[ \t]*\w[\w.]*\?\??[ \t]*$")


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
            cells = document["cells"]
        except (ValueError, KeyError, TypeError) as error:
            raise NotebookError(f"cannot read {name} as a Jupyter notebook: {error}") from None
        if not _is_python(document):
            return cls(document, [], [], [], "", _indent_of(raw))
        code_cells, starts, magics, parts = [], [], [], []
        line = 1
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
            starts.append(line)
            parts.append("\n".join(masked))
            line += len(masked) + 1
        text = ("\n" + _BOUNDARY + "\n").join(parts)
        return cls(document, code_cells, starts, magics, text + "\n" if parts else "", _indent_of(raw))

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


def _mask(magics: list[str], line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    magics.append(line)
    return f"{indent}pass  # jaxmigrate-magic-{len(magics) - 1}"


def _cell_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _is_python(document: dict) -> bool:
    language = (
        document.get("metadata", {}).get("language_info", {}).get("name")
        or document.get("metadata", {}).get("kernelspec", {}).get("language")
        or "python"
    )
    return str(language).lower() == "python"


def _indent_of(raw: bytes) -> int:
    match = re.search(rb"\n( +)\"", raw)
    return len(match.group(1)) if match else 1
