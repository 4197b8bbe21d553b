"""The lines findings point at, read once per file: for baselines (a finding is known by the code
it flags, not by its line number) and for reports (the construct that blocks a fix)."""

from __future__ import annotations

from pathlib import Path

from jaxmigrate.core.source import SourceText
from jaxmigrate.files import NOTEBOOK_SUFFIX, SourceError, decode
from jaxmigrate.lint.findings import Finding
from jaxmigrate.notebooks import Notebook, NotebookError


class SourceLines:
    def __init__(self, texts: dict[str, str] | None = None) -> None:
        # path -> (the text, or a notebook's joined code cells; the notebook or None)
        self._files: dict[str, tuple[SourceText, Notebook | None]] = {}
        for path, text in (texts or {}).items():
            self._files[path] = (SourceText(text), None)

    def line(self, path: str, line: int, cell: int | None = None) -> str | None:
        """The text of a 1-based line (of a notebook's cell ``cell``), without its line break."""
        source, notebook = self._read(path)
        if notebook is not None and cell is not None:
            try:
                line += notebook.cell_start_lines[notebook.code_cells.index(cell - 1)] - 1
            except ValueError:
                return None
        # Lines counted as the findings count them (SourceText), not as str.splitlines does.
        return source.line(line) if source.text and 1 <= line <= len(source.line_starts) else None

    def cell_of(self, path: str, line: int) -> tuple[int | None, int]:
        """(cell, line in it) of a line of a notebook's joined cells, as ``Notebook.locate``
        counts them; (None, line) for any other file."""
        _, notebook = self._read(path)
        if notebook is None or not notebook.cell_start_lines:
            return None, line
        index = max((i for i, start in enumerate(notebook.cell_start_lines) if start <= line), default=0)
        return notebook.code_cells[index] + 1, line - notebook.cell_start_lines[index] + 1

    def flagged(self, finding: Finding) -> str:
        """The lines a finding spans, each stripped of indentation and trailing blanks: what stays
        the same when code above it moves, or it is re-indented. Empty when the file cannot be read."""
        texts = (self.line(finding.path, n, finding.cell) for n in range(finding.line, finding.end_line + 1))
        return "\n".join(text.strip() for text in texts if text is not None)

    def _read(self, path: str) -> tuple[SourceText, Notebook | None]:
        if path not in self._files:
            self._files[path] = _read_lines(path)
        return self._files[path]


def _read_lines(path: str) -> tuple[SourceText, Notebook | None]:
    try:
        raw = Path(path).read_bytes()
        if path.endswith(NOTEBOOK_SUFFIX):
            notebook = Notebook.parse(raw, path)
            return SourceText(notebook.text), notebook
        return SourceText(decode(raw, path).text), None
    except (OSError, SourceError, NotebookError):
        return SourceText(""), None
