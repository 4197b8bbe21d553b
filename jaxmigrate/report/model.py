"""What a migration report says, as data: each finding's category, the totals by rule and by
folder, every pmap step and the path it takes, the reasons fixes are kept, and the progress
since the last report. The renderers (html, markdown, json) only lay this out.

Categories: *fixable safely* (``--fix`` applies it), *fixable unsafely* (``--fix
--unsafe-fixes``), *left* (no fix; the reason is the finding's blockers, or the rule offers no
fix), *suppressed* (a ``noqa`` hides it) and *fixed* (in the last report of this folder, not in
this one: ``progress.py``).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from jaxmigrate.baseline import Entry, relative_to
from jaxmigrate.lint import registry
from jaxmigrate.lint.findings import Blocker, Finding, Safety
from jaxmigrate.lint.rules.legacy_pmap import CODEMOD as EXACT_PMAP_CODEMOD
from jaxmigrate.source_lines import SourceLines

CATEGORIES = ("fixed", "safe", "unsafe", "left", "suppressed")
LABELS = {
    "fixed": "fixed",
    "safe": "fixable safely",
    "unsafe": "fixable unsafely",
    "left": "left with a reason",
    "suppressed": "suppressed",
}
PMAP = "JM101"
# The paths a pmap step takes (JM101's fix chain): the whole module to the global view, the
# exact rewrite with the device axis kept, or neither.
GLOBAL_VIEW, EXACT, KEPT = "global view", "exact", "kept"


@dataclass
class Item:
    """A finding as the report shows it."""

    finding: Finding
    category: str
    source: str  # the flagged line(s), stripped
    key: Entry  # as baselines know it: rule, path relative to the report's folder, code

    @property
    def path(self) -> str:
        return self.finding.path  # as `check` shows it


@dataclass
class Block:
    """A blocker with the code at its line, when one line blocks."""

    blocker: Blocker
    source: str | None
    cell: int | None = None  # in a notebook, the cell of the line
    line: int | None = None  # the line (in its cell, in a notebook)

    @property
    def where(self) -> str:
        if self.line is None:
            return ""
        return f"cell {self.cell}, line {self.line}" if self.cell is not None else f"line {self.line}"


@dataclass
class PmapStep:
    item: Item
    route: str  # GLOBAL_VIEW | EXACT | KEPT
    blocks: list[Block]


@dataclass
class ReasonGroup:
    scope: str  # "rewrite", "global view", or "no fix" (the rule offers none)
    reason: str
    items: list[Item] = field(default_factory=list)


@dataclass
class Progress:
    previous: str  # when the last report was written (ISO 8601)
    fixed: Counter[Entry]  # in the last report, gone from this one
    new: Counter[Entry]  # in this one, not in the last
    previous_totals: dict[str, int]


@dataclass
class BaselineState:
    """With ``report --baseline FILE``: which findings it holds, and its stale entries."""

    file: str
    held: set[int]  # id() of the findings the baseline holds
    stale: Counter[Entry]


@dataclass
class MigrationReport:
    generated: str
    paths: list[str]
    files_checked: int
    items: list[Item]
    anchor: Path  # the report's folder: the state's paths are relative to it
    progress: Progress | None = None
    baseline: BaselineState | None = None

    def baselined(self, item: Item) -> bool:
        return self.baseline is not None and id(item.finding) in self.baseline.held

    @property
    def fixed(self) -> Counter[Entry]:
        """What was fixed, with paths as ``check`` shows them."""
        if not self.progress:
            return Counter()
        return Counter({replace(entry, path=shown_path(self.anchor / entry.path)): count
                        for entry, count in self.progress.fixed.items()})

    def totals(self) -> dict[str, int]:
        counts = Counter(item.category for item in self.items)
        counts["fixed"] = sum(self.fixed.values())
        return {category: counts[category] for category in CATEGORIES}

    def by_rule(self) -> dict[str, dict[str, int]]:
        table: dict[str, Counter] = {}
        for item in self.items:
            table.setdefault(item.finding.code, Counter())[item.category] += 1
        for entry, count in self.fixed.items():
            table.setdefault(entry.code, Counter())["fixed"] += count
        return {code: _row(table[code]) for code in sorted(table)}

    def by_folder(self) -> dict[str, dict[str, int]]:
        table: dict[str, Counter] = {}
        for item in self.items:
            table.setdefault(folder_of(item.path), Counter())[item.category] += 1
        for entry, count in self.fixed.items():
            table.setdefault(folder_of(entry.path), Counter())["fixed"] += count
        return {folder: _row(table[folder]) for folder in sorted(table)}

    def pmap_steps(self, sources: SourceLines) -> list[PmapStep]:
        steps = []
        for item in self.items:
            finding = item.finding
            if finding.code != PMAP or item.category == "suppressed":
                continue
            blocks = [_block(sources, finding, b) for b in finding.blockers]
            steps.append(PmapStep(item, pmap_route(finding), blocks))
        return steps

    def reasons(self) -> list[ReasonGroup]:
        """Why fixes are kept, most frequent first: every blocker of a shown finding, and for a
        finding left without blockers, its rule (which offers no fix, or none here)."""
        groups: dict[tuple[str, str], ReasonGroup] = {}
        for item in self.items:
            if item.category == "suppressed":
                continue
            keys = [(b.scope, b.reason) for b in item.finding.blockers]
            if not keys and item.category == "left":
                rule = registry.rule_by_code(item.finding.code)
                if rule is None:
                    keys = [("no fix", registry.TOOL_CODES.get(item.finding.code, item.finding.code))]
                elif rule.fixable is None:
                    keys = [("no fix", f"{rule.code} {rule.name} has no automatic fix: {rule.summary}")]
                else:
                    keys = [("no fix", f"{rule.code} {rule.name}: not rewritable here (see the finding)")]
            for key in dict.fromkeys(keys):
                groups.setdefault(key, ReasonGroup(*key)).items.append(item)
        return sorted(groups.values(), key=lambda g: (-len(g.items), g.scope, g.reason))

    def rule_codes(self) -> list[str]:
        return sorted({item.finding.code for item in self.items} | {entry.code for entry in self.fixed})


def category(finding: Finding) -> str:
    if finding.fix is None:
        return "left"
    return "safe" if finding.fix.allowed({Safety.SAFE}) is not None else "unsafe"


def pmap_route(finding: Finding) -> str:
    fix = finding.fix
    if fix is None:
        return KEPT
    if fix.whole_module:
        return GLOBAL_VIEW
    return EXACT if fix.codemod == EXACT_PMAP_CODEMOD else KEPT


def folder_of(path: str) -> str:
    return PurePosixPath(path).parent.as_posix()


def build(findings: list[Finding], suppressed: list[Finding], *, anchor, sources: SourceLines,
          generated: str, paths: list[str], files_checked: int) -> MigrationReport:
    items = []
    for finding, state in [(f, category(f)) for f in findings] + [(f, "suppressed") for f in suppressed]:
        source = sources.flagged(finding)
        items.append(Item(finding, state, source, Entry(finding.code, relative_to(finding.path, anchor), source)))
    items.sort(key=lambda item: item.finding.sort_key)
    return MigrationReport(generated, paths, files_checked, items, anchor)


def shown_path(path: Path) -> str:
    """A path as ``check`` shows it: relative to the working folder when below it."""
    path = Path(os.path.normpath(path.absolute()))
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()


def _row(counts: Counter) -> dict[str, int]:
    return {category: counts[category] for category in CATEGORIES}


def _block(sources: SourceLines, finding: Finding, blocker: Blocker) -> Block:
    if blocker.line is None:
        return Block(blocker, None)
    # Rules count lines in a notebook's joined cells; the report shows the cell and its line.
    text = sources.line(finding.path, blocker.line)
    cell, line = sources.cell_of(finding.path, blocker.line) if finding.cell is not None else (None, blocker.line)
    return Block(blocker, text.strip() if text is not None else None, cell, line)
