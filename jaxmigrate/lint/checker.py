"""Lint and fix one source text: pre-filter (``prefilter``), parse, one batched walk, suppressions, fix loop."""

from __future__ import annotations

import ast
import gc
import heapq
import io
import re
import tokenize
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cache

from jaxmigrate.core.edits import Edit, splice
from jaxmigrate.core.module import forget, reusing_checked_modules
from jaxmigrate.core.source import SourceText
from jaxmigrate.lint import fix_policy, suppressions
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.findings import Finding, Fix, Safety
from jaxmigrate.lint.prefilter import rules_triggered
from jaxmigrate.lint.rule import Rule
from jaxmigrate.migrate._layout import line_width

MAX_FIX_PASSES = 10

_SKIP_FILE = re.compile(r"^[ \t\f]*#[ \t]*jaxmigrate:[ \t]*skip-file\b", re.MULTILINE)


def parse_error(path: str, source: SourceText, error: Exception) -> Finding:
    if isinstance(error, (RecursionError, MemoryError)):
        # CPython's parser has a fixed nesting budget: ~3,000 chained `+` or deeply nested
        # brackets exhaust it. Python itself could not run the file either.
        line, column = 1, 1
        message = f"cannot parse: too deeply nested for Python's parser ({type(error).__name__}: {error})"
    elif isinstance(error, SyntaxError) and error.lineno:
        line = min(error.lineno, len(source.line_starts))
        # SyntaxError offsets count characters here (the text was decoded before parsing).
        column = max(error.offset or 1, 1)
        message = f"cannot parse: {error.msg} (line {error.lineno}, column {column})"
    else:
        line, column = 1, 1
        message = f"cannot parse: {error}"
    return Finding("JM000", message, path, line, column, line, column)


def lint_text(
    text: str, path: str, rules: tuple[type[Rule], ...], target_jax: tuple[int, int],
    from_jax: tuple[int, int] | None = None, suppressed: list[Finding] | None = None,
) -> list[Finding]:
    """All findings for one file's text, after ``noqa`` and ``skip-file`` suppressions. Findings
    a ``noqa`` comment suppressed are appended to ``suppressed`` when it is given (for reports;
    a ``skip-file`` is not looked into)."""
    findings = _lint(text, path, rules, target_jax, from_jax, suppressed)
    return [] if findings is None else findings


def _lint(text, path, rules, target_jax, from_jax, suppressed=None) -> list[Finding] | None:
    """``lint_text``'s findings, or None when the text was not even parsed (``skip-file``, or
    no selected rule could fire on it)."""
    # The substring test is 10x cheaper than the regex; a match counts only in a comment token.
    if "jaxmigrate:" in text and _SKIP_FILE.search(text) and _skip_file_comment(text):
        return None
    active = rules_triggered(text, _applicable(rules, target_jax, from_jax), target_jax)
    # JM002 judges the noqa directives, which needs the other rules' findings but no tree: its
    # reach is empty, so the pre-filter never makes it active, and a file is parsed for it only
    # when some other rule could fire there too.
    audit = suppressions.UNUSED_NOQA in _codes(rules) and suppressions.may_need_audit(text)
    if not active and not audit:
        return None
    source = SourceText(text)
    if not active:
        return sorted(_unsuppressed([], source, path, rules, audit, suppressed), key=lambda f: f.sort_key)
    # A tree is freed by reference counting; the cyclic GC only re-traverses its young nodes
    # again and again while it is built (measured: parsing jax's own tree 4.2 s -> 2.5 s).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            tree = ast.parse(text, filename=path, type_comments=False)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            return [parse_error(path, source, error)]
        ctx = FileContext(path=path, source=source, tree=tree, target_jax=target_jax, from_jax=from_jax)
        findings = _run_rules(ctx, [rule() for rule in active])
        del ctx, tree  # freed now: the GC, back on, would traverse the whole tree once (10% of a check)
    finally:
        if gc_was_enabled:
            gc.enable()
    return sorted(_unsuppressed(findings, source, path, rules, audit, suppressed), key=lambda f: f.sort_key)


