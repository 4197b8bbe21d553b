"""The report as Markdown (for a pull request or a wiki): the same sections as the HTML page, in
tables. Text from the code base is escaped for Markdown *and* HTML, which most Markdown viewers
pass through: a path or message cannot become markup."""

from __future__ import annotations

import html
from typing import TextIO

from jaxmigrate.lint import registry
from jaxmigrate.lint.output.summary import plural
from jaxmigrate.report.model import CATEGORIES, LABELS, MigrationReport
from jaxmigrate.source_lines import SourceLines


def m(value) -> str:
    """Text for a table cell: HTML-escaped, and no character that ends a cell, a code span or
    starts emphasis."""
    text = html.escape(str(value), quote=False).replace("\n", " ")
    for char in "\\|`*_[]":
        text = text.replace(char, "\\" + char)
    return text


def render(report: MigrationReport, out: TextIO, *, sources: SourceLines) -> None:
    totals = report.totals()
    out.write(f"# JAX migration report: {m(', '.join(report.paths))}\n\n")
    out.write(f"{plural(report.files_checked, 'file')} checked on {m(report.generated)}.\n\n")
    out.write("| " + " | ".join(LABELS[c] for c in CATEGORIES) + " |\n|" + "---:|" * len(CATEGORIES) + "\n")
    out.write("| " + " | ".join(str(totals[c]) for c in CATEGORIES) + " |\n\n")
    progress = report.progress
    if progress is not None:
        out.write(f"Since the last report ({m(progress.previous)}): **{sum(progress.fixed.values())} fixed**,"
                  f" {sum(progress.new.values())} new.\n\n")
    if report.baseline is not None:
        held = sum(map(report.baselined, report.items))
        out.write(f"Baseline {m(report.baseline.file)}: holds {held} of these findings;"
                  f" {sum(report.baseline.stale.values())} stale entries.\n\n")
    for title, what, rows in (("By rule", "rule", report.by_rule()), ("By folder", "folder", report.by_folder())):
        out.write(f"## {title}\n\n| {what} | " + " | ".join(LABELS[c] for c in CATEGORIES) + " |\n")
        out.write("|---|" + "---:|" * len(CATEGORIES) + "\n")
        for key, row in rows.items():
            rule = registry.rule_by_code(key) if what == "rule" else None
            label = f"{key} {rule.name}" if rule else f"{key}/" if what == "folder" else key
            out.write(f"| {m(label)} | " + " | ".join(str(row[c]) for c in CATEGORIES) + " |\n")
        out.write("\n")
    steps = report.pmap_steps(sources)
    out.write(f"## pmap steps ({len(steps)})\n\n| where | path | what blocks the global view / the rewrite |\n|---|---|---|\n")
    for step in steps:
        finding = step.item.finding
        blocks = "; ".join(
            f"{b.blocker.scope}: " + (f"{b.where} " if b.where else "")
            + (f"({b.source}) " if b.source else "") + b.blocker.reason for b in step.blocks) or "nothing"
        cell = f"cell {finding.cell}:" if finding.cell is not None else ""
        out.write(f"| {m(step.item.path)}:{cell}{finding.line} | {step.route} | {m(blocks)} |\n")
    out.write("\n## Why fixes are kept\n\n| count | scope | reason |\n|---:|---|---|\n")
    for group in report.reasons():
        out.write(f"| {len(group.items)} | {m(group.scope)} | {m(group.reason)} |\n")
    out.write(f"\n## Findings ({len(report.items)})\n\n| where | rule | state | message |\n|---|---|---|---|\n")
    for item in report.items:
        f = item.finding
        cell = f"cell {f.cell}:" if f.cell is not None else ""
        out.write(f"| {m(item.path)}:{cell}{f.line}:{f.column} | {f.code} | {LABELS[item.category]} | {m(f.message)} |\n")
    out.write("\nRun `jaxmigrate explain CODE` for any rule.\n")
