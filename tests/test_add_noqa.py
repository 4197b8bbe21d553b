"""--add-noqa, as ruff's: a `# noqa: CODE` on each line with findings, merged with the comment
there, never inside a string, written atomically, idempotent."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from jaxmigrate.add_noqa import with_noqa
from jaxmigrate.cli import main


def jaxmigrate(*args: str):
    return CliRunner().invoke(main, ["--no-cache", *args], catch_exceptions=False)


@pytest.mark.parametrize("line, codes, expected", [
    pytest.param("x = f()", {"JM601"}, "x = f()  # noqa: JM601", id="plain"),
    pytest.param("x = f()   ", {"JM601"}, "x = f()  # noqa: JM601", id="trailing-blanks"),
    pytest.param("x = f()", {"JM601", "JM101"}, "x = f()  # noqa: JM101, JM601", id="codes-sorted"),
    pytest.param("x = f()  # type: ignore", {"JM601"}, "x = f()  # type: ignore  # noqa: JM601",
                 id="after-another-comment"),
    pytest.param("x = f()  # noqa: E501", {"JM601"}, "x = f()  # noqa: E501, JM601", id="merged"),
    pytest.param("x = f()  # NOQA:E501,jm601 why", {"JM601"}, "x = f()  # noqa: E501, JM601 why",
                 id="merged-once-text-kept"),
    pytest.param("x = f()  # noqa", {"JM601"}, "x = f()  # noqa", id="blanket-left-alone"),
    pytest.param("x = '# noqa: E501'", {"JM601"}, "x = '# noqa: E501'  # noqa: JM601", id="noqa-in-a-string"),
])
def test_a_directive_is_added_or_merged(line, codes, expected):
    text, count = with_noqa(f"import jax\n{line}\n", {2: codes})
    assert text == f"import jax\n{expected}\n"
    assert count == (line != expected)


def test_a_line_ending_inside_a_multi_line_string_is_left_and_said():
    text = 'x = f(a="""one\ntwo""")\ny = f()\n'
    skipped = []
    new, count = with_noqa(text, {1: {"JM101"}, 3: {"JM601"}}, "m.py", skipped)
    assert new == 'x = f(a="""one\ntwo""")\ny = f()  # noqa: JM601\n'
    assert (count, skipped) == (1, ["m.py:1: JM101 (the line ends inside a multi-line string)"])


def test_a_backslash_continued_line_is_left_and_said():
    skipped = []
    new, count = with_noqa("x = f() + \\\n    g()\n", {1: {"JM601"}}, "m.py", skipped)
    assert (new, count) == ("x = f() + \\\n    g()\n", 0)
    assert skipped == ["m.py:1: JM601 (the line goes on with a backslash)"]


def test_add_noqa_suppresses_every_finding_keeps_line_endings_and_is_idempotent(project):
    source = ("import jax\r\nx = jax.tree_map(f, t)  # type: ignore\r\n"
              "y = jax.pmap(f, axis_name='i')  # noqa: E501\r\nz = jax.tree_map(f, t); w = jax.tree_map(g, t)\r\n")
    (project / "m.py").write_bytes(source.encode())
    assert jaxmigrate("m.py").exit_code == 1
    result = jaxmigrate("m.py", "--add-noqa")
    assert (result.exit_code, result.stderr) == (0, "Added 3 noqa directives.\n")
    assert (project / "m.py").read_bytes().decode() == (
        "import jax\r\nx = jax.tree_map(f, t)  # type: ignore  # noqa: JM601\r\n"
        "y = jax.pmap(f, axis_name='i')  # noqa: E501, JM101\r\n"
        "z = jax.tree_map(f, t); w = jax.tree_map(g, t)  # noqa: JM601\r\n"
    )
    after = jaxmigrate("m.py")
    assert after.exit_code == 0, after.stdout
    again = jaxmigrate("m.py", "--add-noqa")
    assert again.stderr == "Added 0 noqa directives.\n"
    assert (project / "m.py").read_bytes().decode().count("noqa") == 3


def test_add_noqa_leaves_notebooks_and_says_so(project):
    import json

    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["import jax\n", "x = jax.tree_map(f, t)\n"]}
    notebook = {"cells": [cell], "metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
                "nbformat_minor": 5}
    (project / "n.ipynb").write_text(json.dumps(notebook))
    before = (project / "n.ipynb").read_bytes()
    result = jaxmigrate("n.ipynb", "--add-noqa")
    assert result.exit_code == 0
    assert "n.ipynb:cell 1:2:5: JM601 (notebooks are not edited)" in result.stderr
    assert (project / "n.ipynb").read_bytes() == before


def test_add_noqa_cannot_be_combined_with_fix(project):
    (project / "m.py").write_text("import jax\nx = jax.tree_map(f, t)\n")
    result = jaxmigrate("m.py", "--add-noqa", "--fix")
    assert result.exit_code == 2 and "--add-noqa cannot be used with --fix" in result.stderr


@pytest.mark.parametrize("option", [["--add-noqa"], ["--write-baseline", "base.json"]])
def test_recording_findings_needs_files_not_stdin(project, option):
    result = CliRunner().invoke(main, ["check", "--stdin-filename", "m.py", *option], input="import jax\n",
                                catch_exceptions=False)
    assert result.exit_code == 2 and "it cannot read from stdin" in result.stderr
    assert not (project / "base.json").exists()
