"""``--statistics``: how many findings of each rule, instead of the findings (as ruff's).

    3	JM101	    legacy-pmap
    2	JM601	[*] removed-tree-aliases

``[*]`` marks a rule whose findings here all have a fix ``--fix`` applies (with this run's
``--unsafe-fixes``); ``[-]`` one where some do. With ``--output-format json``, a list of
``{"code", "name", "count", "fixable"}`` (how many ``--fix`` would fix).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TextIO

from jaxmigrate.lint import registry
from jaxmigrate.lint.output import Report
from jaxmigrate.lint.output.summary import fix_applies


def rows(report: Report) -> list[dict]:
    counts = Counter(f.code for f in report.findings)
    fixable = Counter(f.code for f in report.findings if fix_applies(f, report))
    by_count = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [{"code": code, "name": _name(code), "count": count, "fixable": fixable[code]} for code, count in by_count]


def render(report: Report, out: TextIO, output_format: str = "text") -> None:
    table = rows(report)
    if output_format == "json":
        out.write(json.dumps(table, indent=2) + "\n")
        return
    width = max((len(str(row["count"])) for row in table), default=1)
    for row in table:
        marker = "[*] " if row["fixable"] == row["count"] else "[-] " if row["fixable"] else "    "
        out.write(f"{row['count']:>{width}}\t{row['code']}\t{marker}{row['name']}\n")


def _name(code: str) -> str:
    rule = registry.rule_by_code(code)
    return rule.name if rule else registry.TOOL_CODES.get(code, "")
