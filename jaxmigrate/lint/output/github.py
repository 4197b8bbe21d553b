"""``--output-format github``: GitHub Actions workflow commands, one annotation per finding.

    ::warning file=pkg/train.py,line=12,col=9,endLine=12,endColumn=17,title=JM101::jax.pmap is ...

The tool's own codes (JM000, JM001) are ``::error``. GitHub shows only the first 10 annotations of
each kind per step, so when ``$GITHUB_STEP_SUMMARY`` names a file, a markdown table of *all*
findings is appended to it as well (appended, never overwritten: other steps write there too).
"""

from __future__ import annotations

import os
from typing import TextIO

from jaxmigrate.lint import registry
from jaxmigrate.lint.findings import Finding
from jaxmigrate.lint.output import Report
from jaxmigrate.lint.output.summary import fix_applies, plural, summary_line

# Longer tables go inside a <details> block so the summary page stays readable.
COLLAPSE_AFTER = 20


def escape_data(value: str) -> str:
    """The escaping GitHub's runner undoes in a command's message (actions/toolkit ``escapeData``)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """The escaping of a command's ``key=value`` properties (actions/toolkit ``escapeProperty``)."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    level = "error" if finding.code in registry.TOOL_CODES else "warning"
    message = finding.message
    if finding.cell is None:
        position = [
            ("line", finding.line),
            ("col", finding.column),
            ("endLine", finding.end_line),
            ("endColumn", finding.end_column),
        ]
    else:
        # A notebook's lines count within a cell, which GitHub cannot place in the .ipynb file:
        # annotate the file and say where in the message.
        position = []
        message = f"cell {finding.cell}:{finding.line}:{finding.column}: {message}"
    properties = [("file", finding.path), *position, ("title", finding.code)]
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties)
    return f"::{level} {props}::{escape_data(message)}"


def render(report: Report, out: TextIO) -> None:
    for finding in report.findings:
        out.write(annotation(finding) + "\n")
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        try:
            with open(summary_path, "a", encoding="utf-8") as summary:
                summary.write(step_summary(report))
        except OSError as error:
            out.write(f"::warning::{escape_data(f'cannot write the step summary: {error}')}\n")


def step_summary(report: Report) -> str:
    """The markdown appended to ``$GITHUB_STEP_SUMMARY``."""
    lines = ["## jaxmigrate", "", summary_line(report), ""]
    if report.findings:
        table = ["| Location | Code | Message |", "| --- | --- | --- |"]
        for finding in report.findings:
            message = _cell(finding.message)
            if fix_applies(finding, report):
                message += " [*]"
            table.append(f"| {_code_span(finding.location)} | {finding.code} | {message} |")
        if len(report.findings) > COLLAPSE_AFTER:
            noun = plural(len(report.findings), "finding")
            # The blank lines around the table are what lets GitHub render markdown inside HTML.
            table = [f"<details><summary>All {noun}</summary>", "", *table, "", "</details>"]
        lines += [*table, ""]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text made safe for one markdown table cell: a pipe ends the cell and a newline the row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("|", "\\|").replace("\n", "<br>")


def _code_span(text: str) -> str:
    # A path may hold backticks: fence it with a longer run of them (CommonMark code spans).
    fence = "`"
    while fence in text:
        fence += "`"
    padding = " " if "`" in text else ""
    return f"{fence}{padding}{_cell_pipes(text)}{padding}{fence}"


def _cell_pipes(text: str) -> str:
    # Inside a code span only the pipe needs escaping (GFM tables split cells before inline parsing).
    return text.replace("|", "\\|")
