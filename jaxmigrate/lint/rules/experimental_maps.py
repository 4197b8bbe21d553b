from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class ExperimentalMaps(LegacyNameRule):
    """
    ## What it does
    Reports every mention of the removed `jax.experimental.maps` module and what it held:
    `xmap` and `Mesh` (also the `jax.interpreters.pxla.Mesh` path). Importing the module itself
    is reported, since the import fails on current JAX.

    ## Why is this bad
    `jax.experimental.maps.Mesh` moved to `jax.sharding.Mesh` (deprecated in 0.4.1, removed in
    0.4.11); `xmap` and its module were deprecated in 0.4.26 and deleted in 0.4.31.

    ## Example
    ```python
    from jax.experimental.maps import Mesh, xmap
    ```

    ## Use instead
    ```python
    from jax.sharding import Mesh
    f = jax.shard_map(g, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    ```

    ## Fix safety
    No fix yet. `Mesh` is a safe rename; `xmap` has no mechanical replacement.

    ## References
    - [JAX 0.4.31 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-31-july-29-2024)
    """

    code = "JM303"
    name = "experimental-maps"
    summary = "`jax.experimental.maps` (`xmap`, `Mesh`) was removed"
    trigger_words = ("maps", "xmap", "Mesh")
    jax_versions = "Mesh: deprecated 0.4.1, removed 0.4.11; xmap/module: deprecated 0.4.26, removed 0.4.31"

    VALID = [
        Valid("from jax.sharding import Mesh\nm = Mesh(devs, ('x',))\n"),
        Valid("import jax.experimental.mesh_utils\n"),
        Valid("maps = {}\nmaps.xmap = 1\ny = maps.get('xmap')\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental import maps\nf = maps.xmap(g, in_axes=['i'])\n"),
        Invalid("from jax.experimental.maps import xmap, Mesh\n", count=2),
        Invalid("import jax\nm = jax.experimental.maps.Mesh(devs, ('x',))\n"),
        Invalid("import jax.experimental.maps\n"),
        Invalid("from jax.experimental.maps import *\nf = xmap(g)\n", count=2),
    ]
