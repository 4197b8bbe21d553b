"""``--output-format concise``: one line per finding, then the summary line.

    pkg/train.py:12:9: JM101 [*] jax.pmap is deprecated ...
    3 findings, 1 fixable (2 with --unsafe-fixes)

The summary wording comes from ``summary``, shared with ``text`` and ``github`` so the formats can
never disagree about counts.
"""

from __future__ import annotations

from typing import TextIO

from jaxmigrate.lint.output import Report
from jaxmigrate.lint.output.summary import fix_applies, fixes_listing, summary_line


def render(report: Report, out: TextIO) -> None:
    for finding in report.findings:
        marker = " [*]" if fix_applies(finding, report) else ""
        out.write(f"{finding.location}: {finding.code}{marker} {finding.message}\n")
    if not report.quiet:
        out.writelines(line + "\n" for line in fixes_listing(report))
        out.write(summary_line(report) + "\n")
