"""`--output-format github`: workflow commands, and a table of every finding in the step summary."""

from __future__ import annotations

import io

import pytest

from jaxmigrate.lint.output import Report, get_renderer
from jaxmigrate.lint.output.github import escape_data, escape_property
from jaxmigrate.lint.rule import Edit, Finding, Fix, Safety

SAFE = Fix(Safety.SAFE, "use jax.jit", (Edit(0, 3, "jit"),))

FINDINGS = [
    Finding("JM000", "cannot parse: invalid syntax", "broken.py", 4, 1, 4, 1),
    Finding("JM201", "pjit is removed; 100% replaceable", "src/modèle, v2:old.py", 2, 7, 2, 11, SAFE),
    Finding("JM401", "psum is redundant\nGSPMD inserts it | see docs", "train.py", 9, 5, 10, 3),
    Finding("JM101", "pmap", "nb.ipynb", 3, 1, 3, 9, cell=2),
]


@pytest.fixture(autouse=True)
def no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def render(report: Report) -> str:
    out = io.StringIO()
    get_renderer("github")(report, out)
    return out.getvalue()


def test_one_workflow_command_per_finding_and_nothing_else():
    assert render(Report(FINDINGS, files_checked=4)).splitlines() == [
        "::error file=broken.py,line=4,col=1,endLine=4,endColumn=1,title=JM000::cannot parse: invalid syntax",
        "::warning file=src/modèle%2C v2%3Aold.py,line=2,col=7,endLine=2,endColumn=11,title=JM201"
        "::pjit is removed; 100%25 replaceable",
        "::warning file=train.py,line=9,col=5,endLine=10,endColumn=3,title=JM401"
        "::psum is redundant%0AGSPMD inserts it | see docs",
        # GitHub cannot place a notebook cell's line in the .ipynb: the message says where.
        "::warning file=nb.ipynb,title=JM101::cell 2:3:1: pmap",
    ]


@pytest.mark.parametrize(
    "raw, data, prop",
    [
        pytest.param("plain", "plain", "plain", id="nothing to escape"),
        pytest.param("50%", "50%25", "50%25", id="percent first, so escapes are not re-escaped"),
        pytest.param("a\r\nb", "a%0D%0Ab", "a%0D%0Ab", id="line breaks"),
        pytest.param("a:b,c", "a:b,c", "a%3Ab%2Cc", id="colon and comma only in properties"),
        pytest.param("%3A", "%253A", "%253A", id="an escape-looking text stays literal"),
    ],
)
def test_escaping(raw, data, prop):
    assert escape_data(raw) == data
    assert escape_property(raw) == prop


def test_no_findings_prints_nothing():
    assert render(Report([], files_checked=3)) == ""


def test_step_summary_is_appended_with_every_finding(monkeypatch, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("## an earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    render(Report(FINDINGS, files_checked=4))

    assert summary.read_text(encoding="utf-8") == (
        "## an earlier step\n"
        "## jaxmigrate\n"
        "\n"
        "4 findings, 1 fixable\n"
        "\n"
        "| Location | Code | Message |\n"
        "| --- | --- | --- |\n"
        "| `broken.py:4:1` | JM000 | cannot parse: invalid syntax |\n"
        "| `src/modèle, v2:old.py:2:7` | JM201 | pjit is removed; 100% replaceable [*] |\n"
        "| `train.py:9:5` | JM401 | psum is redundant<br>GSPMD inserts it \\| see docs |\n"
        "| `nb.ipynb:cell 2:3:1` | JM101 | pmap |\n"
        "\n"
    )


def test_step_summary_of_a_clean_run(monkeypatch, tmp_path):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    render(Report([], files_checked=3))
    assert summary.read_text(encoding="utf-8") == "## jaxmigrate\n\nAll checks passed (3 files)\n\n"


@pytest.mark.parametrize("count, collapsed", [(20, False), (21, True)])
def test_a_long_table_is_collapsible(monkeypatch, tmp_path, count, collapsed):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    findings = [Finding("JM101", "pmap", "a.py", line, 1, line, 9) for line in range(1, count + 1)]

    render(Report(findings, files_checked=1))

    text = summary.read_text(encoding="utf-8")
    assert text.count("| JM101 | pmap |") == count
    assert (f"<details><summary>All {count} findings</summary>\n\n| Location" in text) is collapsed
    assert ("</details>" in text) is collapsed


def test_a_path_with_backticks_stays_one_code_span(monkeypatch, tmp_path):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    render(Report([Finding("JM101", "pmap", "we`ird.py", 1, 1, 1, 5)], files_checked=1))
    assert "| `` we`ird.py:1:1 `` | JM101 |" in summary.read_text(encoding="utf-8")


def test_an_unwritable_step_summary_is_reported_not_raised(monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "missing-dir" / "summary.md"))
    output = render(Report(FINDINGS[:1], files_checked=1))
    assert output.splitlines()[-1].startswith("::warning::cannot write the step summary: ")
