"""`verify` where users are: the old side from a git revision (--old-ref), with the JAX it was
written for (--old-jax; the project's pin when it cannot be imported here), a hint when it fails
on a removed API, "did you mean" for a misspelt entry, whole paths when piped."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate.cli import main
from jaxmigrate.runtime_checks import old_side
from jaxmigrate.runtime_checks.harness import VerifyUsageError
from jaxmigrate.runtime_checks.report import Failure, SideReport, VerifyReport

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

OLD = """\
import jax
import jax.numpy as jnp
from jax.sharding import PositionalSharding


def step():
    PositionalSharding(jax.devices())
    return jnp.arange(8.0) * 2
"""
NEW = """\
import jax.numpy as jnp


def step():
    return jnp.arange(8.0) * 2
"""


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path) -> Path:
    """train.py committed as OLD, then edited to NEW (not committed)."""
    git(tmp_path, "init", "-q")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(OLD)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "old")
    (tmp_path / "pkg" / "train.py").write_text(NEW)
    return tmp_path


@needs_git
def test_from_git_writes_the_file_at_the_revision_under_its_own_name(repo, tmp_path_factory):
    folder = tmp_path_factory.mktemp("old")
    old = old_side.from_git("HEAD", repo / "pkg" / "train.py", folder)
    assert (old.name, old.read_text()) == ("train.py", OLD)
    with pytest.raises(VerifyUsageError, match="--old-ref nope: git cannot show train.py at nope"):
        old_side.from_git("nope", repo / "pkg" / "train.py", folder)


@pytest.mark.parametrize("version, requirement", [("0.4", "0.4.*"), ("0.4.30", "0.4.30")])
def test_old_jax_installs_the_newest_release_of_a_minor_version_or_the_one_named(version, requirement):
    assert old_side.requirement(version) == requirement


def test_old_jax_must_be_a_version():
    with pytest.raises(VerifyUsageError, match="--old-jax must look like 0.4"):
        old_side.requirement("latest")


def test_the_projects_pin_is_its_lowest_allowed_release(tmp_path):
    (tmp_path / "requirements.txt").write_text("jax[cpu]>=0.4.26,<0.5\n")
    assert old_side.project_jax(tmp_path / "train.py") == ("0.4.26", "requirements.txt: jax[cpu]>=0.4.26,<0.5")


@pytest.mark.parametrize(
    "message, hinted",
    [
        pytest.param("importing x raised ImportError: cannot import name 'PositionalSharding' from 'jax.sharding'",
                     True, id="a name gone from a module"),
        pytest.param("step() raised AttributeError: module 'jax' has no attribute 'tree_map'", True, id="an attribute"),
        pytest.param("step() raised ValueError: shapes differ", False, id="the program's own error"),
    ],
)
def test_a_failure_on_a_removed_api_hints_at_old_jax(message, hinted):
    hint = old_side.removed_api_hint(message, ("0.4.30", "requirements.txt: jax==0.4.30"), "0.10.2")
    assert bool(hint) == hinted
    if hinted:
        assert "JAX 0.10.2 removed" in hint and "`--old-jax 0.4.30` (requirements.txt: jax==0.4.30)" in hint


def test_piped_paths_are_never_cut(tmp_path):
    from jaxmigrate.runtime_checks.command import _console
    from jaxmigrate.runtime_checks.report import render

    program = "/very/long/" + "folder/" * 12 + "train.py"
    side = SideReport(label="old", program=program, python="/usr/bin/python3", jax_version="0.10.2",
                      failure=Failure("import-error", f"importing {program} failed"))
    report = VerifyReport(side, SideReport(label="new", program=program, python="/usr/bin/python3"), [], 8, {})
    out = tmp_path / "out.txt"
    with out.open("w") as stream:  # a file: not a terminal, as when piped
        console = _console(report)
        console.file = stream
        render(report, console)
    assert program in out.read_text() and "\u2026" not in out.read_text()


@pytest.mark.parametrize(
    "args, error",
    [
        pytest.param(["--old-ref", "HEAD", "a.py", "a.py"], "with --old-ref REV, give NEW only", id="two programs"),
        pytest.param(["a.py"], "give OLD and NEW", id="one program, no --old-ref"),
        pytest.param(["a.py", "a.py", "--old-jax", "0.4", "--old-python", "python3"], "not both", id="two old pythons"),
    ],
)
def test_verify_arguments(tmp_path, monkeypatch, args, error):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("def step():\n    return 1\n")
    result = CliRunner().invoke(main, ["verify", *args, "--entry", "step"])
    assert result.exit_code == 2 and error in result.output


@needs_git
@pytest.mark.runtime
@pytest.mark.slow
def test_old_ref_runs_the_committed_file_with_the_projects_jax(repo, legacy_python):
    """The committed train.py imports PositionalSharding, gone from this JAX: the old side is run
    again with the project's pin, jax 0.4.30 (the cached venv legacy_python made). A misspelt
    entry is answered with the entry meant."""
    (repo / "requirements.txt").write_text("jax==0.4.30\n")
    result = CliRunner().invoke(main, ["verify", "--old-ref", "HEAD", str(repo / "pkg" / "train.py"),
                                       "--entry", "step", "--entry", "stpe", "--json", "-"])
    assert "running it with JAX 0.4.30, the project's pin (requirements.txt: jax==0.4.30)" in result.stderr
    import json

    report = json.loads(result.stdout)
    assert (report["sides"]["old"]["jax_version"], report["sides"]["old"]["python"]) == ("0.4.30", legacy_python)
    entries = {entry["name"]: entry for entry in report["entries"]}
    assert entries["step"]["status"] == "equal"
    assert "did you mean 'step'?" in json.dumps(entries["stpe"])
