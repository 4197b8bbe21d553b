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
    """``N findings, M fixable (K with --unsafe-fixes)``; ``N fixed, M left of K found`` after
    --fix, which adds up; ``All checks passed (N files)`` when nothing is left and nothing was fixed.

    After --fix the counts are of findings, not of fixes applied: "fixed" is the findings that are
    gone, by their own fix or made moot by another one (the global view of a pmap removes its
    `unreplicate`), and findings that only the fixed code has are counted apart as new."""
    left = len(report.findings)
    # Unsafe fixes the user has not enabled: worth telling them the flag exists.
    hidden = 0 if report.unsafe_fixes else report.fixable_unsafe
    if report.fix_mode:
        gone = report.fixed if report.gone is None else report.gone
        found = gone + left if report.found is None else report.found
        if left == 0 and gone == 0:
            return f"All checks passed ({plural(report.files_checked, 'file')})"
        still = found - gone  # the findings from before that are still there
        line = f"{gone} fixed, {still} left of {found} found"
        if left > still:
            line += f", and {left - still} new after fixing"
        if hidden:
            line += f" ({hidden} fixable with --unsafe-fixes)"
        return line
    if left == 0:
        return f"All checks passed ({plural(report.files_checked, 'file')})"
    line = f"{plural(left, 'finding')}, {report.fixable} fixable"
    if hidden:
        line += f" ({report.fixable + hidden} with --unsafe-fixes)"
    return line


def fixes_listing(report: Report) -> list[str]:
    """``--show-fixes``: what --fix fixed, by file and rule, as ruff lists it; the counts are the
    summary line's "fixed", so the two add up."""
    if report.fixed_by_file is None:
        return []
    from jaxmigrate.lint import registry

    total = sum(sum(codes.values()) for codes in report.fixed_by_file.values())
    if not total:
        return ["No findings were fixed.", ""]
    lines = [f"Fixed {plural(total, 'finding')}:"]
    for path, codes in sorted(report.fixed_by_file.items()):
        lines.append(f"- {path}:")
        for code, count in sorted(codes.items()):
            rule = registry.rule_by_code(code)
            lines.append(f"    {count} \u00d7 {code}" + (f" ({rule.name})" if rule else ""))
    return [*lines, ""]
