"""The shipped pre-commit hooks: a valid manifest, and a real `pre-commit try-repo` run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pre_commit.clientlib import load_manifest

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / ".pre-commit-hooks.yaml"
README = REPO / "README.md"
pytestmark = pytest.mark.xdist_group("pre_commit_home")  # (its hook environments are installed once)
# What pip prints when it cannot reach the package index (pre-commit installs this repo's deps).
NO_NETWORK = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "No matching distribution found",
    "Could not find a version that satisfies",
    "ProxyError",
)


def hooks() -> dict[str, dict]:
    return {hook["id"]: hook for hook in load_manifest(str(MANIFEST))}


def test_the_manifest_is_valid_and_ships_a_check_and_a_fix_hook():
    assert set(hooks()) == {"jaxmigrate", "jaxmigrate-fix"}


@pytest.mark.parametrize(
    "hook_id, entry",
    [
        pytest.param("jaxmigrate", "jaxmigrate check --force-exclude", id="check never writes"),
        pytest.param(
            "jaxmigrate-fix", "jaxmigrate check --fix --exit-non-zero-on-fix --force-exclude",
            id="fix fails the commit when it changed a file",
        ),
    ],
)
def test_hook_entries(hook_id, entry):
    hook = hooks()[hook_id]
    assert hook["entry"] == entry
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "pyi", "jupyter"]
    assert hook["require_serial"] is True  # the engine's own process pool does the parallel work


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, check=True, capture_output=True,
    )


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    """This working tree (tracked and untracked, minus ignored files) as a one-commit repo:
    `try-repo` on the checkout itself would miss files not yet committed."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    target = tmp_path_factory.mktemp("jaxmigrate-snapshot")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git("init", "-q", cwd=target)
    git("add", "-A", cwd=target)
    git("commit", "-q", "-m", "snapshot", cwd=target)
    return target


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


class NoNetwork(Exception):
    """pre-commit could not install a hook's environment: the package index is out of reach."""


def pre_commit(args: list[str], project: Path, home: Path, path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    if path is not None:
        env["PATH"] = path
    result = subprocess.run(["pre-commit", *args], cwd=project, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    if "An unexpected error has occurred" in output and any(s in output for s in NO_NETWORK):
        raise NoNetwork(output[-2000:])
    return result


def local_config(hook_id: str) -> str:
    """The shipped hook as a `repo: local` hook of `language: system`: its own entry, file types
    and serial run from the manifest, on this checkout's jaxmigrate. It needs no environment
    installed, so it runs offline, where pre-commit cannot install the python hook's."""
    hook = hooks()[hook_id]
    return textwrap.dedent(f"""\
        repos:
          - repo: local
            hooks:
              - id: {hook_id}
                name: {hook["name"]}
                entry: {hook["entry"]}
                language: system
                types_or: [{", ".join(hook["types_or"])}]
                require_serial: {str(hook["require_serial"]).lower()}
        """)


def run_local(hook_id: str, project: Path, home: Path) -> subprocess.CompletedProcess:
    """``local_config``'s hook run by `pre-commit run`, with `jaxmigrate` on PATH running this
    checkout (not whatever console script is installed)."""
    bin_dir = home / "local-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "jaxmigrate"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m jaxmigrate \"$@\"\n")
    script.chmod(0o755)
    config = project / ".pre-commit-config.yaml"
    config.write_text(local_config(hook_id))
    git("add", config.name, cwd=project)
    return pre_commit(["run", "--all-files"], project, home, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def try_repo(snapshot: Path, home: Path, hook: str, project: Path) -> subprocess.CompletedProcess:
    """`pre-commit try-repo`, exactly as a user tries the hooks out. It installs the hook's
    environment afresh every time (a store of its own, whatever PRE_COMMIT_HOME says). Without
    the package index, the same hook runs as a local system hook instead (``run_local``)."""
    try:
        return pre_commit(["try-repo", str(snapshot), hook, "--all-files"], project, home)
    except NoNetwork:
        return run_local(hook, project, home)


def readme_snippets() -> list[str]:
    """The `.pre-commit-config.yaml` examples of the README's pre-commit section, as written."""
    section = re.search(r"^### pre-commit\n(.*?)^## ", README.read_text(), re.MULTILINE | re.DOTALL).group(1)
    return re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)


def run_configured(snapshot: Path, home: Path, hook: str, project: Path) -> subprocess.CompletedProcess:
    """`pre-commit run` with the README's config for this repository's hooks, its placeholders
    filled in as it says (a clone's path, one of its commits), as a user's repository runs it:
    the environment is installed once in ``home`` and reused by every later run."""
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=snapshot, check=True, capture_output=True,
                         text=True).stdout.strip()
    template = readme_snippets()[1]
    assert "/absolute/path/to/jaxmigrate" in template and "<commit>" in template, template
    text = template.replace("/absolute/path/to/jaxmigrate", str(snapshot)).replace("<commit>", rev)
    if hook == "jaxmigrate-fix":  # the README offers it commented out, instead of the check hook
        text = text.replace("- id: jaxmigrate ", "# - id: jaxmigrate ").replace("# - id: jaxmigrate-fix", "- id: jaxmigrate-fix")
    assert f"- id: {hook} " in text and text.count("  - id:") == 1, text
    try:
        return run_config(text, project, home)
    except NoNetwork:
        return run_local(hook, project, home)


