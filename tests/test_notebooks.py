"""Jupyter notebooks end to end: found in directories, their code cells checked (magics masked),
findings counted within cells, fixes written back into the cells they change and nowhere else."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate import engine
from jaxmigrate.cli import main
from jaxmigrate.config import load_settings
from jaxmigrate.engine import Job, Mode
from jaxmigrate.lint.rule import Finding, Safety
from jaxmigrate.notebooks import Notebook, NotebookError

CHECK = Job(Mode.CHECK, False, (0, 10))
FIX = Job(Mode.FIX, False, (0, 10))
DIFF = Job(Mode.DIFF, False, (0, 10))


def notebook(*cells: str | list[str], kind: str = "code") -> bytes:
    document = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# x.legacy in prose is no code\n"]},
            *({"cell_type": kind, "execution_count": None, "metadata": {}, "outputs": [], "source": source}
              for source in cells),
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()


def run(paths, job=CHECK) -> engine.RunResult:
    settings = load_settings(None, Path.cwd())
    return engine.run_paths([Path(p) for p in paths], settings, job, use_cache=False, jobs=1)


def cells_of(path: Path) -> list:
    return [cell["source"] for cell in json.loads(path.read_text())["cells"]]


@pytest.fixture
def nb(project, test_rules) -> Path:
    path = project / "train.ipynb"
    path.write_bytes(notebook(["%matplotlib inline\n", "import x\n"], ["!pip install x\n", "y = 1\n", "x.legacy"],
                              "z = 'café'"))
    return path


def test_notebooks_are_found_and_findings_count_lines_within_their_cell(nb):
    (finding,) = run(["."]).findings
    assert (finding.path, finding.code, finding.cell, finding.line, finding.column) == ("train.ipynb", "JM901", 3, 3, 1)


def test_fix_rewrites_only_the_changed_cell_and_a_second_pass_changes_nothing(nb):
    before = cells_of(nb)
    result = run(["."], FIX)
    assert (result.fixed, result.changed_files, result.findings) == (1, 1, [])
    after = cells_of(nb)
    assert after[2] == ["!pip install x\n", "y = 1\n", "x.modern"]  # the magic line restored as it was
    assert [after[i] for i in (0, 1, 3)] == [before[i] for i in (0, 1, 3)]
    os.utime(nb, (1_000_000, 1_000_000))
    again = run(["."], FIX)
    assert (again.fixed, again.changed_files) == (0, 0) and nb.stat().st_mtime == 1_000_000


def test_diff_shows_the_notebook_change_and_writes_nothing(nb):
    raw = nb.read_bytes()
    result = run(["train.ipynb"], DIFF)
    assert result.diff.startswith("--- a/train.ipynb\n+++ b/train.ipynb\n")
    assert '-    "x.legacy"\n' in result.diff and '+    "x.modern"\n' in result.diff
    assert nb.read_bytes() == raw


def test_a_notebook_that_is_not_json_is_JM000_and_the_run_goes_on(nb):
    (nb.parent / "broken.ipynb").write_text("{not json")
    result = run(["."])
    assert [(f.path, f.code) for f in result.findings] == [("broken.ipynb", "JM000"), ("train.ipynb", "JM901")]
    assert "as a Jupyter notebook" in result.findings[0].message


def test_stdin_notebook_fix_prints_the_fixed_notebook(nb):
    result = CliRunner().invoke(main, ["--fix", "--stdin-filename", "nb.ipynb"], input=nb.read_bytes())
    assert result.exit_code == 0
    assert json.loads(result.stdout_bytes)["cells"][2]["source"][-1] == "x.modern"


def test_a_fix_above_a_cell_magic_is_refused():
    parsed = Notebook.parse(notebook(["%%capture\n", "!pip install x"], "import x\n"))
    with pytest.raises(NotebookError, match="cell magic"):
        parsed.with_text("import functools\n" + parsed.text)
    # Below the magic's cell, the same insertion is fine.
    cells = json.loads(parsed.with_text(parsed.text.replace("import x", "import functools\nimport x")))["cells"]
    assert cells[1]["source"] == ["%%capture\n", "!pip install x"]


@pytest.mark.parametrize(
    "document, problem",
    [
        pytest.param({"cells": 5}, "'cells' is not a list", id="cells not a list"),
        pytest.param([1, 2], "not a JSON object", id="top level not an object"),
        pytest.param({"cells": [5]}, "cell 1 is not an object", id="a cell not an object"),
        pytest.param({"cells": [], "metadata": "python"}, "'metadata' is not an object", id="string metadata"),
        pytest.param({"cells": [], "metadata": {"language_info": "py"}}, "'metadata.language_info' is not an object",
                     id="string language_info"),
        pytest.param({"cells": [{"cell_type": "code", "source": 5}]}, "cell 1's source", id="number source"),
        pytest.param({"cells": [{"cell_type": "code", "source": ["x.legacy\n", None]}]}, "cell 1's source",
                     id="non-string line in source"),
    ],
)
def test_a_notebook_of_the_wrong_shape_is_JM000_and_the_run_goes_on(nb, document, problem):
    bad = nb.parent / "bad.ipynb"
    bad.write_text(json.dumps(document))
    for job in (CHECK, FIX):
        result = run(["."], job)
        [finding] = [f for f in result.findings if f.path == "bad.ipynb"]
        assert finding.code == "JM000" and "as a Jupyter notebook" in finding.message and problem in finding.message
        assert bad.read_text() == json.dumps(document)
    assert cells_of(nb)[2][-1] == "x.modern"  # the good notebook was fixed


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("files = !ls", id="shell assignment"),
        pytest.param("files =!ls", id="shell assignment, no space"),
        pytest.param("a, b = %timeit -o f()", id="line magic assignment"),
        pytest.param("    out = !nvidia-smi", id="indented"),
    ],
)
def test_an_ipython_assignment_is_masked_like_the_other_magics(nb, line):
    nb.write_bytes(notebook(["if True:\n", "    pass\n", line + "\n", "x.legacy"]))
    result = run(["."], FIX)
    assert (result.fixed, result.findings) == (1, [])
    assert cells_of(nb)[1] == ["if True:\n", "    pass\n", line + "\n", "x.modern"]


def test_a_comparison_is_not_mistaken_for_a_magic():
    assert "x != 1" in Notebook.parse(notebook("y = x != 1\nz = x == !1")).text.split("\n")[0]


def test_findings_left_after_fix_are_reported_in_their_cell_and_line(nb, test_rules, monkeypatch):
    """A fix that adds lines to an earlier cell must not move the findings of later cells."""
    def visit(self, node, ctx):
        if node.attr == "legacy":
            ctx.report(node, "legacy", ctx.fix(Safety.SAFE, "longer", ctx.replace(node, "(\n    x.modern\n)")))

    [legacy_attribute] = [rule for rule in test_rules if rule.code == "JM901"]
    monkeypatch.setattr(legacy_attribute, "visit_Attribute", visit)
    nb.write_bytes(notebook("x.legacy\nx.legacy\n", "y = 1\nrisky()\n"))
    for job in (FIX, DIFF):
        nb.write_bytes(notebook("x.legacy\nx.legacy\n", "y = 1\nrisky()\n"))
        [finding] = run(["."], job).findings
        assert (finding.code, finding.cell, finding.line, finding.column) == ("JM902", 3, 2, 1)


def document(*sources) -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
                      for source in sources],
            "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize(
    "dump",
    [
        pytest.param(lambda d: json.dumps(d), id="compact, one line, no final newline"),
        pytest.param(lambda d: json.dumps(d, separators=(",", ":")), id="compact without spaces"),
        pytest.param(lambda d: json.dumps(d, indent=1, ensure_ascii=False) + "\n", id="nbformat's own"),
        pytest.param(lambda d: json.dumps(d, indent=2, ensure_ascii=True), id="indent 2, ASCII escapes"),
    ],
)
def test_a_fix_writes_only_the_changed_cells_source_in_the_notebooks_own_format(project, test_rules, dump):
    before = document(["import x\n", "x.legacy\n", "z = 'café'"], "y = 1", "x.legacy")
    after = document(["import x\n", "x.modern\n", "z = 'café'"], "y = 1", "x.modern")
    path = project / "nb.ipynb"
    path.write_text(dump(before), encoding="utf-8")
    result = run(["nb.ipynb"], FIX)
    assert result.changed_files == 1 and result.findings == []
    assert path.read_text(encoding="utf-8") == dump(after)


def test_an_unusual_layout_is_kept_outside_the_changed_source():
    from jaxmigrate.notebook_json import replace_sources

    text = '{"cells": [ {"source" :\n  [ "a\\n" ,\n    "b"\n  ], "x": 1}, {"source": "keep"}], "metadata": {}}'
    new = replace_sources(text, {0: ["a\n", "c"]})
    assert new == '{"cells": [ {"source" :\n  ["a\\n", "c"], "x": 1}, {"source": "keep"}], "metadata": {}}'
    assert json.loads(new)["cells"][0]["source"] == ["a\n", "c"]


def test_lines_a_message_names_are_lines_of_their_cell(project):
    """JM101 names the line that blocks the global view; in a notebook that is a line of a cell."""
    cells = [
        ["import functools\n", "import jax\n", "import numpy as np\n"],
        ["@functools.partial(jax.pmap, axis_name='batch')\n", "def train_step(state, batch):\n",
         "    return state + jax.lax.pmean(batch, 'batch')\n"],
        ["batch = np.ones((jax.local_device_count(), 4, 3))\n", "state = 0\n", "state = train_step(state, batch)\n"],
    ]
    (project / "t.ipynb").write_text(json.dumps(document(*cells), indent=1))
    (finding,) = run(["t.ipynb"]).findings
    assert (finding.code, finding.cell, finding.line) == ("JM101", 2, 1)
    assert "not possible: cell 3, line 3: argument 1 of `train_step`" in finding.message


@pytest.mark.parametrize(
    "message, shown",
    [
        pytest.param("blocked (line 5)", "blocked (line 2)", id="a line of the finding's own cell"),
        pytest.param("Line 2: no", "cell 1, line 2: no", id="a line of another cell"),
        pytest.param("`f(line 2)` stays", "`f(line 2)` stays", id="quoted code is left alone"),
    ],
)
def test_locate_maps_the_lines_a_message_names(message, shown):
    parsed = Notebook.parse(json.dumps(document("a = 1\nb = 2", "c = 3\nd = 4")).encode())
    located = parsed.locate(Finding("JM901", message, "nb.ipynb", 4, 1, 4, 2))
    assert (located.cell, located.line, located.message) == (2, 1, shown)
