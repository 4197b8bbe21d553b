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
    sharding = NamedSharding(Mesh(devices, ("devices",)), P("devices"))
    params = jax.device_put(
        jax.tree.map(lambda x: np.broadcast_to(x, (len(devices), *np.shape(x))), params), sharding)
    batch = jax.device_put(jax.tree.map(lambda *xs: np.stack(xs), *shards), sharding)
    ```
    or, with the global view, no device axis at all: `jax.device_put(params, NamedSharding(mesh, P()))`.

    ## Fix safety
    The fix writes the placements above at the site, with public API only: a leading axis of
    `len(devices)` (a zero-copy `np.broadcast_to` view, or the shards stacked on the host), slice i
    on `devices[i]`. Run against JAX 0.4.30's and 0.10.2's own implementations leaf by leaf, it
    gives the same shapes, dtypes, values, device of every slice (any subset and order of devices)
    and committedness, and every device holds one copy. It is safe where every leaf is provably a
    numpy value (`np.zeros(...)`, a list of `np.full(...)`, ...). Elsewhere it is unsafe: JAX kept
    weakly typed leaves (Python scalars, `jnp.asarray(0.1)`) weak and numpy does not, which changes
    dtype promotion later (`weak f32 * bf16` is bf16, `f32 * bf16` is f32), and typed PRNG keys
    (`jax.random.key`) raise. No public placement keeps weak types without holding every copy on
    one device first (`jnp.stack`) or compiling per call (a jitted broadcast).

    Several processes: onto `jax.local_devices()` (or a slice of it, or a name bound to one) the
    result is this process's array, as before (run with 2 processes x 2 devices in the test
    suite). In a module that shows multi-process use (`jax.process_index`, `jax.distributed`,
    `multihost_utils`, ...), a placement onto devices not known to be local is unsafe: there
    `jax.device_put` of a host value first checks that every process passes the same value (a
    collective: it waits for every process and raises when they differ), where
    `device_put_sharded` placed each process's own shards and `device_put_replicated` copied this
    process's value onto the other processes' devices. The devices expression is written twice by
    the replicated form, so one that may not give the same list twice (a call of your own) is
    kept: bind it to a name.

    ## References
    - [Drop-in replacements](https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements)
    """

    code = "JM302"
    name = "legacy-device-put"
    summary = "`jax.device_put_replicated`/`device_put_sharded` are removed; use `jax.device_put`"
    trigger_words = ("device_put_replicated", "device_put_sharded")
    jax_versions = "deprecated in 0.8.1, removed in 0.10.0"

    fixable = Safety.SAFE
    sometimes_unsafe = True
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_legacy_device_put"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_legacy_device_put"
    site_fix_message = "place with `jax.device_put` over a 1-D mesh of the devices (leading device axis kept)"

    VALID = [
        Valid("import jax\nx = jax.device_put(x, sharding)\n"),
        Valid("def device_put_sharded(xs, devs):\n    return xs\n\ny = device_put_sharded(a, b)\n"),
        Valid("import jax\ndef f(jax):\n    return jax.device_put_replicated(x, d)\n"),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            import numpy as np

            table = jax.device_put_replicated(np.zeros(3), devices)
            """,
            expected="""
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            table = jax.device_put(
                jax.tree.map(
                    lambda x: np.broadcast_to(x, (len(devices), *np.shape(x))),
                    np.zeros(3),
                ),
                NamedSharding(Mesh(devices, ("devices",)), P("devices")),
            )
            """,
        ),
        Invalid(
            "import jax\nx = jax.device_put_replicated(x, jax.local_devices())\n",
            expected="""
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            x = jax.device_put(
                jax.tree.map(
                    lambda x: np.broadcast_to(x, (jax.local_device_count(), *np.shape(x))),
                    x,
                ),
                NamedSharding(Mesh(jax.local_devices(), ("devices",)), P("devices")),
            )
            """,
        ),
        Invalid(
            "import jax as J\nx = J.device_put_sharded(xs, J.local_devices())\n",
            expected="""
            import jax as J
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            x = J.device_put(
                J.tree.map(lambda *xs: np.stack(xs), *xs),
                NamedSharding(Mesh(J.local_devices(), ("devices",)), P("devices")),
            )
            """,
        ),
        Invalid("from jax import device_put_replicated as dpr, device_put_sharded\n", count=2),
    ]
