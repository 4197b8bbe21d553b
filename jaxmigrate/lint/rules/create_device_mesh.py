from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class CreateDeviceMesh(LegacyNameRule):
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
    mesh = jax.make_mesh((4, 2), ("data", "model"))
    ```

    ## Fix safety
    No fix yet. The device order may differ, so the planned fix is unsafe.

    ## References
    - [Distributed arrays and automatic parallelization](https://docs.jax.dev/en/latest/sharded-computation.html)
    """

    code = "JM307"
    name = "create-device-mesh"
    summary = "`mesh_utils.create_device_mesh` is superseded by `jax.make_mesh`"
    trigger_words = ("create_device_mesh",)
    jax_versions = "superseded (still present in 0.10)"

    VALID = [
        Valid("import jax\nmesh = jax.make_mesh((4, 2), ('x', 'y'))\n"),
        Valid("def create_device_mesh(shape):\n    return shape\n\ncreate_device_mesh((2,))\n"),
        Valid("from jax.experimental import mesh_utils\nd = mesh_utils.create_hybrid_device_mesh(a, b)\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental import mesh_utils\nd = mesh_utils.create_device_mesh((4, 2))\n"),
        Invalid("from jax.experimental.mesh_utils import create_device_mesh as cdm\n"),
        Invalid("import jax\nd = jax.experimental.mesh_utils.create_device_mesh((8,))\n"),
    ]
