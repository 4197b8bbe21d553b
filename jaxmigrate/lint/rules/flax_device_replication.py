from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class FlaxDeviceReplication(SiteFixes, LegacyNameRule):
    """
    ## What it does
    Reports every mention of `flax.jax_utils.replicate` and `flax.jax_utils.unreplicate`.

    ## Why is this bad
    These helpers add and strip the leading device axis that only `jax.pmap` consumes and
    produces. They are superseded (not deprecated) together with `pmap`, so they are reported
    whatever the target JAX version: with global arrays there is no device axis, and placement
    is expressed with a `NamedSharding`.

    ## Example
    ```python
    from flax import jax_utils

    state = jax_utils.replicate(state)
    ```

    ## Use instead
    ```python
    state = jax.device_put(state, NamedSharding(mesh, P()))
    ```

    ## Fix safety
    The fix writes what flax's helpers do (flax 0.8.5, `flax/jax_utils.py`) in JAX 0.10 terms,
    keeping the leading device axis so every call site stays valid. `unreplicate(tree)` becomes
    flax's own body, `jax.tree.map(lambda x: x[0], tree)`: safe. `replicate(tree, devices=None)`
    is `jax.device_put_replicated(tree, devices or jax.local_devices())`, removed in JAX 0.10, and
    becomes JM302's placement: `jax.device_put` of a zero-copy `np.broadcast_to` view of every
    leaf over `NamedSharding(Mesh(devices, ("devices",)), P("devices"))`. Same shapes, dtypes,
    values, device of every slice and one copy per device; but JAX kept weakly typed leaves (a
    TrainState's `step=0`, `jnp.asarray(0.1)`) weak and numpy makes them strong, which changes
    later dtype promotion (with bf16 values, for one), and typed PRNG keys raise. So it is unsafe,
    except where every leaf is provably a numpy value. Onto flax's default devices
    (`jax.local_devices()`) it holds with several processes too. The test suite runs a legacy
    program with the real flax 0.8.5 on JAX 0.4.30 and the fixed one on JAX 0.10.2, on 8 CPU
    devices, and with 2 processes. Helpers passed around as values, or called with `*args`, are
    kept and the finding says why. Dropping the device axis altogether (the global view) changes
    shapes, and is left to you.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    """

    code = "JM102"
    name = "flax-device-replication"
    summary = "`flax.jax_utils.replicate`/`unreplicate` build pmap's leading device axis"
    trigger_words = ("replicate", "unreplicate")
    jax_versions = "superseded together with jax.pmap"

    fixable = Safety.SAFE
    sometimes_unsafe = True
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_flax_replication"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_flax_replication"
    site_fix_message = "rewrite as what flax's helper does, with public JAX 0.10 API (leading device axis kept)"

    VALID = [
        Valid("import jax\nstate = jax.device_put(state, sharding)\n"),
        Valid("def replicate(x):\n    return x\n\ny = replicate(1)\n"),
        Valid("import numpy as np\ny = np.replicate(x)\n"),
        Valid("from flax import jax_utils\nbatch = jax_utils.prefetch_to_device(it, 2)\n"),
        Valid(  # the name in a string: the pre-filter lets it through, the rule finds no use
            "from flax import jax_utils\nname = 'jax_utils.replicate'\nbatch = jax_utils.prefetch_to_device(it, 2)\n"
        ),
        Valid(  # a local helper of the same name, in a module that uses flax's jax_utils
            "from flax import jax_utils\n\ndef replicate(x):\n    return x\n\ny = replicate(jax_utils)\n"
        ),
    ]
    INVALID = [
        Invalid(
            """
            from flax import jax_utils

            def read(metrics):
                return jax_utils.unreplicate(metrics)
            """,
            expected="""
            import jax

            def read(metrics):
                return jax.tree.map(lambda x: x[0], metrics)
            """,
        ),
        Invalid(
            "from flax import jax_utils\nstate = jax_utils.replicate(state)\n",
            expected="""
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            state = jax.device_put(
                jax.tree.map(
                    lambda x: np.broadcast_to(x, (jax.local_device_count(), *np.shape(x))),
                    state,
                ),
                NamedSharding(Mesh(jax.local_devices(), ("devices",)), P("devices")),
            )
            """,
        ),
        Invalid(
            "import flax\nx = flax.jax_utils.unreplicate(state)\n",
            expected="""
            import jax
            x = jax.tree.map(lambda x: x[0], state)
            """,
        ),
        Invalid(
            "from flax.jax_utils import replicate as rep, unreplicate\ns = rep(s)\n",
            expected="""
            import jax
            import numpy as np
            from flax.jax_utils import unreplicate
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            s = jax.device_put(
                jax.tree.map(
                    lambda x: np.broadcast_to(x, (jax.local_device_count(), *np.shape(x))),
                    s,
                ),
                NamedSharding(Mesh(jax.local_devices(), ("devices",)), P("devices")),
            )
            """, count=2,
        ),
        Invalid("import flax.jax_utils as ju\nimport functools\nr = functools.partial(ju.replicate, devices=d)\n"),
    ]
