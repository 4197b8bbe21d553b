from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class PositionalSharding(SiteFixes, LegacyNameRule):
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
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    sharding = NamedSharding(mesh, P("x", "y"))
    ```

    ## Fix safety
    Unsafe. A `PositionalSharding(devices)` chain of `.reshape`, `.replicate`, `.T`/`.transpose`
    with literal shapes and axes becomes `NamedSharding(Mesh(<same devices, same order>, names),
    P(...))`; variables derived from one another move together. Values and device placement are
    the same (the test suite runs both on 8 CPU devices, the old side on JAX 0.4.30, and compares
    which device holds which block). It is unsafe because `PositionalSharding` silently dropped
    size-1 leading grid dims for a value of lower rank, where `NamedSharding` raises a
    `ValueError` at the `device_put`. Chains with computed shapes, a grid no longer in flat order,
    `memory_kind=` or uses beyond the `Sharding` interface are kept, and the finding says why.

    ## References
    - [Distributed arrays and automatic parallelization](https://docs.jax.dev/en/latest/sharded-computation.html)
    """

    code = "JM301"
    name = "positional-sharding"
    summary = "`jax.sharding.PositionalSharding` is removed; use `NamedSharding` over a mesh"
    trigger_words = ("PositionalSharding",)
    jax_versions = "deprecated in 0.6.0, removed in 0.7.0 (unconfirmed in JAX's changelog)"

    fixable = Safety.UNSAFE
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_positional_sharding"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_positional_sharding"
    site_fix_message = "rewrite as `NamedSharding` over a `Mesh` of the same devices in the same order"

    VALID = [
        Valid("import jax\nname = 'jax.sharding.PositionalSharding'\n"),  # the name in a string: past the pre-filter, no use
        Valid("from jax.sharding import NamedSharding\ns = NamedSharding(mesh, spec)\n"),
        Valid("class PositionalSharding:\n    pass\n\ns = PositionalSharding()\n"),
        Valid("from mylib.sharding import PositionalSharding\n"),
        Valid(  # jax is imported, but the class is the module's own
            "import jax\n\nclass PositionalSharding:\n    pass\n\ns = PositionalSharding()\n"
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            from jax.sharding import PositionalSharding

            s = PositionalSharding(jax.devices()).reshape(4, 2).replicate(1)
            """,
            expected="""
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            s = NamedSharding(Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y")), P("x", None))
            """,
        ),
        Invalid("from jax.sharding import PositionalSharding\ns = PositionalSharding(devs)\n"),
        Invalid(
            "import jax\ns = jax.sharding.PositionalSharding(jax.devices())\n",
            expected="""
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            s = NamedSharding(Mesh(jax.devices(), ("x",)), P("x"))
            """,
        ),
        Invalid("import jax.sharding as shd\ns = shd.PositionalSharding(devs).reshape(4, 2)\n"),
        Invalid("from jax.experimental import PositionalSharding as PS\n"),
    ]
