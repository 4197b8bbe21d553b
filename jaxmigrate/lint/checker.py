"""Lint and fix one source text: pre-filter, parse, one batched walk, suppressions, fix loop."""

from __future__ import annotations

import ast
import re
import traceback
from dataclasses import dataclass
from functools import cache

from jaxmigrate.lint.context import FileContext, SourceText
from jaxmigrate.lint.rule import Edit, Finding, Fix, Rule, Safety

MAX_FIX_PASSES = 10

_SKIP_FILE = re.compile(r"^[ \t\f]*#[ \t]*jaxmigrate:[ \t]*skip-file\b", re.MULTILINE)
_NOQA = re.compile(
    r"#[ \t]*noqa(?::[ \t]*(?P<codes>[A-Za-z]+[0-9]+(?:[ \t]*,?[ \t]*[A-Za-z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@cache
def _trigger_pattern(rules: tuple[type[Rule], ...]) -> re.Pattern[str]:
    words = sorted({word for rule in rules for word in rule.trigger_words}, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b") if words else re.compile(r"(?!)")


def rules_triggered(text: str, rules: tuple[type[Rule], ...]) -> tuple[type[Rule], ...]:
    """The rules one of whose trigger words the text names. Sound by construction of the words."""
    present = set(_trigger_pattern(rules).findall(text))
    return tuple(rule for rule in rules if present.intersection(rule.trigger_words))


def parse_error(path: str, source: SourceText, error: Exception) -> Finding:
    if isinstance(error, SyntaxError) and error.lineno:
        line = min(error.lineno, len(source.line_starts))
        # SyntaxError offsets count characters here (the text was decoded before parsing).
        column = max(error.offset or 1, 1)
        message = f"cannot parse: {error.msg} (line {error.lineno}, column {column})"
    else:
        line, column = 1, 1
        message = f"cannot parse: {error}"
    return Finding("JM000", message, path, line, column, line, column)


def lint_text(
    text: str, path: str, rules: tuple[type[Rule], ...], target_jax: tuple[int, int]
) -> list[Finding]:
    """All findings for one file's text, after ``noqa`` and ``skip-file`` suppressions."""
    if _SKIP_FILE.search(text):
        return []
    active = rules_triggered(text, rules)
    if not active:
        return []
    source = SourceText(text)
    try:
        tree = ast.parse(text, filename=path, type_comments=False)
    except (SyntaxError, ValueError) as error:
        return [parse_error(path, source, error)]
    ctx = FileContext(path=path, source=source, tree=tree, target_jax=target_jax)
    findings = _run_rules(ctx, [rule() for rule in active])
    return sorted(_unsuppressed(findings, source), key=lambda f: f.sort_key)


def _run_rules(ctx: FileContext, rules: list[Rule]) -> list[Finding]:
    crashed: dict[str, BaseException] = {}
    dispatch: dict[type, list[tuple[Rule, str]]] = {}
    for rule in rules:
        for type_name, method in rule.visited_types().items():
            node_type = getattr(ast, type_name)
            dispatch.setdefault(node_type, []).append((rule, method))

    def call(rule: Rule, function, *args) -> None:
        if rule.code in crashed:
            return
        ctx.rule = rule
        try:
            function(*args)
        except RecursionError as error:
            crashed[rule.code] = error
        except Exception as error:  # a rule's bug must not cost the user the other findings
            crashed[rule.code] = error

    if dispatch:
        for node in ast.walk(ctx.tree):
            for rule, method in dispatch.get(type(node), ()):
                call(rule, getattr(rule, method), node, ctx)
    for rule in rules:
        if type(rule).check_module is not Rule.check_module:
            call(rule, rule.check_module, ctx)

    findings = [f for f in ctx.findings if f.code not in crashed]
    for code, error in crashed.items():
        where = traceback.extract_tb(error.__traceback__)[-1]
        findings.append(
            Finding(
                "JM001",
                f"rule {code} crashed on this file: {type(error).__name__}: {error}"
                f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}); please report it",
                ctx.path, 1, 1, 1, 1,
            )
        )
    return findings


