"""`python -m jaxmigrate.runtime_checks.legacy_python`: the README's way to get the old-JAX
interpreter that `jaxmigrate verify --old-python` needs."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

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


def test_two_runs_that_find_the_venv_missing_at_once_make_it_once(monkeypatch, tmp_path):
    # (the test suite's workers, or two harness runs on a cold cache: the second waits for the
    # first and takes its venv, where it would have deleted the venv being installed)
    from jaxmigrate.runtime_checks import legacy_env

    monkeypatch.setenv("JAXMIGRATE_CACHE_DIR", str(tmp_path))
    made, inside, most = [], [0], [0]

    def make(root, python, version, packages, base_python, timeout):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.3)
        python.parent.mkdir(parents=True)
        python.write_text("")
        (root / legacy_env._READY_MARKER).write_text(version)
        made.append(root)
        inside[0] -= 1
        return LegacyEnv(python=python, seconds=0.3)

    monkeypatch.setattr(legacy_env, "_make", make)
    with ThreadPoolExecutor(2) as pool:
        envs = list(pool.map(lambda _: legacy_env.make_legacy_env("0.4.30"), range(2)))
    assert len(made) == 1 and most[0] == 1
    assert envs[0].python == envs[1].python and sorted(e.cached for e in envs) == [False, True]
