"""``--diff`` output is a patch ``git apply`` takes: a file (or notebook) without a final newline
gets git's ``\\ No newline at end of file`` marker, and does not corrupt the files after it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from jaxmigrate.cli import main
from jaxmigrate.engine import _unified_diff

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def diff_of(*paths: str) -> str:
    result = CliRunner().invoke(main, ["--diff", "--no-cache", *paths], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    return result.stdout


def git_apply(project, patch: str, *args: str) -> subprocess.CompletedProcess:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return subprocess.run(["git", "apply", *args, "-"], input=patch, text=True, cwd=project, capture_output=True)


@pytest.mark.parametrize(
    "before, after, expected",
    [
        pytest.param("a\nb", "a\nc", "-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n",
                     id="neither side ends with a newline"),
        pytest.param("a\nb", "a\nb\n", "-b\n\\ No newline at end of file\n+b\n", id="a newline added"),
        pytest.param("a\nb\n", "a\nb", "-b\n+b\n\\ No newline at end of file\n", id="a newline removed"),
    ],
)
def test_a_side_without_a_final_newline_is_marked(before, after, expected):
    assert _unified_diff(before, after, "f.py").endswith(expected)


def test_the_diff_of_files_without_a_final_newline_applies_with_git(project, test_rules):
    (project / "a.py").write_text("import x\nx.legacy")
    (project / "b.py").write_text("import x\nx.legacy\n")
    patch = diff_of(".")
    assert git_apply(project, patch, "--check").returncode == 0, patch
    assert git_apply(project, patch).returncode == 0
    assert (project / "a.py").read_text() == "import x\nx.modern"
    assert (project / "b.py").read_text() == "import x\nx.modern\n"


def test_a_notebook_without_a_final_newline_does_not_corrupt_the_diff(project, test_rules):
    document = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": ["import x\n", "x.legacy"]}],
                "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (project / "a.ipynb").write_text(json.dumps(document, indent=1))  # as nbformat writes it: no final newline
    (project / "b.py").write_text("import x\nx.legacy\n")
    patch = diff_of(".")
    assert git_apply(project, patch, "--check").returncode == 0, patch
    git_apply(project, patch)
    assert json.loads((project / "a.ipynb").read_text())["cells"][0]["source"][-1] == "x.modern"
    assert (project / "b.py").read_text() == "import x\nx.modern\n"