def _unsuppressed(findings, source, path, rules, audit, suppressed=None) -> list[Finding]:
    """The findings no directive suppresses (those it does appended to ``suppressed``, when given),
    JM002's when ``audit``, with the project's fix policy applied."""
    from jaxmigrate.lint import registry

    known = frozenset(registry.TOOL_CODES) | _codes(registry.all_rules())
    kept = suppressions.unsuppressed(findings, source, path, _codes(rules), known, audit)
    if suppressed is not None:
        shown = set(map(id, kept))
        suppressed.extend(sorted((f for f in findings if id(f) not in shown), key=lambda f: f.sort_key))
    policy = fix_policy.current()
    return kept if policy is None else [policy.finding(f) for f in kept]


def _codes(rules) -> frozenset[str]:
    return frozenset(rule.code for rule in rules)


@cache
def _applicable(rules: tuple[type[Rule], ...], target_jax, from_jax) -> tuple[type[Rule], ...]:
    """The rules that can report anything when migrating from ``from_jax`` to ``target_jax``: a
    rule about a result that changed needs to know the JAX the code was written for."""
    return tuple(rule for rule in rules if rule.applies(target_jax, from_jax))


def _run_rules(ctx: FileContext, rules: list[Rule]) -> list[Finding]:
    """Each rule visits the nodes of the types it asks for, in walk order, then its module check.
    A rule that raises loses its findings for this file and becomes a JM001; the others go on."""
    crashed: dict[str, BaseException] = {}
    for rule in rules:
        ctx.code = rule.code
        try:
            methods = {getattr(ast, t): getattr(rule, m) for t, m in rule.visited_types().items()}
            if len(methods) == 1:
                ((node_type, method),) = methods.items()
                for _, node in ctx.by_type.get(node_type, ()):
                    method(node, ctx)
            elif methods:
                lists = [ctx.by_type.get(node_type, ()) for node_type in methods]
                for _, node in heapq.merge(*lists, key=_position):
                    methods[type(node)](node, ctx)
            if type(rule).check_module is not Rule.check_module:
                rule.check_module(ctx)
        except Exception as error:  # a rule's bug must not cost the user the other findings
            crashed[rule.code] = error
        except RecursionError as error:  # pragma: no cover - RecursionError is an Exception
            crashed[rule.code] = error

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


def _position(item: tuple[int, ast.AST]) -> int:
    return item[0]


