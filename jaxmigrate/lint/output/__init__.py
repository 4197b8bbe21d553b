"""Renderers of a run's findings: text (rich), concise, json, github, sarif.

Every renderer is a function ``render(report: Report, out: TextIO) -> None`` in its own module,
registered in ``RENDERERS`` by format name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, TextIO

from jaxmigrate.lint.findings import Finding, Safety


@dataclass
class Report:
    findings: list[Finding]  # what remains, sorted by path, line, column
    files_checked: int
    fix_mode: bool = False  # --fix was given: `fixed` says how many fixes were applied
    fixed: int = 0
    # After --fix: the findings there were before fixing, and how many of them are gone (fixed, or
    # made moot by another fix). None: the run fixed nothing that changed which findings there are.
    found: int | None = None
    gone: int | None = None
    unsafe_fixes: bool = False  # --unsafe-fixes was given
    quiet: bool = False  # -q: the findings only, no summary line
    line_length: int | None = None  # the width fixes keep to (settings.line_length), for SARIF's fixes
    # --show-fixes after --fix: by file, by code, how many findings are gone (fixed or made moot).
    fixed_by_file: dict[str, dict[str, int]] | None = None
    # Reads a file's text for showing source lines (None when it cannot); stdin input is served
    # from memory by the engine.
    read_source: Callable[[str], str | None] = field(default=lambda path: None)

    @property
    def fixable(self) -> int:
        allowed = {Safety.SAFE, Safety.UNSAFE} if self.unsafe_fixes else {Safety.SAFE}
        return sum(1 for f in self.findings if f.fix is not None and f.fix.allowed(allowed) is not None)

    @property
    def fixable_unsafe(self) -> int:
        """Fixes that only --unsafe-fixes would apply."""
        return sum(1 for f in self.findings if f.fix is not None and f.fix.allowed({Safety.SAFE}) is None)


def get_renderer(name: str) -> Callable[[Report, TextIO], None]:
    from importlib import import_module

    if name not in FORMATS:
        raise KeyError(name)
    return import_module(f"jaxmigrate.lint.output.{FORMATS[name]}").render


# format name -> module in this package (imported lazily: only the chosen one is loaded)
FORMATS = {
    "text": "text",
    "concise": "concise",
    "json": "json_format",
    "github": "github",
    "sarif": "sarif",
}
