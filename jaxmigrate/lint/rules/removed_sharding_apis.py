from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class RemovedShardingApis(SiteFixes, LegacyNameRule):
    """
    ## What it does
    Reports every mention of a multi-device API that JAX removed between 0.4.0 and 0.10.2 and
    that no other JM3xx rule owns: `jax.experimental.global_device_array` (`GlobalDeviceArray`),
    `jax.experimental.gda_serialization`, `jax.sharding.MeshPspecSharding`, `OpShardingSharding`,
    `XLACompatibleSharding`, `PmapSharding`, `jax.experimental.pjit.FROM_GDA`, the pjit module's
    re-exports of `NamedSharding` and `with_sharding_constraint`, `ShardedDeviceArray`,
    `jax.sharding.use_mesh` and the `jax.experimental.shard` module. (`jax.experimental.maps` is
    JM303, `PartitionSpec`'s old homes JM304, `PositionalSharding` JM301.)

    ## Why is this bad
    The names are gone on current JAX: the module fails to import, or the attribute raises
    `AttributeError`, so a migrated program still fails to load.

    ## Example
    ```python
    from jax.sharding import MeshPspecSharding
    from jax.experimental.global_device_array import GlobalDeviceArray
    ```

    ## Use instead
    ```python
    from jax.sharding import NamedSharding
    # GlobalDeviceArray is jax.Array: jax.make_array_from_callback(shape, sharding, cb)
    ```

    ## Fix safety
    Safe renames where the old name was the same object under another name:
    `MeshPspecSharding` -> `NamedSharding`, `XLACompatibleSharding` -> `Sharding` (an alias of
    it in JAX 0.4.30), `jax.experimental.pjit.NamedSharding` / `with_sharding_constraint` ->
    `jax.sharding.NamedSharding` / `jax.lax.with_sharding_constraint`, `ShardedDeviceArray` ->
    `jax.Array`, `use_mesh` -> `jax.set_mesh`, `jax.experimental.shard.reshard` (`auto_axes`,
    `explicit_axes`) -> `jax.sharding.*`. No fix for the rest (GDA, `gda_serialization`,
    `FROM_GDA`, `PmapSharding`, `OpShardingSharding`): the replacement works differently, and the
    finding names it.

    ## References
    - [jax.Array migration](https://docs.jax.dev/en/latest/jax_array_migration.html)
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    """

    code = "JM309"
    name = "removed-sharding-api"
    summary = "a sharding or multi-device API JAX removed (GlobalDeviceArray, MeshPspecSharding, ...)"
    jax_versions = "each entry's own (symbols.toml): removed 0.4.7 - 0.10.0"

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.moved_names:analyse_removed_sharding_apis"
    site_codemod = "jaxmigrate.migrate.moved_names:rewrite"
    site_fix_message = "use the same class or function under its current name"

    VALID = [
        Valid("import jax\nname = 'jax.sharding.MeshPspecSharding'\n"),  # the name in a string: past the pre-filter, no use
        Valid("from jax.sharding import NamedSharding, Sharding\n"),
        Valid("from jax.experimental import array_serialization\n"),
        Valid("import jax\ny = jax.lax.with_sharding_constraint(x, s)\n"),
        Valid("class MeshPspecSharding:\n    pass\ns = MeshPspecSharding()\n"),
    ]
    INVALID = [
        Invalid("from jax.sharding import MeshPspecSharding\n", expected="from jax.sharding import NamedSharding as MeshPspecSharding\n"),
        Invalid(
            "import jax\ns = jax.sharding.MeshPspecSharding(mesh, spec)\n",
            expected="import jax\ns = jax.sharding.NamedSharding(mesh, spec)\n",
        ),
        Invalid("from jax.experimental.global_device_array import GlobalDeviceArray\n"),
        Invalid("import jax.experimental.gda_serialization as gs\n"),
        Invalid(
            "from jax.experimental.pjit import pjit, with_sharding_constraint\n",
            expected="from jax.experimental.pjit import pjit\nfrom jax.lax import with_sharding_constraint\n",
        ),
        Invalid("from jax.experimental.pjit import FROM_GDA\n"),
        Invalid("import jax\nok = isinstance(s, jax.sharding.XLACompatibleSharding)\n",
                expected="import jax\nok = isinstance(s, jax.sharding.Sharding)\n"),
    ]
