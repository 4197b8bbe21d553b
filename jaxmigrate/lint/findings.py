"""What a check reports: findings, the fixes they offer, and how far a fix may be trusted.

Fixes are text edits at exact source offsets (as ruff's are), so formatting and comments around a
fix survive untouched; the whole-module codemods in ``jaxmigrate.migrate`` are named here and run
only when fixing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Collection

from jaxmigrate.core.edits import Edit


class Safety(str, enum.Enum):
    """How much a fix may be trusted to keep the program's meaning."""

    SAFE = "safe"
    # May change numerics, RNG streams, collectives or device placement: applied only on request.
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Fix:
    """A fix is either text edits, or a whole-module codemod named ``"module:function"``.

    A codemod is called as ``function(text, sites) -> new_text`` where ``sites`` holds the
    (line, column) of every finding whose fix is being applied in this pass, so it rewrites those
    and nothing the user suppressed. Codemods let a fix add imports and module-level helpers, and
    they run only when fixing: detection never pays for a LibCST parse.

    ``fallback`` is the fix to use instead when this one is not allowed (an unsafe fix without
    ``--unsafe-fixes``) or was rejected: JM101 offers the global view (unsafe) with the exact
    rewrite (safe) behind it. Reports (JSON, SARIF) show the fix itself, the first of the chain.
    """

    safety: Safety
    message: str
    edits: tuple[Edit, ...] = ()
    codemod: str | None = None
    fallback: "Fix | None" = None
    # A codemod that rewrites the whole module (the global view) goes before the site codemods of
    # the same pass: they would rewrite its call sites into forms it no longer recognises.
    whole_module: bool = False

    def __post_init__(self) -> None:
        if bool(self.edits) == bool(self.codemod):
            raise ValueError("a fix has either edits or a codemod, not both and not neither")
        spans = sorted(self.edits)
        for before, after in zip(spans, spans[1:]):
            if after.start < before.end:
                raise ValueError(f"overlapping edits in one fix: {before} and {after}")

    def allowed(self, safeties: Collection[Safety]) -> "Fix | None":
        """The first fix of the chain (this one, its fallback, ...) of one of these safeties."""
        fix: Fix | None = self
        while fix is not None and fix.safety not in safeties:
            fix = fix.fallback
        return fix


@dataclass(frozen=True)
class Blocker:
    """Why a fix is not offered where the rule reports, as data: the finding's message says it in
    words, ``jaxmigrate report`` groups findings by it. ``scope`` names the rewrite it blocks
    (``"global view"``, or ``"rewrite"`` for the rule's own fix); ``line`` is the 1-based line of
    the construct that blocks it, when one line does."""

    scope: str
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class Finding:
    """One reported problem. Lines and columns are 1-based; columns count characters."""

    code: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix: Fix | None = None
    # For notebooks: the 1-based cell number; line and end_line then count within that cell.
    cell: int | None = None
    # What keeps a fix from being offered here (or keeps only a weaker one), for reports.
    blockers: tuple[Blocker, ...] = ()

    @property
    def location(self) -> str:
        """``path:line:col``, or ``path:cell N:line:col`` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.message)

    def to_dict(self) -> dict:
        cell = {} if self.cell is None else {"cell": self.cell}
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "fix": None
            if self.fix is None
            else {"safety": self.fix.safety.value, "message": self.fix.message},
            **cell,
        }