def run_config(text: str, project: Path, home: Path) -> subprocess.CompletedProcess:
    config = project / ".pre-commit-config.yaml"
    config.write_text(text)
    git("add", config.name, cwd=project)  # pre-commit refuses an unstaged config
    return pre_commit(["run", "--all-files"], project, home)


def user_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    git("init", "-q", cwd=path)
    for name, text in files.items():
        (path / name).write_text(textwrap.dedent(text))
    git("add", "-A", cwd=path)
    return path


CLEAN = "import jax\nf = jax.jit(lambda x: x)\n"
NOTEBOOK = json.dumps({
    "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
               "source": ["import jax\n", "y = jax.tree_map(abs, [1])\n"]}],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
})


@pytest.mark.slow
def test_the_check_hook_fails_on_a_planted_finding_and_passes_clean_files(snapshot, pre_commit_home, tmp_path):
    dirty = user_repo(tmp_path / "dirty", {"clean.py": CLEAN, "legacy.py": "import jax\ng = jax.pmap(f)\n",
                                            "explore.ipynb": NOTEBOOK})
    result = try_repo(snapshot, pre_commit_home, "jaxmigrate", dirty)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "JM101" in result.stdout and "legacy.py" in result.stdout
    assert "explore.ipynb:cell 1:2:5 JM601" in result.stdout  # `types_or: jupyter` reaches notebooks
    assert (dirty / "legacy.py").read_text() == "import jax\ng = jax.pmap(f)\n"

    clean = user_repo(tmp_path / "clean", {"clean.py": CLEAN})
    result = run_configured(snapshot, pre_commit_home, "jaxmigrate", clean)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_fix_hook_fixes_and_fails_then_passes(snapshot, pre_commit_home, tmp_path):
    legacy = "import jax\nmesh = jax.make_mesh((8,), ('data',))\n"
    # Pinned to jax 0.4: `make_mesh` built Auto axes then, so spelling them out is a safe fix.
    project = user_repo(tmp_path / "project", {"mesh.py": legacy, "clean.py": CLEAN,
                                                "requirements.txt": "jax==0.4.35\n"})
    first = run_configured(snapshot, pre_commit_home, "jaxmigrate-fix", project)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "axis_types=" in (project / "mesh.py").read_text()
    git("add", "-A", cwd=project)
    second = run_configured(snapshot, pre_commit_home, "jaxmigrate-fix", project)
    assert second.returncode == 0, second.stdout + second.stderr


@pytest.mark.slow
def test_the_fix_hook_keeps_failing_while_findings_without_a_safe_fix_remain(snapshot, pre_commit_home, tmp_path):
    # JM104 has no fix: nothing changes, and the hook fails on every run until it is dealt with.
    legacy = "from flax import jax_utils\nbatches = jax_utils.prefetch_to_device(it, 2)\n"
    project = user_repo(tmp_path / "project", {"input.py": legacy})
    for _ in range(2):
        result = run_configured(snapshot, pre_commit_home, "jaxmigrate-fix", project)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "JM104" in result.stdout
        assert (project / "input.py").read_text() == legacy


def test_the_readme_local_hook_works_as_written(tmp_path):
    """The first README snippet runs the installed jaxmigrate: no placeholder to fill in."""
    assert shutil.which("jaxmigrate"), "the jaxmigrate console script is not installed (pip install -e .)"
    snippet = readme_snippets()[0]
    assert "<" not in snippet, snippet
    home = tmp_path / "home"
    dirty = user_repo(tmp_path / "dirty", {"clean.py": CLEAN, "legacy.py": "import jax\ng = jax.pmap(f)\n"})
    result = run_config(snippet, dirty, home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "JM101" in result.stdout and "legacy.py" in result.stdout
    clean = user_repo(tmp_path / "clean", {"clean.py": CLEAN})
    result = run_config(snippet, clean, home)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_the_hooks_run_without_the_package_index(tmp_path, monkeypatch):
    """What every hook test falls back to offline: with the index made unreachable (pip's
    no-index), `try-repo` fails for want of it, and the manifest's hooks as local system hooks
    report, fix and pass."""
    home = tmp_path / "home"
    legacy = "import jax\nmesh = jax.make_mesh((8,), ('data',))\n"
    project = user_repo(tmp_path / "project", {"mesh.py": legacy, "clean.py": CLEAN, "requirements.txt": "jax==0.4.35\n"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    with pytest.raises(NoNetwork):
        pre_commit(["try-repo", str(REPO), "jaxmigrate", "--all-files"], project, home)
    check = run_local("jaxmigrate", project, home)
    assert check.returncode == 1 and "mesh.py" in check.stdout, check.stdout
    assert (project / "mesh.py").read_text() == legacy
    first = run_local("jaxmigrate-fix", project, home)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "axis_types=" in (project / "mesh.py").read_text()
    git("add", "-A", cwd=project)
    assert run_local("jaxmigrate-fix", project, home).returncode == 0
