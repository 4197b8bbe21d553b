"""`--output-format concise`: `path:line:col: CODE [*] message` per finding, then the summary."""

from __future__ import annotations

import io

import pytest

from jaxmigrate.lint.output import Report, get_renderer
from jaxmigrate.lint.output.summary import summary_line
from jaxmigrate.lint.rule import Edit, Finding, Fix, Safety

SAFE = Fix(Safety.SAFE, "use jax.jit", (Edit(0, 3, "jit"),))
UNSAFE = Fix(Safety.UNSAFE, "drop the psum", (Edit(0, 3, "x"),))

FINDINGS = [
    Finding("JM000", "cannot read: permission denied", "locked.py", 1, 1, 1, 1),
    Finding("JM201", "pjit is removed", "modèle.py", 2, 7, 2, 11, SAFE),
    Finding("JM401", "psum GSPMD now inserts", "modèle.py", 9, 5, 9, 20, UNSAFE),
    Finding("JM101", "pmap in a notebook", "nb.ipynb", 3, 1, 3, 9, cell=2),
]


def render(report: Report) -> str:
    out = io.StringIO()
    get_renderer("concise")(report, out)
    return out.getvalue()


def test_one_line_per_finding_and_the_summary():
    assert render(Report(FINDINGS, files_checked=3)) == (
        "locked.py:1:1: JM000 cannot read: permission denied\n"
        "modèle.py:2:7: JM201 [*] pjit is removed\n"
        "modèle.py:9:5: JM401 psum GSPMD now inserts\n"
        "nb.ipynb:cell 2:3:1: JM101 pmap in a notebook\n"
        "4 findings, 1 fixable (2 with --unsafe-fixes)\n"
    )


def test_unsafe_fixes_are_marked_fixable_when_enabled():
    assert render(Report(FINDINGS, files_checked=3, unsafe_fixes=True)).splitlines()[1:] == [
        "modèle.py:2:7: JM201 [*] pjit is removed",
        "modèle.py:9:5: JM401 [*] psum GSPMD now inserts",
        "nb.ipynb:cell 2:3:1: JM101 pmap in a notebook",
        "4 findings, 2 fixable",
    ]


def test_clean_run():
    assert render(Report([], files_checked=12)) == "All checks passed (12 files)\n"


@pytest.mark.parametrize(
    "report, expected",
    [
        pytest.param(Report(FINDINGS[:1], 1), "1 finding, 0 fixable", id="one finding"),
        pytest.param(Report(FINDINGS[:2], 2), "2 findings, 1 fixable", id="two findings"),
        pytest.param(Report(FINDINGS[2:3], 1), "1 finding, 0 fixable (1 with --unsafe-fixes)",
                     id="only an unsafe fix"),
        pytest.param(Report([], 1), "All checks passed (1 file)", id="one file, clean"),
        pytest.param(Report([], 0), "All checks passed (0 files)", id="no files"),
        pytest.param(Report(FINDINGS[2:3], 4, fix_mode=True, fixed=3),
                     "3 fixed, 1 left of 4 found (1 fixable with --unsafe-fixes)", id="fix mode, unsafe left"),
        pytest.param(Report(FINDINGS[:1], 4, fix_mode=True, fixed=1), "1 fixed, 1 left of 2 found",
                     id="fix mode, unfixable left"),
        pytest.param(Report([], 4, fix_mode=True, fixed=2), "2 fixed, 0 left of 2 found", id="fix mode, all fixed"),
        pytest.param(Report(FINDINGS, 4, fix_mode=True, fixed=3, found=8, gone=5),
                     "5 fixed, 3 left of 8 found, and 1 new after fixing (1 fixable with --unsafe-fixes)",
                     id="fix mode: fixes made others moot and revealed one"),
        pytest.param(Report([], 4, fix_mode=True), "All checks passed (4 files)",
                     id="fix mode, nothing to do"),
    ],
)
def test_summary_line(report, expected):
    assert summary_line(report) == expected
