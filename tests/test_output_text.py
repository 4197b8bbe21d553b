"""`--output-format text`: each finding, its source line with carets under the span, a fix hint,
and the summary line."""

from __future__ import annotations

import io

import pytest

from jaxmigrate.lint.output import Report, get_renderer
from jaxmigrate.lint.output.text import caret_line
from jaxmigrate.lint.rule import Edit, Finding, Fix, Safety

SOURCE = """\
import jax
step = jax.pmap(update, axis_name="i")
total = lax.psum(
    x, "i")
"""
SAFE = Fix(Safety.SAFE, "rewrite as jax.jit over jax.shard_map", (Edit(18, 26, "jax.jit"),))
UNSAFE = Fix(Safety.UNSAFE, "drop the psum GSPMD now inserts", (Edit(47, 55, "x"),))

FINDINGS = [
    Finding("JM000", "cannot decode: invalid start byte", "binary.py", 1, 1, 1, 1),
    Finding("JM101", "`jax.pmap` is superseded", "train.py", 2, 8, 2, 16, SAFE),
    Finding("JM401", "psum over the mapped axis", "train.py", 3, 9, 4, 11, UNSAFE),
]


def render(report: Report) -> str:
    out = io.StringIO()
    get_renderer("text")(report, out)
    return out.getvalue()


def report(findings=FINDINGS, **options) -> Report:
    sources = {"train.py": SOURCE}
    return Report(findings, files_checked=2, read_source=sources.get, **options)


def test_findings_with_source_lines_carets_and_fix_hints():
    assert render(report()) == (
        "binary.py:1:1 JM000 cannot decode: invalid start byte\n"
        "\n"
        "train.py:2:8 JM101 `jax.pmap` is superseded\n"
        "  2 | step = jax.pmap(update, axis_name=\"i\")\n"
        "    |        ^^^^^^^^\n"
        "  [*] fix available (safe): rewrite as jax.jit over jax.shard_map\n"
        "\n"
        "train.py:3:9 JM401 psum over the mapped axis\n"
        "  3 | total = lax.psum(\n"
        "    |         ^^^^^^^^^\n"  # the span runs on to line 4: underlined to this line's end
        "  unsafe fix available with --unsafe-fixes: drop the psum GSPMD now inserts\n"
        "\n"
        "3 findings, 1 fixable (2 with --unsafe-fixes)\n"
    )


def test_with_unsafe_fixes_both_fixes_apply():
    lines = render(report(unsafe_fixes=True)).splitlines()
    assert "  [*] fix available (unsafe): drop the psum GSPMD now inserts" in lines
    assert lines[-1] == "3 findings, 2 fixable"


def test_fix_mode_summary():
    assert render(report(FINDINGS[2:], fix_mode=True, fixed=4)).splitlines()[-1] == (
        "4 fixed, 1 left of 5 found (1 fixable with --unsafe-fixes)"
    )


def test_clean_run():
    assert render(report([])) == "All checks passed (2 files)\n"


def span(line: str, start: str, text: str) -> Finding:
    """A one-line finding over ``text`` (searched from ``start``) in ``line``; 1-based columns in
    characters, as the engine reports them."""
    column = line.index(text, line.index(start)) + 1
    return Finding("JM101", "m", "a.py", 1, column, 1, column + len(text))


@pytest.mark.parametrize(
    "line, start, text, shown, carets",
    [
        pytest.param("y = jax.pmap(f)", "jax", "jax.pmap",
                     "y = jax.pmap(f)",
                     "    ^^^^^^^^", id="ascii"),
        pytest.param("é = jax.pmap(f)", "jax", "jax.pmap",
                     "é = jax.pmap(f)",
                     "    ^^^^^^^^", id="two-byte character before the span counts once"),
        pytest.param("数据 = jax.pmap(f)", "jax", "jax.pmap",
                     "数据 = jax.pmap(f)",
                     "       ^^^^^^^^", id="wide characters before the span take two cells each"),
        pytest.param("x = f('数据')", "'", "'数据'",
                     "x = f('数据')",
                     "      ^^^^^^", id="wide characters inside the span get two carets each"),
        pytest.param("\tstep = jax.pmap(f)", "jax", "jax.pmap",
                     "    step = jax.pmap(f)",
                     "           ^^^^^^^^", id="tabs expanded in both lines"),
    ],
)
def test_carets_sit_under_the_span(line, start, text, shown, carets):
    assert caret_line(line, span(line, start, text)) == (shown, carets)


