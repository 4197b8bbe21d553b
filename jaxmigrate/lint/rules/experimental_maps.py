from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class ExperimentalMaps(SiteFixes, LegacyNameRule):
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
    Safe for `Mesh`: `jax.experimental.maps.Mesh` was a deprecated re-export of the class
    `jax.sharding.Mesh` is, so the rename changes nothing but the import path. `from ... import
    Mesh as M` moves to `from jax.sharding import Mesh as M` (uses untouched); a dotted use keeps
    the user's `jax` alias; a module alias (`maps.Mesh`) is spelled from `jax`, adding `import jax`
    once. A module import (`import jax.experimental.maps as maps`) is rewritten, and removed, only
    when all it serves is `Mesh`. No fix for `xmap` (its named axes and resource mapping have no
    mechanical translation) nor for the module while xmap or anything else of it is used; the
    finding says which use keeps it. Star imports are reported only.

    ## References
    - [JAX 0.4.31 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-31-july-29-2024)
    - [JAX 0.4.11 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-11-may-31-2023)
    """

    code = "JM303"
    name = "experimental-maps"
    summary = "`jax.experimental.maps` (`xmap`, `Mesh`) was removed"
    trigger_words = ("maps", "xmap", "Mesh")
    jax_versions = "Mesh: deprecated 0.4.1, removed 0.4.11; xmap/module: deprecated 0.4.26, removed 0.4.31"

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.moved_names:analyse_experimental_maps"
    site_codemod = "jaxmigrate.migrate.moved_names:rewrite"
    site_fix_message = "use `jax.sharding.Mesh`, the same class"

    VALID = [
        Valid("import jax\nname = 'jax.experimental.maps.xmap'\n"),  # the name in a string: past the pre-filter, no use
        Valid("from jax.sharding import Mesh\nm = Mesh(devs, ('x',))\n"),
        Valid("import jax.experimental.mesh_utils\n"),
        Valid("maps = {}\nmaps.xmap = 1\ny = maps.get('xmap')\n"),
        Valid(  # jax.sharding's Mesh, in a module that imports jax.experimental for something else
            "import jax\nfrom jax.experimental import mesh_utils\nfrom jax.sharding import Mesh\n"
            "m = Mesh(mesh_utils.create_device_mesh((8,)), ('x',))\n"
        ),
    ]
    INVALID = [
        Invalid("from jax.experimental import maps\nf = maps.xmap(g, in_axes=['i'])\n"),
        Invalid(
            "from jax.experimental.maps import xmap, Mesh\n",
            expected="from jax.experimental.maps import xmap\nfrom jax.sharding import Mesh\n",
            count=2,
        ),
        Invalid(
            "import jax\nm = jax.experimental.maps.Mesh(devs, ('x',))\n",
            expected="import jax\nm = jax.sharding.Mesh(devs, ('x',))\n",
        ),
        Invalid("import jax.experimental.maps\n"),
        Invalid("from jax.experimental.maps import *\nf = xmap(g)\n", count=2),
        Invalid(
            "from jax.experimental.maps import Mesh as OldMesh  # the mesh\nm = OldMesh(devs, ('x',))\n",
            expected="from jax.sharding import Mesh as OldMesh  # the mesh\nm = OldMesh(devs, ('x',))\n",
        ),
        Invalid(
            "import jax.experimental.maps as maps\nm = maps.Mesh(devs, ('x',))\n",
            expected="import jax\nm = jax.sharding.Mesh(devs, ('x',))\n",
        ),
    ]