def _skip_file_comment(text: str) -> bool:
    """Whether a comment on a line of its own says ``jaxmigrate: skip-file`` (the raw text matched
    already; a docstring that mentions the comment does not count). A text the tokenizer gives up
    on counts a comment it reached before giving up, and else trusts the raw match."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and _SKIP_FILE.match(token.line[: token.start[1]] + token.string):
                return True
    except (tokenize.TokenError, SyntaxError):
        return True
    return False


@dataclass
class FixResult:
    text: str
    findings: list[Finding]  # what remains after fixing
    fixed: int  # how many fixes were applied
    errors: list[Finding]  # fixes that were dropped because they would break the file
    found: int = 0  # findings before fixing
    # Of those, how many of each code are no longer there: fixed, or made moot by another fix.
    gone: dict[str, int] = field(default_factory=dict)


def fix_text(
    text: str,
    path: str,
    rules: tuple[type[Rule], ...],
    target_jax: tuple[int, int],
    unsafe: bool = False,
    from_jax: tuple[int, int] | None = None,
    line_length: int | None = None,
) -> FixResult:
    """Apply fixes until none is left (bounded); the result always parses.

    Each pass applies either all non-overlapping edit fixes, or (when none is left) one codemod
    for all of its findings; then the text is linted again, so later fixes see earlier ones.
    """
    # A codemod plans on the module the checker just built. The trees of a fix are freed by
    # reference counting; with the cyclic GC on, each would be traversed while it is alive.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with reusing_checked_modules(), line_width(line_length):
            return _fix_passes(text, path, rules, target_jax, unsafe, from_jax)
    finally:
        if gc_was_enabled:
            gc.enable()


def _fix_passes(text, path, rules, target_jax, unsafe, from_jax) -> FixResult:
    allowed = {Safety.SAFE, Safety.UNSAFE} if unsafe else {Safety.SAFE}
    fixed = 0
    errors: list[Finding] = []
    rejected: set[tuple] = set()
    findings = lint_text(text, path, rules, target_jax, from_jax)
    first, original = findings, text

    def check(candidate: str) -> list[Finding] | None:
        return _checked(candidate, path, rules, target_jax, from_jax)

    for _ in range(MAX_FIX_PASSES):
        fixable = [
            replace(f, fix=fix) for f in findings
            if (fix := _allowed_fix(f.fix, allowed, rejected)) is not None
        ]
        if not fixable:
            break
        source = SourceText(text)
        edit_fixes = [f for f in fixable if not f.fix.codemod]
        if edit_fixes:
            forget()  # edit fixes need no module: do not hold it while the result is parsed
            count, text_after, checked = _apply_edit_fixes(text, edit_fixes, source, path, rejected, errors, check)
        else:
            count, text_after, checked = _apply_codemod(text, fixable, source, path, rejected, errors, check)
        if not count or text_after == text:
            continue  # what failed was rejected; the others get another pass
        fixed += count
        text = text_after
        findings = checked if checked is not None else lint_text(text, path, rules, target_jax, from_jax)
    return FixResult(text, findings, fixed, errors, len(first), _gone(first, original, findings, text))


def _gone(before: list[Finding], before_text: str, after: list[Finding], after_text: str) -> dict[str, int]:
    """How many of ``before`` are not among ``after``, by code: the findings of a code there were
    less of after the fix. Counted, not matched by place or text: fixes above a finding move it, and
    a fix inside what it points at rewrites its text (a `jax.tree_map(lambda x: x[0], ...)` renamed
    to `jax.tree.map` by another rule is the same JM505 still). One fix can make others moot (the
    global view removes the pmap's `unreplicate`) or bring new ones to light, so the counts of a
    fix run are of findings, not of fixes applied."""
    if after_text == before_text:
        return {}
    left = Counter(f.code for f in before)
    left.subtract(f.code for f in after)
    return {code: count for code, count in sorted(left.items()) if count > 0}


def _checked(text, path, rules, target_jax, from_jax) -> list[Finding] | None:
    """The findings of a fix's result, or None when it does not parse: the check's own parse
    tells (a separate parse to see that it parses cost a whole parse of the file a pass)."""
    findings = _lint(text, path, rules, target_jax, from_jax)
    if findings is None:  # the check did not parse it
        return [] if _parses(text) else None
    if len(findings) == 1 and findings[0].code == "JM000":
        return None  # the parse error (a fix's result is no unreadable file)
    return findings


def _allowed_fix(fix: Fix | None, allowed: set[Safety], rejected: set[tuple]) -> Fix | None:
    """The first fix of the chain (the fix, its fallback, ...) that may be applied."""
    while fix is not None and (fix := fix.allowed(allowed)) is not None:
        if _fix_key(fix) not in rejected:
            return fix
        fix = fix.fallback
    return None


def _apply_edit_fixes(text, findings, source, path, rejected, errors, check) -> tuple[int, str, list | None]:
    """(fixes applied, the text after them, its findings when already checked)."""
    applied, text_after = _apply_non_overlapping(text, [f.fix for f in findings], source.newline)
    checked = check(text_after)
    if checked is not None:
        return len(applied), text_after, checked
    # Some fix breaks the file: keep the first one that is fine on its own, reject the breakers.
    for finding in findings:
        candidate = _apply(text, list(finding.fix.edits), source.newline)
        if _parses(candidate):
            return 1, candidate, None
        rejected.add(_fix_key(finding.fix))
        errors.append(_broken_fix_error(path, finding.code, finding.fix, source, finding))
    return 0, text, None


def next_codemod(findings: list[Finding]) -> str:
    """The codemod a pass runs: a whole-module one first, else the lowest code's. The pmap rewrites
    go first: the mesh they build is the one a replication of the step's values lands on
    (``_device_put``), so the step compiles once, as under pmap."""
    return next((f for f in findings if f.fix.whole_module), min(findings, key=lambda f: f.code)).fix.codemod


def _apply_codemod(text, findings, source, path, rejected, errors, check) -> tuple[int, str, list | None]:
    """(fixes applied, the text after them, its findings when already checked)."""
    name = next_codemod(findings)
    mine = [f for f in findings if f.fix.codemod == name]
    candidate, checked, problem = _run_codemod(name, text, mine, check)
    applied = mine
    if problem is not None and len(mine) > 1:
        # One bad site must not sink the others: each site alone, then the good ones together.
        good = [f for f in mine if _run_codemod(name, text, [f], check)[2] is None]
        if good and len(good) < len(mine):
            candidate, checked, again = _run_codemod(name, text, good, check)
            if again is None:
                applied = good
                for finding in mine:
                    if finding not in good:
                        rejected.add(_fix_key(finding.fix))
                        errors.append(_broken_fix_error(path, finding.code, finding.fix, source, finding, problem))
                problem = None
    if problem is None and candidate != text:
        return len(applied), candidate, checked
    for finding in mine:
        rejected.add(_fix_key(finding.fix))
    if problem is not None:
        errors.append(_broken_fix_error(path, mine[0].code, mine[0].fix, source, mine[0], problem))
    return 0, text, None


def _run_codemod(name, text, findings, check) -> tuple[str, list | None, str | None]:
    """(the codemod's result for the sites of ``findings``, its findings, what went wrong or None)."""
    sites = frozenset((f.line, f.column) for f in findings)
    try:
        candidate = _load_codemod(name)(text, sites)
    except Exception as error:  # a codemod's bug must not cost the user the other fixes
        return text, None, f"{type(error).__name__}: {error}"
    forget()  # the old text's module: not needed again, and not to be held with the new one
    if candidate == text:
        return text, None, None
    checked = check(candidate)
    return candidate, checked, "its result does not parse" if checked is None else None


@cache
def _load_codemod(name: str):
    from importlib import import_module

    module, _, function = name.partition(":")
    return getattr(import_module(module), function)


def _fix_key(fix: Fix) -> tuple:
    return (fix.message, fix.edits, fix.codemod)


def _broken_fix_error(
    path: str, code: str, fix: Fix, source: SourceText, finding: Finding,
    problem: str = "it would leave the file unparseable",
) -> Finding:
    return Finding(
        "JM001",
        f"the fix of {code} ({fix.message}) was not applied to {path}: {problem}"
        " (please report it)",
        path, finding.line, finding.column, finding.line, finding.column,
    )


def _overlaps_applied(fix: Fix, applied: list[Fix]) -> bool:
    return any(
        a.start < b.end and b.start < a.end
        for other in applied
        for a in fix.edits
        for b in other.edits
    )


def _apply_non_overlapping(text: str, fixes: list[Fix], newline: str) -> tuple[list[Fix], str]:
    applied: list[Fix] = []
    for fix in sorted(fixes, key=lambda fix: min(e.start for e in fix.edits)):
        if not _overlaps_applied(fix, applied):
            applied.append(fix)
    edits = [edit for fix in applied for edit in fix.edits]
    return applied, _apply(text, edits, newline)


def _apply(text: str, edits: list[Edit], newline: str) -> str:
    # One splice, not a copy of the text per edit (quadratic on a big file with many fixes).
    if newline != "\n":
        edits = [Edit(e.start, e.end, e.content.replace("\n", newline)) for e in edits]
    return splice(text, edits)


def _parses(text: str) -> bool:
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as in lint_text: the tree is freed by reference counting, untraversed
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    finally:
        if gc_was_enabled:
            gc.enable()
    return True
