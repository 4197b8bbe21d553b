from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class LegacyDevicePut(SiteFixes, LegacyNameRule):
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
    Safe. Each call becomes a call of a module-level helper, `_device_put_replicated` /
    `_device_put_sharded`, generated once, that does what JAX 0.10.2's own implementation did
    (`jax/_src/api.py`) with public API: one `x[None]` buffer per device assembled with
    `jax.make_array_from_single_device_arrays` over a 1-D mesh of `devices`. Shapes (the leading
    device axis), values and placement are unchanged; the test suite compares both sides on 8 CPU
    devices, the old one on JAX 0.4.30. Dropping the leading axis altogether (the global view)
    changes shapes and is left to you.

    ## References
    - [Drop-in replacements](https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements)
    """

    code = "JM302"
    name = "legacy-device-put"
    summary = "`jax.device_put_replicated`/`device_put_sharded` are removed; use `jax.device_put`"
    trigger_words = ("device_put_replicated", "device_put_sharded")
    jax_versions = "deprecated in 0.8.1, removed in 0.10.0"

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_legacy_device_put"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_legacy_device_put"
    site_fix_message = "rewrite as a generated helper that does what JAX 0.10.2 did, with public API"

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
