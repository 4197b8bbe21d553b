"""``--output-format sarif``: a SARIF 2.1.0 log, for GitHub code scanning and other SARIF viewers.

One run. ``tool.driver.rules`` holds one entry per code that occurs in the results, sorted by code,
so a log describes what it reports and no more (``jaxmigrate rules`` lists them all).
Columns are Unicode code points (``columnKind``), as jaxmigrate counts them, not SARIF's default
UTF-16 units. Relative paths are URIs relative to ``%SRCROOT%``; absolute paths are ``file:`` URIs.

``partialFingerprints["jaxmigrate/v1"]`` identifies a result across runs without its line number,
so that unrelated edits above it do not turn it into a "new" alert: a hash of the code, the path,
the text of the finding's first line with surrounding whitespace stripped, and the occurrence
index of that (code, path, text) among this run's results in order. When the line cannot be read,
the finding's message stands in for the line text.

``fixes``: a fix's edits as replacements; a codemod fix (whole-module rewrite) is run for its
result's site alone, and the lines it changes become the replacements.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import re
from importlib import import_module
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

import jaxmigrate
from jaxmigrate.core.edits import Edit
from jaxmigrate.core.source import SourceText
from jaxmigrate.lint import registry
from jaxmigrate.lint.findings import Finding, Fix
from jaxmigrate.lint.output import Report
from jaxmigrate.migrate._layout import line_width

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "jaxmigrate/v1"


def render(report: Report, out: TextIO) -> None:
    # ASCII-only JSON: it must survive any stream encoding; SARIF readers decode the escapes.
    out.write(json.dumps(sarif_log(report), indent=2) + "\n")


def sarif_log(report: Report) -> dict:
    sources = _Sources(report)
    codes = sorted({f.code for f in report.findings})
    rule_index = {code: index for index, code in enumerate(codes)}
    first_message = {}
    for finding in report.findings:
        first_message.setdefault(finding.code, finding.message)
    occurrences: dict[tuple[str, str, str], int] = {}
    results = []
    budget = _CodemodBudget()
    for finding in report.findings:
        result = {
            "ruleId": finding.code,
            "ruleIndex": rule_index[finding.code],
            "level": _level(finding.code),
            "message": {"text": finding.message},
            "locations": [{"physicalLocation": _physical_location(finding)}],
            "partialFingerprints": {
                FINGERPRINT_KEY: _fingerprint(finding, sources.get(finding), occurrences)
            },
        }
        if finding.fix is not None:
            source = sources.get(finding)
            if finding.fix.codemod and not budget.spend(finding.path):
                source = None  # past the file's budget of codemod runs: the fix is left out
            with line_width(report.line_length):  # the width --fix keeps to
                fix = _fix(finding, finding.fix, source)
            if fix is not None:
                result["fixes"] = [fix]
        if finding.cell is not None:
            result["properties"] = {
                "cell": finding.cell, "line": finding.line, "column": finding.column,
            }
        results.append(result)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "jaxmigrate",
                        "version": jaxmigrate.__version__,
                        "rules": [_rule_descriptor(code, first_message[code]) for code in codes],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def _level(code: str) -> str:
    return "error" if code in registry.TOOL_CODES else "warning"


def _rule_descriptor(code: str, example_message: str) -> dict:
    """Metadata of a code: from its rule class, from TOOL_CODES, or, for a code with neither
    (a rule removed or renamed since the findings were made), from a message it produced."""
    rule = registry.rule_by_code(code) if code not in registry.TOOL_CODES else None
    if rule is not None:
        from jaxmigrate.lint.output.docs import explanation_markdown

        explanation = rule.explanation()
        descriptor = {
            "id": code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": _first_paragraph(explanation) or rule.summary},
            "help": {"text": explanation or rule.summary, "markdown": explanation_markdown(rule)},
            "defaultConfiguration": {"level": _level(code)},
        }
        if rule.jax_versions:
            descriptor["properties"] = {"jaxVersions": rule.jax_versions}
        return descriptor
    description = registry.TOOL_CODES.get(code, example_message)
    return {
        "id": code,
        "name": code,
        "shortDescription": {"text": description},
        "fullDescription": {"text": description},
        "help": {"text": description, "markdown": f"# {code}\n\n{description}\n"},
        "defaultConfiguration": {"level": _level(code)},
    }


def _first_paragraph(markdown: str) -> str:
    """The first paragraph of prose in a rule's explanation (the "What it does" section)."""
    for block in re.split(r"\n\s*\n", markdown):
        lines = [line for line in block.splitlines() if not line.lstrip().startswith("#")]
        text = " ".join(line.strip() for line in lines).strip()
        if text:
            return text
    return ""


def artifact_location(path: str) -> dict:
    posix = Path(path).as_posix()
    if Path(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(posix, safe="/"), "uriBaseId": "%SRCROOT%"}


