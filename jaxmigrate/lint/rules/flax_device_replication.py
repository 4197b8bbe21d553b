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
    Safe. The fix writes what flax's helpers do (flax 0.8.5, `flax/jax_utils.py`) in JAX 0.10
    terms, keeping the leading device axis so every call site stays valid: `replicate(tree,
    devices=None)` becomes `_device_put_replicated(tree, devices or jax.local_devices())` (the
    helper JM302 generates, because flax's own `replicate` calls the `jax.device_put_replicated`
    that JAX 0.10 removed) and `unreplicate(tree)` becomes `jax.tree.map(lambda x: x[0], tree)`.
    The test suite runs a legacy program with the real flax 0.8.5 on JAX 0.4.30 and the fixed one
    on JAX 0.10.2, on 8 CPU devices, and compares values and device placement. Helpers passed
    around as values, or called with `*args`, are kept and the finding says why. Dropping the
    device axis altogether (the global view) changes shapes, and is left to you.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    """

    code = "JM102"
    name = "flax-device-replication"
    summary = "`flax.jax_utils.replicate`/`unreplicate` build pmap's leading device axis"
    trigger_words = ("replicate", "unreplicate")
    jax_versions = "superseded together with jax.pmap"

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_flax_replication"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_flax_replication"
    site_fix_message = "rewrite as what flax's helper does, in JAX 0.10 API (leading device axis kept)"

    VALID = [
        Valid("import jax\nstate = jax.device_put(state, sharding)\n"),
        Valid("def replicate(x):\n    return x\n\ny = replicate(1)\n"),
        Valid("import numpy as np\ny = np.replicate(x)\n"),
        Valid("from flax import jax_utils\nbatch = jax_utils.prefetch_to_device(it, 2)\n"),
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
        Invalid("from flax import jax_utils\nstate = jax_utils.replicate(state)\n"),
        Invalid("import flax\nx = flax.jax_utils.unreplicate(state)\n"),
        Invalid("from flax.jax_utils import replicate as rep, unreplicate\ns = rep(s)\n", count=2),
        Invalid("import flax.jax_utils as ju\nimport functools\nr = functools.partial(ju.replicate, devices=d)\n"),
    ]
