"""One text in, findings (and fixed text) out: pre-filter, parse, rules, suppressions, fix loop."""

from __future__ import annotations

import textwrap

import pytest

from jaxmigrate.lint.checker import MAX_FIX_PASSES, fix_text, lint_text
from jaxmigrate.lint.prefilter import rules_triggered

TARGET = (0, 10)


@pytest.fixture(autouse=True)
def _rules(test_rules):
    global TEST_RULES
    TEST_RULES = test_rules


def lint(text: str) -> list[tuple[str, int, int]]:
    return [(f.code, f.line, f.column) for f in lint_text(textwrap.dedent(text), "t.py", TEST_RULES, TARGET)]


def test_findings_have_code_and_one_based_position():
    assert lint("import x\nx.legacy\n") == [("JM901", 2, 1)]


def test_columns_count_characters_not_bytes():
    assert lint("s = 'é'; x.legacy\n") == [("JM901", 1, 10)]


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("x.legacy  # noqa\n", [], id="bare noqa"),
        pytest.param("x.legacy  # noqa: JM901\n", [], id="noqa with the code"),
        pytest.param("x.legacy  # NOQA:jm901\n", [], id="noqa is case-insensitive"),
        pytest.param("x.legacy  # noqa: JM100, JM901\n", [], id="code in a list"),
        pytest.param("x.legacy  # noqa: JM902\n", [("JM901", 1, 1)], id="noqa for another code"),
        pytest.param("x.legacy\ny = 1  # noqa\n", [("JM901", 1, 1)], id="noqa on another line"),
    ],
)
def test_noqa_suppresses_findings_on_its_line(text, expected):
    assert lint(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param('x.legacy; s = "# noqa"\n', [("JM901", 1, 1)], id="in a string"),
        pytest.param("x.legacy; s = '#noqa: JM901'\n", [("JM901", 1, 1)], id="with its code, in a string"),
        pytest.param('x.legacy; s = "# noqa"  # noqa\n', [], id="in a string, and in the comment"),
        pytest.param('x.legacy; s = "#"  # see # noqa\n', [], id="later in the comment"),
        pytest.param('x.legacy; s = f"{1}# noqa"\n', [("JM901", 1, 1)], id="in an f-string"),
    ],
)
def test_noqa_counts_only_in_a_comment(text, expected):
    assert lint(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("# jaxmigrate: skip-file\nx.legacy\n", [], id="skip-file comment"),
        pytest.param("x.legacy\n    # jaxmigrate: skip-file\n", [], id="skip-file indented, anywhere"),
        pytest.param("x.legacy  # jaxmigrate: skip-file\n", [("JM901", 1, 1)], id="not a trailing comment"),
    ],
)
def test_skip_file_comment_skips_the_whole_file(text, expected):
    assert lint(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param('"""How to opt out:\n\n# jaxmigrate: skip-file\n"""\nx.legacy\n', [("JM901", 5, 1)],
                     id="mentioned in a docstring"),
        pytest.param("s = '''\n  # jaxmigrate: skip-file\n'''\nx.legacy\n", [("JM901", 4, 1)],
                     id="in a multi-line string"),
        pytest.param('"""Docs."""\n# jaxmigrate: skip-file\nx.legacy\n', [], id="a comment after a docstring"),
        pytest.param("# jaxmigrate: skip-file\nx.legacy\ndef f(:\n", [], id="a comment in a file that cannot parse"),
    ],
)
def test_skip_file_counts_only_as_a_comment(text, expected):
    assert lint(text) == expected


def test_the_prefilter_runs_only_rules_whose_trigger_words_appear():
    def triggered(text):
        return [rule.code for rule in rules_triggered(text, TEST_RULES)]

    assert triggered("x.legacy") == ["JM901"]
    assert triggered("legacy_thing = 1") == []  # whole words only
    assert triggered("risky(); boom") == ["JM902", "JM903"]


def test_a_file_with_no_trigger_word_is_not_even_parsed():
    # Sound by construction: no rule could fire, so no parse is needed (and none is paid for).
    assert lint("def broken(:\n") == []


@pytest.mark.parametrize(
    "text, message, line",
    [
        pytest.param("x.legacy\ndef broken(:\n", "cannot parse", 2, id="syntax error"),
        pytest.param("x.legacy\n\x00\n", "null", 1, id="NUL byte"),
        pytest.param("x.legacy\n  y = 1\n", "indent", 2, id="bad indentation"),
    ],
)
def test_a_file_that_cannot_be_parsed_is_one_JM000_finding(text, message, line):
    findings = lint_text(text, "t.py", TEST_RULES, TARGET)
    assert [(f.code, f.line) for f in findings] == [("JM000", line)]
    assert message in findings[0].message.lower()


def test_a_crashing_rule_is_JM001_and_the_other_rules_still_report():
    findings = lint_text("boom\nx.legacy\n", "t.py", TEST_RULES, TARGET)
    assert [f.code for f in findings] == ["JM001", "JM901"]
    assert "JM903" in findings[0].message and "ZeroDivisionError" in findings[0].message


def test_a_crash_cannot_be_silenced_with_noqa():
    assert [f.code for f in lint_text("boom  # noqa\n", "t.py", TEST_RULES, TARGET)] == ["JM001"]


# --- fixes -------------------------------------------------------------------------------------


def fix(text: str, unsafe: bool = False):
    return fix_text(textwrap.dedent(text), "t.py", TEST_RULES, TARGET, unsafe=unsafe)


