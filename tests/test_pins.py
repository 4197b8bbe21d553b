"""The JAX a project's code was written for, read from its own requirements (the default of
``from-jax``): the lowest version they allow."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jaxmigrate.config import load_settings
from jaxmigrate.pins import ANY_BEFORE, lowest_allowed, project_pin


@pytest.mark.parametrize(
    "requirement, expected",
    [
        pytest.param("jax==0.4.30", (0, 4), id="exact pin"),
        pytest.param("jax>=0.4,<0.5", (0, 4), id="range: its lower bound"),
        pytest.param("jax[cpu]~=0.4.30", (0, 4), id="extras and compatible release"),
        pytest.param("JAX >= 0.9.1 ; python_version >= '3.10'", (0, 9), id="name case, spaces, marker"),
        pytest.param("jax (>=0.4.20, !=0.4.21)", (0, 4), id="parenthesised, an exclusion"),
        pytest.param("jax>=0.3,>=0.4.1", (0, 4), id="every bound holds: the highest lower bound"),
        pytest.param("jax==0.4.*", (0, 4), id="wildcard"),
        pytest.param("jax>0.8", (0, 8), id="strictly greater: the minor still allowed"),
        pytest.param("jax<0.5", ANY_BEFORE, id="capped only: some version before the cap"),
        pytest.param("jax", None, id="no bound"),
        pytest.param("jax!=0.4.1", None, id="only an exclusion"),
        pytest.param("jax @ https://example.com/jax.tar.gz", None, id="a URL"),
        pytest.param("jaxlib==0.4.30", None, id="jaxlib is not jax"),
        pytest.param("jax-md==0.2", None, id="nor is jax-md"),
        pytest.param("flax>=0.8", None, id="another package"),
    ],
)
def test_lowest_allowed(requirement, expected):
    assert lowest_allowed(requirement) == expected


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(textwrap.dedent(text))


@pytest.mark.parametrize(
    "files, version, source",
    [
        pytest.param({"requirements.txt": "numpy\njax[cpu]==0.4.30  # pinned\n"}, (0, 4),
                     "requirements.txt: jax[cpu]==0.4.30", id="requirements.txt"),
        pytest.param({"requirements-tpu.txt": "-r requirements.txt\njax>=0.4.20,<0.5\n"}, (0, 4),
                     "requirements-tpu.txt: jax>=0.4.20,<0.5", id="requirements-*.txt"),
        pytest.param({"pyproject.toml": '[project]\nname = "p"\ndependencies = ["jax>=0.9"]\n'}, (0, 9),
                     "pyproject.toml: jax>=0.9", id="pyproject dependencies"),
        pytest.param({"pyproject.toml": '[project]\nname = "p"\n[project.optional-dependencies]\n'
                                        'tpu = ["jax[tpu]~=0.6.0"]\n'}, (0, 6),
                     "pyproject.toml: jax[tpu]~=0.6.0", id="pyproject optional dependencies"),
        pytest.param({"setup.cfg": "[options]\ninstall_requires =\n    numpy\n    jax>=0.4.1\n"}, (0, 4),
                     "setup.cfg: jax>=0.4.1", id="setup.cfg"),
        pytest.param({"setup.py": 'from setuptools import setup\nsetup(install_requires=["jax>=0.2.0"])\n'},
                     (0, 2), "setup.py: jax>=0.2.0", id="setup.py"),
        pytest.param({"requirements.txt": "jax==0.4.30\n",
                      "pyproject.toml": '[project]\nname = "p"\ndependencies = ["jax>=0.9"]\n'},
                     (0, 4), "requirements.txt: jax==0.4.30", id="several: the lowest, the code must run there"),
    ],
)
def test_project_pin(tmp_path, files, version, source):
    for name, text in files.items():
        write(tmp_path, name, text)
    pin = project_pin(tmp_path / "src" if (tmp_path / "src").is_dir() else tmp_path)
    assert (pin.version, pin.source) == (version, source)


def test_the_pin_is_found_from_a_subfolder_and_not_above_the_repository(tmp_path):
    write(tmp_path, "requirements.txt", "jax==0.4.30\n")
    repo = tmp_path / "repo"
    write(repo, "src/pkg/mod.py", "")
    write(repo, "src/requirements.txt", "numpy\n")  # no jax here: keep looking up
    write(repo, "setup.py", 'setup(install_requires=["jax==0.4.1"])\n')
    (repo / ".git").mkdir()
    assert project_pin(repo / "src" / "pkg").source == "setup.py: jax==0.4.1"
    (repo / "setup.py").unlink()
    assert project_pin(repo / "src" / "pkg") is None  # the outer folder is another project
    assert project_pin(repo / "src" / "pkg" / "mod.py") is None


def test_unreadable_project_files_declare_nothing(tmp_path):
    (tmp_path / "setup.py").write_text("setup(\n")
    (tmp_path / "setup.cfg").write_text("not an ini file\n")
    (tmp_path / ".git").mkdir()
    assert project_pin(tmp_path) is None


@pytest.mark.parametrize(
    "command_line, config, requirement, expected, source",
    [
        pytest.param(None, None, None, None, "", id="nothing known"),
        pytest.param(None, None, "jax==0.4.30", (0, 4), "requirements.txt: jax==0.4.30", id="the pin"),
        pytest.param(None, '"0.8"', "jax==0.4.30", (0, 8), "pyproject.toml: from-jax", id="config over pin"),
        pytest.param("0.10", '"0.8"', "jax==0.4.30", (0, 10), "--from-jax", id="command line over all"),
    ],
)
def test_from_jax_setting(tmp_path, monkeypatch, command_line, config, requirement, expected, source):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    if config:
        write(tmp_path, "pyproject.toml", f"[tool.jaxmigrate]\nfrom-jax = {config}\n")
    if requirement:
        write(tmp_path, "requirements.txt", requirement + "\n")
    settings = load_settings(None, tmp_path, from_jax=command_line)
    assert settings.from_jax == expected
    assert settings.from_jax_source.endswith(source)


def test_from_jax_changes_the_fingerprint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    base = load_settings(None, tmp_path).fingerprint()
    assert load_settings(None, tmp_path, from_jax="0.4").fingerprint() != base


def test_from_jax_as_a_toml_number_is_refused(tmp_path):
    from jaxmigrate.config import ConfigError

    write(tmp_path, "pyproject.toml", "[tool.jaxmigrate]\nfrom-jax = 0.4\n")
    with pytest.raises(ConfigError, match='from-jax must be a string like "0.10"'):
        load_settings(None, tmp_path)


def test_the_command_line_option_reaches_the_rule(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from jaxmigrate.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    write(tmp_path, "mesh.py", "import jax\nmesh = jax.make_mesh((8,), ('data',))\n")
    run = lambda *args: CliRunner().invoke(main, ["mesh.py", "--select", "JM506", *args])  # noqa: E731
    assert run("--from-jax", "0.4").exit_code == 1
    assert run("--from-jax", "0.10").exit_code == 0
    write(tmp_path, "requirements.txt", "jax>=0.9\n")
    assert run().exit_code == 0  # the project's pin: written for 0.9 or newer
    assert run("--from-jax", "0.4").exit_code == 1  # the option wins
