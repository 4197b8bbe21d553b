"""Suppression comments: ``# noqa`` / ``# noqa: JM101`` on a finding's line, ``# jaxmigrate: noqa``
/ ``# jaxmigrate: noqa: JM601`` on a line of its own for the whole file (as ruff's ``# ruff: noqa``),
and JM002 (unused-noqa, as ruff's RUF100): a directive naming a jaxmigrate code that suppressed
nothing, or a code jaxmigrate does not have.

Only comment tokens count: a ``# noqa`` inside a string is no comment. Only ``JM`` codes are judged:
``# noqa: E501`` and a bare ``# noqa`` are shared with other linters, whose findings jaxmigrate
cannot see.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.source import SourceText
from jaxmigrate.lint.findings import Finding, Fix, Safety

UNUSED_NOQA = "JM002"
_CODES = r"[A-Za-z]+[0-9]+(?:[ \t]*,?[ \t]*[A-Za-z]+[0-9]+)*"
_NOQA = re.compile(rf"#[ \t]*noqa(?::[ \t]*(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE_NOQA = re.compile(rf"^[ \t]*#[ \t]*jaxmigrate:[ \t]*noqa\b(?::[ \t]*(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE_NOQA_ANYWHERE = re.compile(_FILE_NOQA.pattern, re.IGNORECASE | re.MULTILINE)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_OURS = re.compile(r"JM[0-9]+", re.IGNORECASE)
# Whether a text may hold a directive that names a code of ours: the audit's pre-filter.
_NAMES_OURS = re.compile(r"noqa[^\n]*JM[0-9]", re.IGNORECASE)
_NEVER_SUPPRESSED = ("JM000", "JM001")


@dataclass
class _Directive:
    line: int
    start: int  # offsets in the text of the directive (``# noqa: ...``) within its comment
    end: int
    codes: list[str] | None  # None: all
    codes_start: int = 0
    used: set[str] = field(default_factory=set)
    whole_comment: bool = False  # the comment is the directive and nothing else
    comment_start: int = 0  # where the whitespace before the comment begins
    line_end: int | None = None  # the comment is its line's only content: where the next line starts


def may_need_audit(text: str) -> bool:
    # Substring tests first: a case-insensitive regex over every file costs its fast literal scan.
    if "noqa" not in text and "NOQA" not in text and "Noqa" not in text:
        return False
    return _NAMES_OURS.search(text) is not None


def unsuppressed(findings: list[Finding], source: SourceText, path: str, selected: frozenset[str],
                 known: frozenset[str], audit: bool) -> list[Finding]:
    """``findings`` less the suppressed ones; with ``audit``, plus a JM002 for every directive
    code of ours that suppressed nothing though its rule ran (in ``selected``), or is unknown."""
    text = source.text
    line_directives: dict[int, _Directive] = {}
    file_directives: list[_Directive] = []
    # The tokenizer runs only when some directive may matter: most files never need it.
    if (audit and may_need_audit(text)) or ("jaxmigrate:" in text and _FILE_NOQA_ANYWHERE.search(text)) or any(
        # Once per line, not per finding: a one-line file of 5 MB with 200k findings was quadratic.
        _NOQA.search(source.line(n)) for n in {f.line for f in findings} if n <= len(source.line_starts)
    ):
        comments = _comments(text)
        if comments is None:  # cannot tokenize: the raw lines are all there is
            comments = {n: (source.line(n), 0) for n in range(1, len(source.line_starts) + 1)
                        if "noqa" in source.line(n).lower()}
        for number, (comment, column) in comments.items():
            start = source.line_starts[number - 1] + column
            if (match := _FILE_NOQA.match(comment)) and source.line(number)[:column].strip() == "":
                file_directives.append(_directive(number, start, match, comment, source))
            elif match := _NOQA.search(comment):
                line_directives[number] = _directive(number, start, match, comment, source)
    kept = []
    for finding in findings:
        directive = None
        if finding.code not in _NEVER_SUPPRESSED:
            directive = next((d for d in file_directives if _covers(d, finding.code)), None)
            if directive is None and (line := line_directives.get(finding.line)) and _covers(line, finding.code):
                directive = line
        if directive is None:
            kept.append(finding)
        else:
            directive.used.add(finding.code)
    if audit:
        for directive in [*file_directives, *line_directives.values()]:
            kept += _audited(directive, source, path, selected, known)
    return kept


def _covers(directive: _Directive, code: str) -> bool:
    return directive.codes is None or code in directive.codes


def _directive(number: int, start: int, match: re.Match, comment: str, source: SourceText) -> _Directive:
    codes = [c.upper() for c in _CODE.findall(match.group("codes"))] if match.group("codes") else None
    before = source.line(number)[: start - source.line_starts[number - 1]]
    return _Directive(
        number, start + match.start(), start + match.end(), codes,
        codes_start=start + match.start("codes") if codes else 0,
        whole_comment=match.start() == 0 and comment[match.end():].strip() == "",
        comment_start=start - (len(before) - len(before.rstrip())),
        line_end=(source.line_starts[number] if number < len(source.line_starts) else len(source.text))
        if not before.strip() else None,
    )


def _audited(directive: _Directive, source: SourceText, path: str, selected: frozenset[str],
             known: frozenset[str]) -> list[Finding]:
    if directive.codes is None or UNUSED_NOQA in directive.codes:
        return []  # a blanket noqa is other linters' too; `# noqa: JM002` keeps the directive
    ours = [code for code in directive.codes if _OURS.fullmatch(code)]
    unknown = [code for code in ours if code not in known]
    unused = [code for code in ours if code in selected and code not in directive.used]
    if not unknown and not unused:
        return []
    parts = [f"unused: {', '.join(unused)}"] if unused else []
    parts += [f"unknown: {', '.join(unknown)}"] if unknown else []
    drop = set(unknown + unused)
    left = [code for code in directive.codes if code not in drop]
    if left:
        start = directive.codes_start
        fix = Fix(Safety.SAFE, f"remove {', '.join(sorted(drop))} from the directive",
                  (Edit(start, directive.end, ", ".join(left)),))
    else:
        # The comment goes when it is only the directive; else its `#` stays for the rest of it.
        if directive.whole_comment and directive.line_end is not None:  # a line of its own: it goes
            edit = Edit(source.line_starts[directive.line - 1], directive.line_end, "")
        elif directive.whole_comment:
            edit = Edit(directive.comment_start, directive.end, "")
        else:
            edit = Edit(directive.start, directive.end, "#")
        fix = Fix(Safety.SAFE, "remove the directive", (edit,))
    line, column = directive.line, directive.start - source.line_starts[directive.line - 1] + 1
    end_column = directive.end - source.line_starts[directive.line - 1] + 1
    kind = "file-level `jaxmigrate: noqa`" if _FILE_NOQA.match(source.line(line)) else "`noqa`"
    return [Finding(UNUSED_NOQA, f"unused {kind} directive ({'; '.join(parts)})", path, line, column, line,
                    end_column, fix)]


def _comments(text: str) -> dict[int, tuple[str, int]] | None:
    """The comment on each line and its column, from the tokenizer; None when the text cannot be
    tokenized."""
    comments = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = (token.string, token.start[1])
    except (tokenize.TokenError, SyntaxError):
        return None
    return comments
