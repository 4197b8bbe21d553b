from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class LegacyDevicePut(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.device_put_replicated` and `jax.device_put_sharded`.

    ## Why is this bad
    Both build pmap-style arrays with a leading device axis. They were deprecated in JAX 0.8.1
    and removed in JAX 0.10.0 (accessing them raises `AttributeError`).

    ## Example
    ```python
    params = jax.device_put_replicated(params, jax.local_devices())
    batch = jax.device_put_sharded(shards, jax.local_devices())
    ```

    ## Use instead
    ```python
    params = jax.device_put(params, NamedSharding(mesh, P()))
    batch = jax.device_put(jnp.stack(shards), NamedSharding(mesh, P("x")))
    ```

    ## Fix safety
    No fix yet. The planned drop-in replacement keeps the leading axis; the global-view
    rewrite drops it and changes shapes, so it is unsafe.

    ## References
    - [Drop-in replacements](https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements)
    """

    code = "JM302"
    name = "legacy-device-put"
    summary = "`jax.device_put_replicated`/`device_put_sharded` are removed; use `jax.device_put`"
    trigger_words = ("device_put_replicated", "device_put_sharded")
    jax_versions = "deprecated in 0.8.1, removed in 0.10.0"

    VALID = [
        Valid("import jax\nx = jax.device_put(x, sharding)\n"),
        Valid("def device_put_sharded(xs, devs):\n    return xs\n\ny = device_put_sharded(a, b)\n"),
        Valid("import jax\ndef f(jax):\n    return jax.device_put_replicated(x, d)\n"),
    ]
    INVALID = [
        Invalid("import jax\nx = jax.device_put_replicated(x, jax.local_devices())\n"),
        Invalid("import jax as J\nx = J.device_put_sharded(xs, J.local_devices())\n"),
        Invalid("from jax import device_put_replicated as dpr, device_put_sharded\n", count=2),
    ]
