"""What every human-facing format says the same way: plurals, whether a fix applies, the summary line."""

from __future__ import annotations

from jaxmigrate.lint.findings import Finding, Safety
from jaxmigrate.lint.output import Report


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def fix_applies(finding: Finding, report: Report) -> bool:
    """Would ``--fix`` (with this run's ``--unsafe-fixes`` setting) apply this finding's fix?"""
    if finding.fix is None:
        return False
    return finding.fix.allowed({Safety.SAFE}) is not None or report.unsafe_fixes


def summary_line(report: Report) -> str:
    """``N findings, M fixable (K with --unsafe-fixes)``; ``N fixed, M left`` after --fix;
    ``All checks passed (N files)`` when nothing is left and nothing was fixed."""
    left = len(report.findings)
    # Unsafe fixes the user has not enabled: worth telling them the flag exists.
    hidden = 0 if report.unsafe_fixes else report.fixable_unsafe
    if report.fix_mode:
        if left == 0 and report.fixed == 0:
            return f"All checks passed ({plural(report.files_checked, 'file')})"
        line = f"{report.fixed} fixed, {left} left"
        if hidden:
            line += f" ({hidden} fixable with --unsafe-fixes)"
        return line
    if left == 0:
        return f"All checks passed ({plural(report.files_checked, 'file')})"
    line = f"{plural(left, 'finding')}, {report.fixable} fixable"
    if hidden:
        line += f" ({report.fixable + hidden} with --unsafe-fixes)"
    return line
