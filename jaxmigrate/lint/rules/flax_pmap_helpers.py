"""JM104: flax's pmap input/output helpers (`prefetch_to_device`, `pad_shard_unpad`, `get_metrics`)."""

from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class FlaxPmapHelpers(LegacyNameRule):
    """
    ## What it does
    Reports every mention of flax's helpers for feeding and reading a `pmap`:
    `flax.jax_utils.prefetch_to_device`, `flax.jax_utils.pad_shard_unpad` and
    `flax.training.common_utils.get_metrics`, through any import or alias.

    ## Why is this bad
    Each one speaks pmap's calling convention, a leading axis of one slice per local device
    (bodies read in flax 0.6.4, 0.8.5, 0.11.2 and 0.12.0-0.12.8):
    - `prefetch_to_device(it, size)` puts slice i of every batch on device i. Up to flax 0.12.6 it
      does so with `jax.device_put_sharded`, which JAX 0.10 removed: the first batch raises
      `AttributeError: jax.device_put_sharded is deprecated; use jax.device_put instead.`
      (checked with jax 0.10.2).
    - `pad_shard_unpad(f)` pads each batch to a multiple of `jax.local_device_count()`, reshapes
      it to `(devices, batch / devices, ...)` for the pmapped `f`, then fetches the outputs to the
      host and undoes both.
    - `get_metrics(metrics)` takes device 0's copy of every leaf (`x[0]`, from flax 0.12.3
      `x.addressable_shards[0].data.squeeze(0)`) before stacking them: on global-view metrics,
      which have no device axis, that is the first row of each metric, or an error for a scalar.

    ## Example
    ```python
    from flax import jax_utils
    from flax.training import common_utils

    for batch in jax_utils.prefetch_to_device(batches, 2):
        state, metrics = p_train_step(state, batch)
    summary = common_utils.get_metrics(all_metrics)
    ```

    ## Use instead
    ```python
    sharding = NamedSharding(mesh, P("data"))
    for host_batch in batches:
        batch = jax.make_array_from_process_local_data(sharding, host_batch)
        state, metrics = train_step(state, batch)  # jax.jit over global arrays
    summary = jax.tree.map(lambda *xs: np.stack(xs), *jax.device_get(all_metrics))
    ```

    ## Fix safety
    No fix: each helper goes in the same change that moves its pmap to the global view (the
    batch loses its device axis, the outputs theirs); with the pmap kept, the helpers keep working
    but for `prefetch_to_device` on JAX 0.10 with a flax older than 0.12.7.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    - [flax: processing the entire dataset](https://flax.readthedocs.io/en/latest/guides/data_preprocessing/full_eval.html)
    """

    code = "JM104"
    name = "flax-pmap-helpers"
    summary = "flax's pmap feeding/reading helpers (`prefetch_to_device`, `pad_shard_unpad`, `get_metrics`)"
    trigger_words = ("prefetch_to_device", "pad_shard_unpad", "get_metrics")
    jax_versions = "superseded together with jax.pmap; prefetch_to_device fails on JAX 0.10 with flax < 0.12.7"

    VALID = [
        Valid("from flax.training import common_utils\nname = 'common_utils.get_metrics'\n"),  # the name in a string: past the pre-filter, no use
        Valid("import jax\nbatch = jax.make_array_from_process_local_data(sharding, host_batch)\n"),
        Valid(  # a project's own helper of the same name
            """
            def get_metrics(history):
                return history[-1]
            last = get_metrics(history)
            """
        ),
        Valid("from flax import jax_utils\nstate = jax_utils.scan_in_dim(f, init, xs)\n"),
        Valid("import tensorflow as tf\nds = tf.data.experimental.prefetch_to_device('/gpu:0')\n"),
        Valid(  # flax is imported, but the helper called is the module's own
            "from flax import jax_utils\n\ndef get_metrics(h):\n    return h[-1]\n\nm = get_metrics(jax_utils)\n"
        ),
    ]
    INVALID = [
        Invalid("from flax import jax_utils as ju\nit = ju.prefetch_to_device(batches, 2)\n"),
        Invalid("import flax\nit = flax.jax_utils.prefetch_to_device(batches, 2, devices)\n"),
        Invalid(
            """
            import functools
            from flax.jax_utils import pad_shard_unpad
            import jax

            @pad_shard_unpad
            @functools.partial(jax.pmap, axis_name="batch")
            def predict(params, x):
                return x
            """
        ),
        Invalid("from flax.training.common_utils import get_metrics\nsummary = get_metrics(history)\n"),
        Invalid("from flax.training import common_utils\nsummary = common_utils.get_metrics(history)\n"),
    ]
