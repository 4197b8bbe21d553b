"""The worker saves a side's outputs under every JAX it may run with, the oldest included.

The checks run in a child interpreter: JAX started in the test process would be forked, multithreaded,
by the process-pool tests that run after this file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHECKS = textwrap.dedent("""
    import types

    import jax
    import numpy as np

    from jaxmigrate.runtime_checks import worker

    # jax 0.4.13 (the oldest jaxlib that installs on Python 3.11, which brax 0.0.16 needs) has no
    # `jax.dtypes.prng_key`: keys are raw uint32 arrays there, saved like any other array.
    old_jax = types.SimpleNamespace(dtypes=types.SimpleNamespace(issubdtype=jax.dtypes.issubdtype),
                                    Array=jax.Array, random=jax.random)
    key = np.asarray(jax.random.PRNGKey(0))
    array, name, note = worker._leaf_to_numpy(old_jax, np, key)
    assert (name, note) == ("uint32", ""), (name, note)
    np.testing.assert_array_equal(array, key)

    # Typed keys are saved as their key data.
    array, name, note = worker._leaf_to_numpy(jax, np, jax.random.key(0))
    assert name.startswith("key<") and "key data" in note, (name, note)
    np.testing.assert_array_equal(array, jax.random.key_data(jax.random.key(0)))
    print("ok")
""")


def test_outputs_are_saved_under_a_jax_without_typed_keys_and_with_them():
    done = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
