"""Shared pieces of the runtime_checks tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS_CASES = REPO / "fixtures" / "runtime" / "harness"


@pytest.fixture(scope="session")
def harness_case():
    """case(name) -> (old.py, new.py) of a fixtures/runtime/harness case."""

    def case(name: str) -> tuple[Path, Path]:
        return HARNESS_CASES / name / "old.py", HARNESS_CASES / name / "new.py"

    return case


@pytest.fixture(scope="session")
def legacy_python() -> Path:
    """An interpreter with jax[cpu]==0.4.30 (cached venv); skipped, saying why, if none can be made."""
    from jaxmigrate.runtime_checks.legacy_env import make_legacy_env

    env = make_legacy_env("0.4.30")
    if env.python is None:
        pytest.skip(env.reason)
    return env.python
