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
