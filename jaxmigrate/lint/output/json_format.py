"""``--output-format json``: one JSON array of findings, in the order the report holds them.

Each element is ``Finding.to_dict()``: ``code, message, path, line, column, end_line, end_column,
fix`` (``null`` or ``{"safety": "safe" | "unsafe", "message": ...}``), plus ``cell`` for notebooks.
Lines and columns are 1-based; columns count characters; ``end_column`` is exclusive.
"""

from __future__ import annotations

import json
from typing import TextIO

from jaxmigrate.lint.output import Report


def render(report: Report, out: TextIO) -> None:
    # ASCII-only (non-ASCII as \u escapes): machine output must not fail on a stream whose
    # encoding cannot hold a path's characters (a Windows console, a C-locale pipe).
    out.write(json.dumps([f.to_dict() for f in report.findings], indent=2))
    out.write("\n")
