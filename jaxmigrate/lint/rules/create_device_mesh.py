from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class CreateDeviceMesh(SiteFixes, LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.experimental.mesh_utils.create_device_mesh`.

    ## Why is this bad
    It is superseded, not deprecated (JAX 0.10 still ships it), so it is reported whatever the
    target version: `jax.make_mesh` builds the `Mesh` in one call, picks a device order suited to
    the hardware, and sets axis types, where `create_device_mesh` returns a bare device array
    that still has to be wrapped in `Mesh(...)`.

    ## Example
    ```python
    devices = mesh_utils.create_device_mesh((4, 2))
    mesh = Mesh(devices, ("data", "model"))
    ```

    ## Use instead
    ```python
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    ```

    ## Fix safety
    Unsafe. `Mesh(create_device_mesh(shape), names)` (directly, or through a variable used only
    there) becomes `jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * n)`: the Auto axis
    types keep what `Mesh(...)` gave (`make_mesh` defaults to Explicit in 0.10). On CPU and GPU both
    build `jax.devices()` reshaped (checked on 8 CPU devices); on TPU v5e `make_mesh` may split
    physical axes and order devices differently, hence unsafe. A device array used for anything
    else than one `Mesh` is kept (`create_device_mesh` still exists).

    ## References
    - [Distributed arrays and automatic parallelization](https://docs.jax.dev/en/latest/sharded-computation.html)
    """

    code = "JM307"
    name = "create-device-mesh"
    summary = "`mesh_utils.create_device_mesh` is superseded by `jax.make_mesh`"
    trigger_words = ("create_device_mesh",)
    jax_versions = "superseded (still present in 0.10)"

    fixable = Safety.UNSAFE
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_create_device_mesh"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_create_device_mesh"
    site_fix_message = "rewrite `Mesh(create_device_mesh(shape), names)` as `jax.make_mesh` with Auto axes"

    VALID = [
        Valid("from jax.experimental import mesh_utils\nname = 'mesh_utils.create_device_mesh'\n"),  # the name in a string: past the pre-filter, no use
        Valid("import jax\nmesh = jax.make_mesh((4, 2), ('x', 'y'))\n"),
        Valid("def create_device_mesh(shape):\n    return shape\n\ncreate_device_mesh((2,))\n"),
        Valid("from jax.experimental import mesh_utils\nd = mesh_utils.create_hybrid_device_mesh(a, b)\n"),
        Valid(  # jax is imported, but the function is the module's own
            "import jax\n\ndef create_device_mesh(shape):\n    return shape\n\ncreate_device_mesh((2,))\n"
        ),
    ]
    INVALID = [
        Invalid(
            """
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ('x', 'y'))
            """,
            expected="""
            import jax

            mesh = jax.make_mesh((4, 2), ('x', 'y'), axis_types=(jax.sharding.AxisType.Auto,) * 2)
            """,
        ),
        Invalid("from jax.experimental import mesh_utils\nd = mesh_utils.create_device_mesh((4, 2))\n"),
        Invalid("from jax.experimental.mesh_utils import create_device_mesh as cdm\n"),
        Invalid("import jax\nd = jax.experimental.mesh_utils.create_device_mesh((8,))\n"),
    ]
