"""--baseline / --write-baseline: entries keyed by rule, file and the flagged code (not the line),
counted, surviving unrelated edits, stale ones reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate.cli import main

LEGACY = "import jax\n\na = jax.tree_map(f, t)\nb = jax.tree_map(f, t)\nc = jax.tree_map(g, t)\n"


def jaxmigrate(*args: str, input: str | None = None):
    return CliRunner().invoke(main, ["--no-cache", *args] if args[0] != "check" else list(args),
                              input=input, catch_exceptions=False)


def reported(result) -> list[tuple[str, int]]:
    return [(item["code"], item["line"]) for item in json.loads(result.stdout)]


@pytest.fixture
def legacy(project) -> Path:
    (project / "src").mkdir()
    (project / "src" / "m.py").write_text(LEGACY)
    return project


def test_a_written_baseline_holds_every_finding_with_counts(legacy):
    (legacy / "src" / "m.py").write_text(LEGACY + "    # the same code twice: one entry, counted twice\nc = jax.tree_map(g, t)\n")
    result = jaxmigrate("src", "--write-baseline", "base.json")
    assert result.exit_code == 0
    assert "Wrote a baseline of 4 findings (3 entries) to base.json." in result.stderr
    data = json.loads((legacy / "base.json").read_text())
    assert data["version"] == 1
    assert data["entries"] == [
        {"code": "JM601", "path": "src/m.py", "source": "a = jax.tree_map(f, t)", "count": 1},
        {"code": "JM601", "path": "src/m.py", "source": "b = jax.tree_map(f, t)", "count": 1},
        {"code": "JM601", "path": "src/m.py", "source": "c = jax.tree_map(g, t)", "count": 2},
    ]


def test_the_baseline_hides_known_findings_and_survives_moved_lines(legacy):
    jaxmigrate("src", "--write-baseline", "base.json")
    assert jaxmigrate("src", "--baseline", "base.json").exit_code == 0
    # Lines inserted above, the code re-indented into a block: still the same findings.
    moved = "import jax\nimport os\n\n\nif True:\n    a = jax.tree_map(f, t)\n    b = jax.tree_map(f, t)\n" \
            "c = jax.tree_map(g, t)\n"
    (legacy / "src" / "m.py").write_text(moved)
    result = jaxmigrate("src", "--baseline", "base.json", "--output-format", "json")
    assert (result.exit_code, reported(result), result.stderr) == (0, [], "")


def test_a_new_finding_is_reported_even_on_a_line_like_a_baselined_one(legacy):
    """Entries are counted: a second copy of a baselined line is a new finding."""
    jaxmigrate("src", "--write-baseline", "base.json")
    (legacy / "src" / "m.py").write_text(LEGACY + "a = jax.tree_map(f, t)\nd = jax.tree_map(h, t)\n")
    result = jaxmigrate("src", "--baseline", "base.json", "--output-format", "json")
    assert result.exit_code == 1
    assert reported(result) == [("JM601", 6), ("JM601", 7)]


def test_stale_entries_are_reported_and_dropped_by_the_next_write(legacy):
    jaxmigrate("src", "--write-baseline", "base.json")
    (legacy / "src" / "m.py").write_text(LEGACY.replace("c = jax.tree_map(g, t)", "c = jax.tree.map(g, t)"))
    result = jaxmigrate("src", "--baseline", "base.json")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        "jaxmigrate: 1 baseline entry in base.json matched no finding (fixed, or the code changed);"
        " run with --write-baseline base.json to drop it",
        "  JM601 src/m.py: c = jax.tree_map(g, t)",
    ]
    jaxmigrate("src", "--write-baseline", "base.json")
    assert "c = jax.tree_map" not in (legacy / "base.json").read_text()
    assert jaxmigrate("src", "--baseline", "base.json").stderr == ""


def test_paths_are_relative_to_the_baseline_so_any_working_folder_works(legacy, monkeypatch):
    jaxmigrate("src", "--write-baseline", "ci/base.json")
    assert '"path": "../src/m.py"' in (legacy / "ci" / "base.json").read_text()
    monkeypatch.chdir(legacy / "src")
    result = jaxmigrate(".", "--baseline", "../ci/base.json", "--output-format", "json")
    assert (result.exit_code, reported(result)) == (0, [])


def test_the_baseline_applies_to_stdin(legacy):
    jaxmigrate("src", "--write-baseline", "base.json")
    result = jaxmigrate("check", "--stdin-filename", "src/m.py", "--baseline", "base.json", "--output-format",
                        "json", input=LEGACY + "e = jax.tree_map(f, u)\n")
    assert reported(result) == [("JM601", 6)]


@pytest.mark.parametrize("content, message", [
    pytest.param("[]", "is not a jaxmigrate baseline", id="not-an-object"),
    pytest.param('{"version": 1, "entries": [{"code": "JM601"}]}', "an entry needs", id="missing-fields"),
    pytest.param('{"version": 1, "entries": [{"code": "JM601", "path": "a", "source": "", "count": 0}]}',
                 "not a valid entry", id="zero-count"),
    pytest.param("{", "is not JSON", id="not-json"),
])
def test_a_broken_baseline_is_a_usage_error(legacy, content, message):
    (legacy / "base.json").write_text(content)
    result = jaxmigrate("src", "--baseline", "base.json")
    assert result.exit_code == 2
    assert message in result.stderr


def test_write_baseline_cannot_be_combined_with_fix(legacy):
    result = jaxmigrate("src", "--fix", "--write-baseline", "base.json")
    assert result.exit_code == 2 and "cannot be used with --fix" in result.stderr


def test_a_line_changed_by_fixing_another_finding_on_it_keeps_its_entry(legacy):
    """`--fix` of JM601 rewrites a line JM505 also flags: JM505 is the same finding, not new + stale."""
    (legacy / "src" / "m.py").write_text("import jax\n\nout = jax.pmap(f)(x)\nfirst = jax.tree_map(lambda a: a[0], out)\n")
    jaxmigrate("src", "--write-baseline", "base.json")
    assert jaxmigrate("src", "--fix", "--baseline", "base.json").exit_code == 0
    assert "jax.tree.map(lambda a: a[0], out)" in (legacy / "src" / "m.py").read_text()
    result = jaxmigrate("src", "--baseline", "base.json", "--output-format", "json")
    assert (result.exit_code, reported(result)) == (0, [])
    assert result.stderr.splitlines()[:2] == [
        "jaxmigrate: 1 baseline entry in base.json matched no finding (fixed, or the code changed);"
        " run with --write-baseline base.json to drop it",
        "  JM601 src/m.py: first = jax.tree_map(lambda a: a[0], out)",
    ]
    # One more finding of the rule in the file than the baseline holds: reported.
    (legacy / "src" / "m.py").write_text((legacy / "src" / "m.py").read_text() + "again = jax.tree.map(lambda a: a[0], out)\n")
    assert [code for code, _ in reported(jaxmigrate("src", "--baseline", "base.json", "--output-format", "json"))] == ["JM505"]


def test_new_code_in_a_file_where_a_finding_was_fixed_is_still_new(legacy):
    jaxmigrate("src", "--write-baseline", "base.json")
    fixed_one_added_one = LEGACY.replace("a = jax.tree_map(f, t)", "a = jax.tree.map(f, t)") \
        + "print(jax.tree_map(jnp.shape, params))\n"
    (legacy / "src" / "m.py").write_text(fixed_one_added_one)
    result = jaxmigrate("src", "--baseline", "base.json", "--output-format", "json")
    assert reported(result) == [("JM601", 6)]
    assert "  JM601 src/m.py: a = jax.tree_map(f, t)" in result.stderr


def test_quiet_prints_the_findings_only(legacy):
    assert jaxmigrate("src", "-q", "--write-baseline", "base.json").stderr == ""
    (legacy / "src" / "m.py").write_text(LEGACY.replace("c = jax.tree_map(g, t)", "c = jax.tree.map(g, t)"))
    result = jaxmigrate("src", "-q", "--baseline", "base.json")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
