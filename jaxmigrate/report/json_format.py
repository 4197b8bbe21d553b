"""The report as JSON: everything the HTML page shows, as data."""

from __future__ import annotations

import json
from typing import TextIO

from jaxmigrate.report.model import MigrationReport
from jaxmigrate.source_lines import SourceLines


def as_data(report: MigrationReport, sources: SourceLines) -> dict:
    progress = report.progress
    return {
        "generated": report.generated,
        "paths": report.paths,
        "files_checked": report.files_checked,
        "totals": report.totals(),
        "by_rule": report.by_rule(),
        "by_folder": report.by_folder(),
        "pmap_steps": [
            {"path": step.item.path, "line": step.item.finding.line, "column": step.item.finding.column,
             "cell": step.item.finding.cell, "code": step.item.source, "route": step.route,
             "blockers": [{"scope": b.blocker.scope, "reason": b.blocker.reason, "line": b.line, "cell": b.cell,
                           "code": b.source} for b in step.blocks]}
            for step in report.pmap_steps(sources)
        ],
        "reasons": [
            {"scope": group.scope, "reason": group.reason, "count": len(group.items),
             "baseline": None if report.baseline is None else {
            "file": report.baseline.file,
            "held": sum(map(report.baselined, report.items)),
            "stale": [entry.to_dict(count) for entry, count in sorted(report.baseline.stale.items())],
        },
        "findings": [{"path": i.path, "line": i.finding.line, "code": i.finding.code} for i in group.items]}
            for group in report.reasons()
        ],
        "progress": None if progress is None else {
            "previous": progress.previous,
            "previous_totals": progress.previous_totals,
            "fixed": [entry.to_dict(count) for entry, count in sorted(progress.fixed.items())],
            "new": [entry.to_dict(count) for entry, count in sorted(progress.new.items())],
        },
        "baseline": None if report.baseline is None else {
            "file": report.baseline.file,
            "held": sum(map(report.baselined, report.items)),
            "stale": [entry.to_dict(count) for entry, count in sorted(report.baseline.stale.items())],
        },
        "findings": [
            {**item.finding.to_dict(), "path": item.path, "state": item.category, "source": item.source,
             **({"baselined": report.baselined(item)} if report.baseline is not None else {}),
             "blockers": [{"scope": b.scope, "reason": b.reason, "line": b.line} for b in item.finding.blockers]}
            for item in report.items
        ],
    }


def render(report: MigrationReport, out: TextIO, *, sources: SourceLines) -> None:
    out.write(json.dumps(as_data(report, sources), indent=2) + "\n")
