from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class FlaxDeviceReplication(LegacyNameRule):
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
    No fix yet. Removing the device axis changes the shapes seen by every call site, so the
    planned fix is unsafe and is verified at runtime.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    """

    code = "JM102"
    name = "flax-device-replication"
    summary = "`flax.jax_utils.replicate`/`unreplicate` build pmap's leading device axis"
    trigger_words = ("replicate", "unreplicate")
    jax_versions = "superseded together with jax.pmap"

    VALID = [
        Valid("import jax\nstate = jax.device_put(state, sharding)\n"),
        Valid("def replicate(x):\n    return x\n\ny = replicate(1)\n"),
        Valid("import numpy as np\ny = np.replicate(x)\n"),
        Valid("from flax import jax_utils\nbatch = jax_utils.prefetch_to_device(it, 2)\n"),
    ]
    INVALID = [
        Invalid("from flax import jax_utils\nstate = jax_utils.replicate(state)\n"),
        Invalid("import flax\nx = flax.jax_utils.unreplicate(state)\n"),
        Invalid("from flax.jax_utils import replicate as rep, unreplicate\ns = rep(s)\n", count=2),
        Invalid("import flax.jax_utils as ju\nimport functools\nr = functools.partial(ju.replicate, devices=d)\n"),
    ]
