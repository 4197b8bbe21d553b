from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class PositionalSharding(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.sharding.PositionalSharding` (also reachable as
    `jax.experimental.PositionalSharding`).

    ## Why is this bad
    `PositionalSharding` described a layout by the position of devices in an array; it was
    deprecated in favour of named meshes and is gone from current JAX (`jax.sharding` in 0.10 has
    no such name), so the import fails.

    ## Example
    ```python
    from jax.sharding import PositionalSharding

    sharding = PositionalSharding(jax.devices()).reshape(4, 2)
    ```

    ## Use instead
    ```python
    mesh = jax.make_mesh((4, 2), ("x", "y"))
    sharding = NamedSharding(mesh, P("x", "y"))
    ```

    ## Fix safety
    No fix yet. Rewriting `.reshape(...)`/`.replicate(...)` chains into a mesh and a
    `PartitionSpec` can change device placement, so the planned fix is unsafe.

    ## References
    - [Distributed arrays and automatic parallelization](https://docs.jax.dev/en/latest/sharded-computation.html)
    """

    code = "JM301"
    name = "positional-sharding"
    summary = "`jax.sharding.PositionalSharding` is removed; use `NamedSharding` over a mesh"
    trigger_words = ("PositionalSharding",)
    jax_versions = "deprecated in 0.6.0, removed in 0.7.0 (unconfirmed in JAX's changelog)"

    VALID = [
        Valid("from jax.sharding import NamedSharding\ns = NamedSharding(mesh, spec)\n"),
        Valid("class PositionalSharding:\n    pass\n\ns = PositionalSharding()\n"),
        Valid("from mylib.sharding import PositionalSharding\n"),
    ]
    INVALID = [
        Invalid("from jax.sharding import PositionalSharding\ns = PositionalSharding(devs)\n"),
        Invalid("import jax\ns = jax.sharding.PositionalSharding(jax.devices())\n"),
        Invalid("import jax.sharding as shd\ns = shd.PositionalSharding(devs).reshape(4, 2)\n"),
        Invalid("from jax.experimental import PositionalSharding as PS\n"),
    ]
