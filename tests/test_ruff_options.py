"""ruff's everyday options, same names and meaning: --statistics, --show-fixes, --output-file,
--show-settings, --show-files, and the config keys extend-select, fixable, unfixable,
extend-safe-fixes, extend-unsafe-fixes, respect-gitignore."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from jaxmigrate.cli import main


def jaxmigrate(*args: str):
    return CliRunner().invoke(main, [*args, "--no-cache"], catch_exceptions=False)


def codes(output: str) -> list[tuple[str, str, bool]]:
    """(path, code, whether a fix is offered) of each finding in JSON output."""
    return [(f["path"], f["code"], f["fix"] is not None) for f in json.loads(output)]


@pytest.fixture
def files(project, test_rules):
    (project / "a.py").write_text("import x\nx.legacy\nx.legacy\nrisky()\n")
    (project / "b.py").write_text("import x\nx.legacy\n")
    return project


def pyproject(project, body: str) -> None:
    (project / "pyproject.toml").write_text("[tool.jaxmigrate]\n" + body)


def test_statistics_count_the_findings_by_rule(files):
    result = jaxmigrate(".", "--statistics")
    assert (result.exit_code, result.stdout) == (1, "3\tJM901\t[*] test-legacy-attribute\n1\tJM902\t    test-risky-call\n")
    with_unsafe = jaxmigrate(".", "--statistics", "--unsafe-fixes", "--output-format", "json")
    assert json.loads(with_unsafe.stdout) == [
        {"code": "JM901", "name": "test-legacy-attribute", "count": 3, "fixable": 3},
        {"code": "JM902", "name": "test-risky-call", "count": 1, "fixable": 1},
    ]


def test_show_fixes_lists_what_fix_fixed_by_file_and_rule(files):
    result = jaxmigrate(".", "--fix", "--show-fixes")
    assert "Fixed 3 findings:\n- a.py:\n    2 \u00d7 JM901 (test-legacy-attribute)\n- b.py:\n" \
           "    1 \u00d7 JM901 (test-legacy-attribute)\n" in result.stdout
    assert result.stdout.rstrip().endswith("3 fixed, 1 left of 4 found (1 fixable with --unsafe-fixes)")
    assert "Fixed" not in jaxmigrate(".", "--fix").stdout  # only when asked


@pytest.mark.parametrize("args", [[], ["--diff"], ["--statistics"]])
def test_output_file_takes_what_stdout_would_have(files, args):
    expected = jaxmigrate(".", *args).stdout
    result = jaxmigrate(".", *args, "--output-file", "out/report.txt")  # its folder is made, as ruff does
    assert (result.exit_code, result.stdout) == (1, "")
    assert (files / "out" / "report.txt").read_text() == expected != ""


def test_show_settings_prints_the_resolved_settings_of_the_first_path(files):
    pyproject(files, 'extend-select = ["JM902"]\nselect = ["JM901"]\nunfixable = ["JM901"]\nline-length = 100\n')
    result = jaxmigrate("a.py", "--show-settings")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Resolved settings for: a.py", f"Settings path: {files / 'pyproject.toml'}"]
    for line in ['select = ["JM901", "JM902"]', 'unfixable = ["JM901"]', "line-length = 100",
                 'rules = ["JM901", "JM902"]', "respect-gitignore = true"]:
        assert line in lines


def test_show_files_lists_what_a_run_would_check(files):
    (files / ".gitignore").write_text("b.py\n")
    (files / "build").mkdir()
    (files / "build" / "c.py").write_text("x = 1\n")
    assert jaxmigrate(".", "--show-files").stdout == "a.py\n"
    assert jaxmigrate(".", "--show-files", "--no-respect-gitignore").stdout == "a.py\nb.py\n"


def test_extend_select_adds_to_select(files):
    pyproject(files, 'select = ["JM901"]\nextend-select = ["JM902"]\n')
    assert {c for _, c, _ in codes(jaxmigrate("a.py", "--output-format", "json").stdout)} == {"JM901", "JM902"}
    # --select replaces the file's selection, its extend-select too; --extend-select adds.
    assert {c for _, c, _ in codes(jaxmigrate("a.py", "--select", "JM902", "--output-format", "json").stdout)} == {"JM902"}
    both = jaxmigrate("a.py", "--select", "JM902", "--extend-select", "JM901", "--output-format", "json").stdout
    assert {c for _, c, _ in codes(both)} == {"JM901", "JM902"}


@pytest.mark.parametrize(
    "body, args",
    [
        pytest.param('unfixable = ["JM901"]\n', [], id="unfixable"),
        pytest.param('fixable = ["JM902"]\n', [], id="fixable names others only"),
        pytest.param("", ["--unfixable", "JM9"], id="--unfixable"),
    ],
)
def test_an_unfixable_rule_offers_no_fix_and_fix_leaves_it(files, body, args):
    pyproject(files, body)
    assert ("b.py", "JM901", False) in codes(jaxmigrate("b.py", *args, "--output-format", "json").stdout)
    jaxmigrate("b.py", *args, "--fix")
    assert (files / "b.py").read_text() == "import x\nx.legacy\n"


def test_extend_safe_fixes_makes_fix_apply_an_unsafe_fix(files):
    pyproject(files, 'extend-safe-fixes = ["JM902"]\n')
    listed = json.loads(jaxmigrate("a.py", "--output-format", "json").stdout)
    assert {f["code"]: f["fix"]["safety"] for f in listed} == {"JM901": "safe", "JM902": "safe"}
    jaxmigrate("a.py", "--fix")
    assert (files / "a.py").read_text() == "import x\nx.modern\nx.modern\ncareful()\n"


def test_extend_unsafe_fixes_keeps_fix_from_a_safe_fix_without_unsafe_fixes(files):
    pyproject(files, 'extend-unsafe-fixes = ["JM901"]\n')
    result = jaxmigrate("b.py", "--fix")
    assert (files / "b.py").read_text() == "import x\nx.legacy\n"
    assert "0 fixed, 1 left of 1 found (1 fixable with --unsafe-fixes)" in result.stdout
    jaxmigrate("b.py", "--fix", "--unsafe-fixes")
    assert (files / "b.py").read_text() == "import x\nx.modern\n"


def test_respect_gitignore_false_checks_ignored_files(files):
    (files / ".gitignore").write_text("b.py\n")
    assert {p for p, _, _ in codes(jaxmigrate(".", "--output-format", "json").stdout)} == {"a.py"}
    pyproject(files, "respect-gitignore = false\n")
    assert {p for p, _, _ in codes(jaxmigrate(".", "--output-format", "json").stdout)} == {"a.py", "b.py"}


@pytest.mark.parametrize(
    "body, named",
    [
        pytest.param('fixable = ["JM777"]\n', "JM777", id="unknown code in fixable"),
        pytest.param('extend-safe-fixes = "JM9x"\n', "JM9X", id="unknown prefix"),
        pytest.param("respect-gitignore = 1\n", "respect-gitignore must be true or false", id="not a boolean"),
    ],
)
def test_bad_values_of_the_new_keys_are_exit_2(files, body, named):
    pyproject(files, body)
    result = jaxmigrate("a.py")
    assert result.exit_code == 2 and named in result.stderr


def test_the_fix_summary_adds_up_with_a_baseline_too(files):
    (files / "b.py").write_text("import x\nrisky()\n")
    jaxmigrate("b.py", "--write-baseline", "base.json")
    (files / "b.py").write_text("import x\nrisky()\nx.legacy\n")
    result = jaxmigrate("b.py", "--fix", "--baseline", "base.json", "--output-format", "concise")
    assert result.stdout.splitlines()[-1] == "1 fixed, 0 left of 1 found"  # risky() is the baseline's
