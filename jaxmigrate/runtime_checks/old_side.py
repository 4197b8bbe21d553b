"""The old side of ``verify`` where users have it: a git revision of the same file (``--old-ref``)
and the JAX it was written for (``--old-jax``, a cached venv; the project's own pin by default when
the old side cannot even be imported with this JAX).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from jaxmigrate.pins import project_pin

from .harness import VerifyUsageError
from .legacy_env import make_legacy_env

# How Python says an API is gone: the hint to run the old side with the JAX it was written for.
_REMOVED_API = re.compile(
    r"has no attribute|cannot import name|No module named '?(?:jax|flax)\b|is not available|was removed",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


def from_git(rev: str, new: Path, folder: Path) -> Path:
    """``new`` as it was at git revision ``rev`` (``git show REV:./NAME`` from its folder), written
    to ``folder`` under the same name, so the module keeps its name (and ``__name__``)."""
    new = new.resolve()
    try:
        shown = subprocess.run(["git", "-C", str(new.parent), "show", f"{rev}:./{new.name}"],
                               capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise VerifyUsageError(f"--old-ref {rev}: cannot run git: {error}") from None
    if shown.returncode != 0:
        why = shown.stderr.decode(errors="replace").strip().splitlines()
        raise VerifyUsageError(f"--old-ref {rev}: git cannot show {new.name} at {rev}: {why[-1] if why else 'failed'}")
    old = folder / new.name
    old.write_bytes(shown.stdout)
    return old


def requirement(version: str) -> str:
    """What ``--old-jax X.Y`` installs: the newest X.Y.* release; X.Y.Z exactly."""
    if not _VERSION.match(version):
        raise VerifyUsageError(f"--old-jax must look like 0.4 or 0.4.30, got {version!r}")
    return version if version.count(".") == 2 else f"{version}.*"


def python_for(version: str) -> str:
    """The interpreter of the cached venv with jax ``version`` (made now if it is not there)."""
    env = make_legacy_env(requirement(version))
    if env.python is None:
        raise VerifyUsageError(f"--old-jax {version}: {env.reason}")
    return str(env.python)


def project_jax(program: Path) -> tuple[str, str] | None:
    """(version, where it was read) of the JAX the program's project pins, when it pins one."""
    pin = project_pin(program.resolve().parent)
    return (pin.release, pin.source) if pin is not None and pin.release else None


def removed_api_hint(message: str, pinned: tuple[str, str] | None, jax_version: str | None) -> str:
    """A hint for an old side that failed on an API this JAX no longer has; "" otherwise."""
    if not _REMOVED_API.search(message):
        return ""
    version = pinned[0] if pinned else "X.Y"
    where = f" ({pinned[1]})" if pinned else ""
    return (f" The old code may use an API that JAX {jax_version or 'here'} removed: run the old side with the JAX"
            f" it was written for, `--old-jax {version}`{where}, which builds and caches a venv with it.")