def test_an_empty_span_past_the_end_of_the_line_gets_one_caret():
    assert caret_line("", Finding("JM000", "m", "a.py", 1, 1, 1, 1)) == ("", "^")
    assert caret_line("ab", Finding("JM000", "m", "a.py", 1, 4, 1, 4)) == ("ab", "   ^")


def test_non_ascii_in_the_rendered_output():
    source = "数据 = jax.pmap(f)\n"
    finding = Finding("JM101", "`jax.pmap` → shard_map", "modèles/é.py", 1, 6, 1, 14)
    output = render(Report([finding], 1, read_source={"modèles/é.py": source}.get))
    assert output.splitlines()[:3] == [
        "modèles/é.py:1:6 JM101 `jax.pmap` → shard_map",
        "  1 | 数据 = jax.pmap(f)",
        "    |        ^^^^^^^^",
    ]


def test_no_source_line_when_the_text_is_unavailable():
    findings = [Finding("JM101", "gone", "deleted.py", 1, 1, 1, 5)]
    assert render(report(findings)).splitlines() == ["deleted.py:1:1 JM101 gone", "", "1 finding, 0 fixable"]


def test_a_notebook_finding_shows_its_line_of_its_cell():
    import json

    cells = [{"cell_type": "markdown", "source": ["# step = jax.pmap(f)\n"]},
             {"cell_type": "code", "source": ["import jax\n"]},
             {"cell_type": "code", "source": ["x = 1\n", "step = jax.pmap(update)\n"]}]
    notebook = json.dumps({"cells": cells, "metadata": {}}, indent=1)
    finding = Finding("JM101", "pmap", "nb.ipynb", 2, 8, 2, 16, cell=3)
    shown = Report([finding], 1, read_source={"nb.ipynb": notebook}.get)
    assert render(shown).splitlines()[:3] == [
        "nb.ipynb:cell 3:2:8 JM101 pmap",
        "  2 | step = jax.pmap(update)",
        "    |        ^^^^^^^^",
    ]


def test_messages_are_not_rich_markup_and_long_paths_do_not_wrap():
    path = "very/" * 60 + "deep.py"
    finding = Finding("JM101", "[bold]not markup[/bold] :smile:", path, 1, 1, 1, 2)
    first = render(report([finding])).splitlines()[0]
    assert first == f"{path}:1:1 JM101 [bold]not markup[/bold] :smile:"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal_env(monkeypatch):
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    return monkeypatch


def test_colour_only_on_a_terminal(terminal_env):
    assert "\x1b[" not in render(report())
    out = Terminal()
    get_renderer("text")(report(), out)
    assert "\x1b[1;33mJM101" in out.getvalue()  # bold yellow rule code
    assert "\x1b[1;31mJM000" in out.getvalue()  # bold red for the tool's own codes


def test_no_color_is_respected(terminal_env):
    terminal_env.setenv("NO_COLOR", "1")
    out = Terminal()
    get_renderer("text")(report(), out)
    assert "33m" not in out.getvalue() and "31m" not in out.getvalue()


def test_force_color_colours_a_pipe(terminal_env):
    terminal_env.setenv("FORCE_COLOR", "1")
    assert "\x1b[1;33mJM101" in render(report())


def test_the_coloured_text_is_the_plain_text_with_colour(terminal_env):
    # Without colour the renderer writes the text itself, with colour rich prints it: the same
    # characters either way, wide characters, tabs and control codes in messages included.
    import re

    odd = Finding("JM101", "漢字\ttab, bell\x07, carriage\rreturn", "train.py", 2, 8, 2, 16, SAFE)
    findings = [*FINDINGS, odd] * 110  # more than one batch of lines
    plain = render(report(findings))
    terminal_env.setenv("FORCE_COLOR", "1")
    coloured = render(report(findings))
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
