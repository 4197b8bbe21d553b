"""A cached virtual environment holding an old JAX, so legacy code can run as it was.

The old side of a migration often uses APIs that modern JAX removed (PositionalSharding,
pjit's keyword forms, ...). The harness can run that side under another interpreter; this
module makes one: ``python -m venv`` + ``pip install "jax[cpu]==VERSION"``, cached under
``~/.cache/jaxmigrate/venvs/jax-VERSION`` (or ``$JAXMIGRATE_CACHE_DIR/venvs/...``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # (Windows: no advisory locks; venvs are made one at a time there)
    fcntl = None

# jaxlib 0.4.30 wheels predate NumPy 2's ABI settling; pinning numpy<2 keeps the
# import from failing with "compiled using NumPy 1.x" on fresh resolves.
_EXTRA_PINS: dict[str, list[str]] = {"0.4.30": ["numpy<2", "ml_dtypes<0.5", "scipy<1.14"]}

_READY_MARKER = ".jaxmigrate-ready"


@dataclass(frozen=True)
class LegacyEnv:
    """The outcome of :func:`make_legacy_env`: an interpreter, or the reason there is none."""

    python: Path | None
    reason: str = ""
    seconds: float = 0.0  # time spent creating it now (0 when served from the cache)
    cached: bool = False


def cache_root() -> Path:
    base = os.environ.get("JAXMIGRATE_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "jaxmigrate"


def venv_dir(version: str, packages: tuple[str, ...] = ()) -> Path:
    return cache_root() / "venvs" / "+".join([f"jax-{version}", *packages])


def _venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def make_legacy_env(
    version: str = "0.4.30", *, packages: tuple[str, ...] = (), base_python: str | None = None,
    timeout: float = 900.0,
) -> LegacyEnv:
    """Create (or reuse) a venv with ``jax[cpu]==version`` and ``packages`` (pinned requirements of
    the legacy code, e.g. ``("flax==0.8.5",)``); never raises for expected failures."""
    root = venv_dir(version, packages)
    python = _venv_python(root)
    if (root / _READY_MARKER).is_file() and python.exists():
        return LegacyEnv(python=python, cached=True)
    with _one_maker(root):
        if (root / _READY_MARKER).is_file() and python.exists():
            return LegacyEnv(python=python, cached=True)  # made while this process waited
        return _make(root, python, version, packages, base_python, timeout)


@contextmanager
def _one_maker(root: Path) -> Iterator[None]:
    """Holds the venv's lock file: two processes that find it missing at once (the test suite's
    workers, two harness runs) would otherwise each delete what the other is installing."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _make(root: Path, python: Path, version: str, packages: tuple[str, ...], base_python: str | None,
          timeout: float) -> LegacyEnv:
    start = time.monotonic()
    # A half-built venv from an interrupted run would otherwise look usable.
    shutil.rmtree(root, ignore_errors=True)
    steps = [
        [base_python or sys.executable, "-m", "venv", str(root)],
        [str(python), "-m", "pip", "install", "--quiet", f"jax[cpu]=={version}",
         *_EXTRA_PINS.get(version, []), *packages],
        [str(python), "-c", "import jax, numpy; print(jax.__version__)"],
    ]
    for cmd in steps:
        try:
            done = _run(cmd, timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(root, ignore_errors=True)
            return LegacyEnv(None, f"cannot create a jax {version} venv: {' '.join(cmd[:4])}: {exc}")
        if done.returncode != 0:
            shutil.rmtree(root, ignore_errors=True)
            return LegacyEnv(
                None,
                f"cannot create a jax {version} venv at {root}: `{' '.join(cmd[:5])}` failed "
                f"(exit {done.returncode}): {_tail(done.stderr or done.stdout)}",
            )
    (root / _READY_MARKER).write_text(version + "\n")
    return LegacyEnv(python=python, seconds=time.monotonic() - start)


def ensure_legacy_python(version: str = "0.4.30") -> Path | None:
    """The interpreter of a cached venv with ``jax[cpu]==version``, or None.

    Callers that want the reason (to put in a skip message) use :func:`make_legacy_env`.
    """
    return make_legacy_env(version).python
