"""`python -m jaxmigrate.runtime_checks.legacy_python`: the README's way to get the old-JAX
interpreter that `jaxmigrate verify --old-python` needs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jaxmigrate.runtime_checks import legacy_python
from jaxmigrate.runtime_checks.legacy_env import LegacyEnv


@pytest.mark.slow
def test_it_prints_an_interpreter_running_the_old_jax():
    made = subprocess.run([sys.executable, "-m", "jaxmigrate.runtime_checks.legacy_python", "0.4.30"],
                          capture_output=True, text=True, timeout=1200)
    if made.returncode != 0:
        pytest.skip(f"no jax 0.4.30 interpreter could be made: {made.stderr}")
    assert made.stderr == ""  # no runpy warning, nothing but the path on stdout
    python = made.stdout.strip()
    version = subprocess.run([python, "-c", "import jax; print(jax.__version__)"],
                             capture_output=True, text=True, timeout=300)
    assert version.stdout.strip() == "0.4.30", version.stderr


def test_when_it_cannot_be_made_it_says_why_and_exits_1(monkeypatch, capsys):
    asked = []

    def make(version, packages=()):
        asked.append((version, packages))
        return LegacyEnv(None, "cannot create a jax 0.4.30 venv: pip failed")

    monkeypatch.setattr(legacy_python, "make_legacy_env", make)
    assert legacy_python.main(["0.4.30", "flax==0.8.5"]) == 1
    assert asked == [("0.4.30", ("flax==0.8.5",))]
    captured = capsys.readouterr()
    assert captured.out == "" and "pip failed" in captured.err
