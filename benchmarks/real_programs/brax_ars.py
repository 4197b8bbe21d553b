"""brax 0.0.16's ARS (augmented random search; `brax/training/agents/ars/train.py`, a pmap training
program) on brax's own `reacher` environment for a few steps. (On `fast`, whose first observation
is zero, ARS's linear policy never moves, every direction scores the same and the update is NaN.)
Only sizes, steps and the seed are chosen here."""

import jax
import numpy as np


# brax 0.0.16's `brax/jumpy.py` (imported by all of brax) asks JAX's internals two questions, and
# no JAX installable here answers them as the JAX of its day (<= 0.4.3, no such jaxlib installs):
# - `_in_jit()` is `jax.core.cur_sublevel().level > 0`, true inside `jit` only while jit was a call
#   primitive; false on every later JAX (its vectorised env wrappers then `numpy.stack` tracers),
#   and the name is gone from JAX 0.4.36 on. Every env call of these programs is traced (jit,
#   pmap): the answer is True.
# - `_which_np` tests `isinstance(a, jax.interpreters.batching.BatchTracer)`, a name gone from JAX
#   0.9 on (the migrated brax fails at import without it); every tracer is a `jax.Array` there, so
#   the test adds nothing: `jax.core.Tracer` stands in where the name is missing.
# The driver sets both, on both sides alike, before brax is imported: the one change to brax.
from jax.interpreters import batching as _batching  # noqa: E402

if not hasattr(_batching, "BatchTracer"):
    _batching.BatchTracer = jax.core.Tracer

from brax import envs  # noqa: E402
from brax import jumpy  # noqa: E402
from brax.training.agents.ars import train as ars  # noqa: E402

jumpy._in_jit = lambda: True


def main():
    _, params, metrics = ars.train(
        envs.get_environment("reacher"),
        num_timesteps=512,
        episode_length=8,
        number_of_directions=8,
        top_directions=4,
        num_eval_envs=16,
        num_evals=2,
        normalize_observations=True,
        seed=5,
    )
    return {"params": _numpy(params), "metrics": _deterministic(metrics)}


def _numpy(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


def _deterministic(metrics):
    """The metrics without wall-clock figures (steps per second, seconds)."""
    return {k: np.asarray(v) for k, v in sorted(metrics.items()) if "sps" not in k and "time" not in k}