def _unsuppressed(findings: list[Finding], source: SourceText) -> list[Finding]:
    kept = []
    for finding in findings:
        if finding.code in ("JM000", "JM001"):
            kept.append(finding)
            continue
        match = _NOQA.search(source.line(finding.line)) if finding.line <= len(source.line_starts) else None
        if match is None:
            kept.append(finding)
        elif match.group("codes"):
            codes = {code.upper() for code in _CODE.findall(match.group("codes"))}
            if finding.code not in codes:
                kept.append(finding)
    return kept


@dataclass
class FixResult:
    text: str
    findings: list[Finding]  # what remains after fixing
    fixed: int  # how many fixes were applied
    errors: list[Finding]  # fixes that were dropped because they would break the file


def fix_text(
    text: str,
    path: str,
    rules: tuple[type[Rule], ...],
    target_jax: tuple[int, int],
    unsafe: bool = False,
) -> FixResult:
    """Apply fixes until none is left (bounded); the result always parses."""
    allowed = {Safety.SAFE, Safety.UNSAFE} if unsafe else {Safety.SAFE}
    fixed = 0
    errors: list[Finding] = []
    rejected: set[tuple] = set()
    findings = lint_text(text, path, rules, target_jax)
    for _ in range(MAX_FIX_PASSES):
        fixes = [
            (f.code, f.fix)
            for f in findings
            if f.fix is not None and f.fix.safety in allowed and _fix_key(f.fix) not in rejected
        ]
        if not fixes:
            break
        newline = SourceText(text).newline
        applied, text_after = _apply_non_overlapping(text, fixes, newline)
        if not _parses(text_after):
            # Find the culprits one by one, keep the fixes that are fine on their own.
            applied, text_after = [], text
            for code, fix in fixes:
                candidate = _apply(text_after, list(fix.edits), newline)
                if _overlaps_applied(fix, applied) or not _parses(candidate):
                    if not _parses(candidate):
                        rejected.add(_fix_key(fix))
                        errors.append(_broken_fix_error(path, code, fix, SourceText(text)))
                    continue
                applied.append(fix)
                text_after = candidate
                break  # offsets of the others are stale now; the next pass re-lints
        if not applied or text_after == text:
            break
        fixed += len(applied)
        text = text_after
        findings = lint_text(text, path, rules, target_jax)
    return FixResult(text, findings, fixed, errors)


def _fix_key(fix: Fix) -> tuple:
    return (fix.message, fix.edits)


def _broken_fix_error(path: str, code: str, fix: Fix, source: SourceText) -> Finding:
    line, column = source.position(min(edit.start for edit in fix.edits))
    return Finding(
        "JM001",
        f"the fix of {code} ({fix.message}) would leave {path} unparseable; it was not applied"
        " (please report it)",
        path, line, column, line, column,
    )


def _overlaps_applied(fix: Fix, applied: list[Fix]) -> bool:
    return any(
        a.start < b.end and b.start < a.end
        for other in applied
        for a in fix.edits
        for b in other.edits
    )


def _apply_non_overlapping(
    text: str, fixes: list[tuple[str, Fix]], newline: str
) -> tuple[list[Fix], str]:
    applied: list[Fix] = []
    for _, fix in sorted(fixes, key=lambda item: min(e.start for e in item[1].edits)):
        if not _overlaps_applied(fix, applied):
            applied.append(fix)
    edits = [edit for fix in applied for edit in fix.edits]
    return applied, _apply(text, edits, newline)


def _apply(text: str, edits: list[Edit], newline: str) -> str:
    for edit in sorted(edits, reverse=True):
        content = edit.content.replace("\n", newline) if newline != "\n" else edit.content
        text = text[: edit.start] + content + text[edit.end :]
    return text


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True
