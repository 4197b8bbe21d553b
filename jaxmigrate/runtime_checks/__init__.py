"""Side-by-side verification of a migration: old and new programs run in worker subprocesses.

Nothing here imports jax: only ``worker.py``, run as a script in a child interpreter, does.
"""

from .harness import InputsSpec, VerifyUsageError, verify
from .legacy_env import LegacyEnv, ensure_legacy_python, make_legacy_env

__all__ = ["InputsSpec", "LegacyEnv", "VerifyUsageError", "ensure_legacy_python", "make_legacy_env", "verify"]