def test_safe_fixes_are_applied_and_nothing_remains():
    result = fix("a.legacy\nb.legacy.legacy\n")
    assert result.text == "a.modern\nb.modern.modern\n"
    assert result.fixed == 3  # the nested one needed a second pass
    assert result.findings == [] and result.errors == []


def test_fixing_is_idempotent():
    once = fix("a.legacy\nrisky()\n", unsafe=True)
    twice = fix(once.text, unsafe=True)
    assert (twice.text, twice.fixed, twice.findings) == (once.text, 0, [])


@pytest.mark.parametrize(
    "unsafe, text, remaining",
    [
        pytest.param(False, "risky()\n", ["JM902"], id="unsafe fix not applied by default"),
        pytest.param(True, "careful()\n", [], id="unsafe fix applied on request"),
    ],
)
def test_unsafe_fixes_are_applied_only_on_request(unsafe, text, remaining):
    result = fix("risky()\n", unsafe=unsafe)
    assert result.text == text
    assert [f.code for f in result.findings] == remaining


@pytest.mark.parametrize(
    "newline", [pytest.param("\n", id="LF"), pytest.param("\r\n", id="CRLF"), pytest.param("\r", id="CR")]
)
def test_fixes_keep_the_line_endings(newline):
    result = fix_text(newline.join(["a.legacy", "b = 1", ""]), "t.py", TEST_RULES, TARGET)
    assert result.text == newline.join(["a.modern", "b = 1", ""])


def test_a_fix_that_would_break_the_file_is_dropped_and_reported_as_JM001():
    result = fix("breakme\na.legacy\n")
    assert result.text == "breakme\na.modern\n"  # the good fix still went in
    assert [(f.code, f.line) for f in result.errors] == [("JM001", 1)]
    assert "t.py" in result.errors[0].message and "JM904" in result.errors[0].message
    assert [f.code for f in result.findings] == ["JM904"]  # still reported, never "fixed"


def test_the_fix_loop_is_bounded():
    # Nested fixes overlap, so each pass can apply only one: more than the bound can finish.
    result = fix("x" + ".legacy" * (MAX_FIX_PASSES + 5) + "\n")
    assert result.fixed == MAX_FIX_PASSES
    assert [f.code for f in result.findings] == ["JM901"] * 5
    compile(result.text, "t.py", "exec")


def test_the_shared_index_is_ast_walk_order_without_the_context_markers():
    import ast
    from pathlib import Path

    from jaxmigrate.lint.context import index

    for path in sorted((Path(__file__).parents[1] / "jaxmigrate").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes, by_type = index(tree)
        assert nodes == [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
        assert sorted(p for items in by_type.values() for p, _ in items) == list(range(len(nodes)))
        assert all(nodes[p] is n for items in by_type.values() for p, n in items)


# --- file-level noqa and JM002 unused-noqa ------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("# jaxmigrate: noqa: JM901\nx.legacy\nrisky()\n", [("JM902", 3)], id="file-level, one code"),
        pytest.param("import x\n# jaxmigrate: noqa\nx.legacy\nrisky()\n", [], id="file-level, every code"),
        pytest.param("x.legacy  # jaxmigrate: noqa: JM901\n", [("JM901", 1)], id="not on a line of its own: no file directive"),
        pytest.param('s = """\n# jaxmigrate: noqa\n"""\nx.legacy\n', [("JM901", 4)], id="in a string: no directive"),
    ],
)
def test_a_file_level_directive_suppresses_its_codes_in_the_whole_file(test_rules, text, expected):
    findings = lint_text(text, "t.py", test_rules, (0, 10))
    assert [(f.code, f.line) for f in findings] == expected


@pytest.mark.parametrize(
    "text, expected, fixed",
    [
        pytest.param("x = 1  # noqa: JM9999\n", ["unused `noqa` directive (unknown: JM9999)"], "x = 1\n",
                     id="an unknown code"),
        pytest.param("x = 1  # noqa: JM901\n", ["unused `noqa` directive (unused: JM901)"], "x = 1\n",
                     id="a selected code that suppressed nothing"),
        pytest.param("x.legacy  # noqa: JM901, JM902\n", ["unused `noqa` directive (unused: JM902)"],
                     "x.legacy  # noqa: JM901\n", id="one code of two used"),
        pytest.param("x.legacy  # noqa: JM901\n", [], None, id="used"),
        pytest.param("x = 1  # noqa: E501, F401\n", [], None, id="other linters' codes"),
        pytest.param("x = 1  # noqa\n", [], None, id="a bare noqa"),
        pytest.param("x = 1  # noqa: JM101\n", [], None, id="a code whose rule did not run"),
        pytest.param("# jaxmigrate: noqa: JM902\nx = 1\n", ["unused file-level `jaxmigrate: noqa` directive (unused: JM902)"],
                     "x = 1\n", id="file-level"),
    ],
)
def test_unused_noqa_reports_directive_codes_that_suppressed_nothing_or_are_unknown(
        monkeypatch, test_rules, text, expected, fixed):
    from jaxmigrate.lint import registry
    from jaxmigrate.lint.rules.legacy_pmap import LegacyPmap
    from jaxmigrate.lint.rules.unused_noqa import UnusedNoqa

    monkeypatch.setattr(registry, "all_rules", lambda: (*test_rules, UnusedNoqa, LegacyPmap))
    rules = (*test_rules, UnusedNoqa)
    findings = lint_text(text, "t.py", rules, (0, 10))
    assert [f.message for f in findings if f.code == "JM002"] == expected
    if fixed is not None:
        assert fix_text(text, "t.py", rules, (0, 10)).text == fixed

