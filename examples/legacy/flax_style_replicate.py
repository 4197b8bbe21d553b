"""The flax helpers of the pmap era: replicate the state onto every device, shard the batch,
and unreplicate to read results (lint-only example: needs flax to run)."""

import jax
from flax import jax_utils
from flax.training import common_utils


def evaluate(state, batch, eval_step):
    state = jax_utils.replicate(state)
    batch = common_utils.shard(batch)
    metrics = jax.pmap(eval_step, axis_name="devices")(state, batch)
    return jax_utils.unreplicate(metrics)