def _physical_location(finding: Finding) -> dict:
    location: dict = {"artifactLocation": artifact_location(finding.path)}
    if finding.cell is None:  # a notebook's cell lines are no place in the .ipynb file
        location["region"] = {
            "startLine": finding.line,
            "startColumn": finding.column,
            "endLine": finding.end_line,
            "endColumn": finding.end_column,
        }
    return location


def _fingerprint(
    finding: Finding, source: SourceText | None, occurrences: dict[tuple[str, str, str], int]
) -> str:
    if source is not None and finding.line <= len(source.line_starts):
        anchor = "line:" + source.line(finding.line).strip()
    else:
        cell = f"cell {finding.cell}:" if finding.cell is not None else ""
        anchor = f"message:{cell}{finding.message}"
    path = Path(finding.path).as_posix()
    key = (finding.code, path, anchor)
    index = occurrences.get(key, 0)
    occurrences[key] = index + 1
    material = "\0".join([finding.code, path, anchor, str(index)])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


def _fix(finding: Finding, fix: Fix, source: SourceText | None) -> dict | None:
    """A SARIF fix, its edits as replacements. Regions are line/column when the file's text is at
    hand, else character offsets (which the edits are). A codemod fix (a whole-module rewrite)
    is run for this finding's site alone and its change expressed as replacements of whole
    lines. A notebook's fix (whose offsets index the joined cells), or a codemod without the
    file's text, cannot be expressed and is left out."""
    if finding.cell is not None:
        return None
    edits = fix.edits
    if fix.codemod:
        edits = _codemod_edits(fix.codemod, finding, source)
    if not edits:
        return None
    replacements = []
    for edit in sorted(edits):
        if source is not None and edit.end <= len(source.text):
            start_line, start_column = source.position(edit.start)
            end_line, end_column = source.position(edit.end)
            region = {
                "startLine": start_line,
                "startColumn": start_column,
                "endLine": end_line,
                "endColumn": end_column,
            }
        else:
            region = {"charOffset": edit.start, "charLength": edit.end - edit.start}
        replacements.append({"deletedRegion": region, "insertedContent": {"text": edit.content}})
    return {
        "description": {"text": fix.message},
        "artifactChanges": [
            {"artifactLocation": artifact_location(finding.path), "replacements": replacements}
        ],
        "properties": {"safety": fix.safety.value},
    }


def _codemod_edits(codemod: str, finding: Finding, source: SourceText | None) -> tuple[Edit, ...]:
    """The codemod's rewrite for the finding's site, as edits of whole lines of the text; none
    when the text is not at hand, or the codemod fails, changes nothing or breaks the file (as
    ``--fix`` would then not apply it either)."""
    if source is None:
        return ()
    try:
        module, _, function = codemod.partition(":")
        rewritten = getattr(import_module(module), function)(source.text, frozenset({(finding.line, finding.column)}))
        ast.parse(rewritten)
    except Exception:  # noqa: BLE001 - a broken codemod costs this result its fix, not the log
        return ()
    return _changed_lines(source.text, rewritten)


def _changed_lines(old: str, new: str) -> tuple[Edit, ...]:
    """Edits replacing whole lines, one per changed run of lines. The common first and last lines
    are trimmed before the line diff: a codemod run for one site changes a few lines, and a diff
    of the whole file per result was quadratic on files with thousands of findings."""
    if old == new:
        return ()
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (tail < min(len(old_lines), len(new_lines)) - head
           and old_lines[-1 - tail] == new_lines[-1 - tail]):
        tail += 1
    old_mid, new_mid = old_lines[head:len(old_lines) - tail], new_lines[head:len(new_lines) - tail]
    starts = [sum(len(line) for line in old_lines[:head])]
    for line in old_mid:
        starts.append(starts[-1] + len(line))
    matcher = difflib.SequenceMatcher(None, old_mid, new_mid, autojunk=False)
    return tuple(
        Edit(starts[i1], starts[i2], "".join(new_mid[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    )


class _CodemodBudget:
    """How many codemod fixes of one file are expressed as replacements. Each is a run of the
    codemod over the whole file, so a file with thousands of codemod-backed findings would cost
    minutes; past the budget those results carry no fix (their message still says one exists,
    and `jaxmigrate --fix` applies it)."""

    PER_FILE = 200

    def __init__(self) -> None:
        self._spent: dict[str, int] = {}

    def spend(self, path: str) -> bool:
        self._spent[path] = self._spent.get(path, 0) + 1
        return self._spent[path] <= self.PER_FILE


class _Sources:
    """Each file's text read at most once per render; None for a notebook finding (its lines
    count within a cell, not within the file on disk) or a file that cannot be read."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._cache: dict[str, SourceText | None] = {}

    def get(self, finding: Finding) -> SourceText | None:
        if finding.cell is not None:
            return None
        if finding.path not in self._cache:
            text = self._report.read_source(finding.path)
            self._cache[finding.path] = None if text is None else SourceText(text)
        return self._cache[finding.path]
