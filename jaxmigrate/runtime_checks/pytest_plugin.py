"""pytest fixture ``jaxmigrate_verify``: verify a migration from inside a test suite.

Registered through the ``pytest11`` entry point, so installing jaxmigrate makes it available::

    def test_migration(jaxmigrate_verify):
        report = jaxmigrate_verify(old="old/train.py", new="new/train.py", entry="main", devices=8)
        assert report.entry("main").new.collectives.count("all-reduce") == 1

``processes=2, devices=2`` runs each side as 2 JAX processes of 2 CPU devices each, like
``jaxmigrate verify --processes 2 --devices 2``.

Relative paths are taken from the test file's folder, then the current directory. The test fails
with the rendered report (worst leaves, tracebacks) unless every entry is equal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest


def _resolve(path: str | os.PathLike[str], base: Path) -> Path:
    path = Path(path)
    if path.is_absolute() or not (base / path).exists():
        return path
    return base / path


@pytest.fixture
def jaxmigrate_verify(request: pytest.FixtureRequest) -> Callable[..., Any]:
    # Imported here so merely having the plugin installed costs nothing at collection time.
    from .harness import verify
    from .report import render_text

    base = Path(request.path).parent

    def run(
        old: str | os.PathLike[str], new: str | os.PathLike[str], entry: str | Sequence[str] = "main",
        *, devices: int = 8, processes: int = 1, check: bool = True, **options: Any,
    ) -> Any:
        entries = [entry] if isinstance(entry, str) else list(entry)
        for key in ("inputs",):
            if isinstance(options.get(key), str) and ":" in options[key]:
                file, _, func = options[key].rpartition(":")
                options[key] = f"{_resolve(file, base)}:{func}"
        report = verify(_resolve(old, base), _resolve(new, base), entries, devices=devices,
                        processes=processes, **options)
        if check and not report.equal:
            pytest.fail(f"jaxmigrate verify: exit {report.exit_code}\n{render_text(report)}", pytrace=False)
        return report

    return run
