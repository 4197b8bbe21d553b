"""JM509: a process's own batch handed to `jax.device_put` with a global, partitioned sharding."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import (
    NAMED_SHARDING, PARTITION_SPEC, argument, broadcast_copies, call_name, reads_call, single_value,
)
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.names import OpaqueBinding

MULTI_PROCESS = frozenset({"jax.distributed.initialize", "jax.process_index", "jax.process_count"})
GLOBAL_ARRAYS = frozenset({
    "jax.make_array_from_process_local_data", "jax.make_array_from_callback",
    "jax.make_array_from_single_device_arrays",
})
LOCAL = frozenset({"jax.local_devices", "jax.local_device_count"})
GLOBAL_DEVICES = frozenset({"jax.devices", "jax.device_count"})
MESH_CLASSES = frozenset({"jax.sharding.Mesh", "jax.experimental.maps.Mesh"})
ARRAY_OF = frozenset({"numpy.array", "numpy.asarray"})
# Seen with jax 0.10.2, two processes of 4 CPU devices (fixtures/runtime/sharp_local_device_mesh):
ERROR = "AssertionError: <class 'numpy.ndarray'> passed to device_put is not the same on each process."


class HostLocalBatchDevicePut(Rule):
    """
    ## What it does
    In a multi-process program (one that calls `jax.distributed.initialize`, `jax.process_index()`
    or `jax.process_count()`), finds `jax.device_put(x, NamedSharding(mesh, P(...)))` where the
    `PartitionSpec` splits at least one dimension and `x` is not already a global array.

    ## Why is this bad
    Under `pmap` each process fed its own slice of the batch to its own devices. A `NamedSharding`
    over a global mesh describes one global array: `jax.device_put` then expects every process to
    pass the *same* global value and cuts its own shards out of it. A per-process batch is not the
    same on each process, and jax 0.10.2 stops the program (two processes of 4 CPU devices,
    `fixtures/runtime/sharp_local_device_mesh`): `AssertionError: <class 'numpy.ndarray'> passed
    to device_put is not the same on each process.` Had the batches happened to agree, every
    process would have trained on the same examples.

    ## Example
    ```python
    jax.distributed.initialize()
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    batch = jax.device_put(local_batch, NamedSharding(mesh, P("data")))
    ```

    ## Use instead
    ```python
    batch = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local_batch)
    ```

    ## Confidence
    Only modules that show they run as several processes are looked at; a single-process program
    is never reported (there, local and global data coincide). The sharding must be a
    `NamedSharding(...)` call, written in the call or bound once to a name, whose spec is a
    `PartitionSpec(...)` with a non-`None` entry (a replicated `P()` is fine when every process
    passes the same value, and so are copies of one value along a new leading axis,
    `np.broadcast_to(x, (n, *np.shape(x)))` or a tree map of it, as `device_put_replicated` made
    them and JM302's fix writes them). Values made by `jax.make_array_from_process_local_data`,
    `make_array_from_callback` or `make_array_from_single_device_arrays` (directly or through a
    name bound once) are global already. A mesh of local devices is JM508's, not reported here,
    and so is a `Mesh` of a device list the function is given (`def put(tree, devices)`, or
    `devices = devices or default()` with a default that reads no `jax.devices()`): which
    devices its callers pass is not known here (the fix of JM302 writes
    `device_put_sharded(shards, devices)`, which took this process's devices only, in this form).

    ## Fix safety
    No fix: whether `x` holds this process's examples or a value every process shares is known
    only to the data pipeline.

    ## References
    - https://docs.jax.dev/en/latest/multi_process.html
    - https://docs.jax.dev/en/latest/_autosummary/jax.make_array_from_process_local_data.html
    """

    code = "JM509"
    name = "host-local-batch-device-put"
    summary = "a process's own batch put on a global partitioned sharding with `jax.device_put`"
    trigger_words = ("device_put",)
    reach = ("jax.device_put",)
    jax_versions = "any version with jax.Array (0.4.1+); checked on 0.10.2"

    VALID = [
        Valid(  # single process: nothing says otherwise
            "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n"
            "mesh = jax.make_mesh((8,), ('data',))\nb = jax.device_put(x, NamedSharding(mesh, P('data')))\n"
        ),
        Valid(  # the right call
            "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\njax.distributed.initialize()\n"
            "s = NamedSharding(jax.make_mesh((jax.device_count(),), ('data',)), P('data'))\n"
            "b = jax.make_array_from_process_local_data(s, x)\nc = jax.device_put(b, s)\n"
        ),
        Valid(  # replicated: every process passes the same parameters
            "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n"
            "if jax.process_index() == 0:\n    print('hi')\n"
            "p = jax.device_put(params, NamedSharding(mesh, P()))\n"
        ),
        Valid(  # a local mesh is JM508's
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "n = jax.process_count()\nmesh = Mesh(np.array(jax.local_devices()), ('d',))\n"
            "b = jax.device_put(x, NamedSharding(mesh, P('d')))\n"
        ),
        Valid(  # ... also when the device list has a name of its own
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "n = jax.process_count()\nlocal = np.array(jax.local_devices())\nmesh = Mesh(local, ('d',))\n"
            "b = jax.device_put(x, NamedSharding(mesh, P('d')))\n"
        ),
        Valid(  # the caller's devices, or a default of the module (flax's prefetch_to_device)
            "import jax\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "n = jax.process_count()\ndef put(shards, devices=None):\n    devices = devices or default_devices()\n"
            "    return jax.device_put(shards, NamedSharding(Mesh(devices, ('devices',)), P('devices')))\n"
        ),
        Valid(  # copies of one value, one per device: replicated, as JM302's fix places them
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "jax.distributed.initialize()\nstate = jax.device_put(\n"
            "    jax.tree.map(lambda x: np.broadcast_to(x, (jax.device_count(), *np.shape(x))), state),\n"
            "    NamedSharding(Mesh(jax.devices(), ('devices',)), P('devices')),\n)\n"
        ),
        Valid(  # ... and a mesh of the devices a caller passes (JM302's fix of device_put_sharded)
            "import jax\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "n = jax.process_count()\ndef put(shards, devices):\n"
            "    return jax.device_put(shards, NamedSharding(Mesh(devices, ('devices',)), P('devices')))\n"
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            jax.distributed.initialize()
            mesh = jax.make_mesh((jax.device_count(),), ("data",))
            batch = jax.device_put(local_batch, NamedSharding(mesh, P("data")))
            """
        ),
        Invalid(  # the caller's devices, or every process's
            """
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            n = jax.process_count()
            def put(shards, devices=None):
                devices = devices or jax.devices()
                return jax.device_put(shards, NamedSharding(Mesh(devices, ("devices",)), P("devices")))
            """
        ),
        Invalid(
            """
            import jax as J
            from jax import device_put as put
            sharding = J.NamedSharding(mesh, J.P(None, "model"))
            if J.process_count() > 1:
                y = put(shard_of_this_host, sharding)
            """
        ),
    ]

    def check_module(self, ctx):
        names = ctx.names
        calls = [(node, call_name(names, node)) for _, node in ctx.by_type.get(ast.Call, ())]
        if not any(name in MULTI_PROCESS for _, name in calls):
            return
        for call, name in calls:
            if name != "jax.device_put":
                continue
            value, sharding = argument(call, 0, "x"), argument(call, 1, "device")
            if value is None or sharding is None or not self._partitioned(names, sharding):
                continue
            if reads_call(names, value, GLOBAL_ARRAYS) or _reads_local_devices(names, sharding) \
                    or _mesh_of_devices_passed_in(names, sharding) or broadcast_copies(names, value):
                continue
            ctx.report(
                call,
                "in a multi-process program, `jax.device_put` onto a partitioned global sharding expects"
                f" the same global value on every process; a per-process batch fails (`{ERROR}`)."
                " Build the global array with `jax.make_array_from_process_local_data(sharding, local_batch)`",
            )

    @staticmethod
    def _partitioned(names, sharding: ast.expr) -> bool:
        if isinstance(sharding, ast.Name):
            sharding = single_value(names, sharding)
        if sharding is None or call_name(names, sharding) not in NAMED_SHARDING:
            return False
        spec = argument(sharding, 1, "spec")
        if isinstance(spec, ast.Name):
            spec = single_value(names, spec)
        if spec is None or call_name(names, spec) not in PARTITION_SPEC:
            return False
        return any(not (isinstance(a, ast.Constant) and a.value is None) for a in spec.args)


def _reads_local_devices(names, expr: ast.expr, depth: int = 4) -> bool:
    """Whether the sharding is built from this process's devices, through names bound once
    (``local = np.array(jax.local_devices()); mesh = Mesh(local, ...)``)."""
    for node in ast.walk(expr):
        if call_name(names, node) in LOCAL:
            return True
        if depth and isinstance(node, ast.Name):
            value = single_value(names, node)
            if value is not None and _reads_local_devices(names, value, depth - 1):
                return True
    return False


def _mesh_of_devices_passed_in(names, sharding: ast.expr) -> bool:
    """``NamedSharding(Mesh(devices, ...), ...)`` with ``devices`` (or ``np.array(devices)``) a
    parameter of the function: the caller's device list, not shown global. (jaxline's
    ``_device_put_sharded(tree, devices)`` is called with this process's devices;
    ``device_put_sharded`` took only those, and JM302's fix of it writes this form.)"""
    if isinstance(sharding, ast.Name):
        sharding = single_value(names, sharding)
    mesh = argument(sharding, 0, "mesh") if isinstance(sharding, ast.Call) else None
    if isinstance(mesh, ast.Name):
        mesh = single_value(names, mesh)
    if not isinstance(mesh, ast.Call) or call_name(names, mesh) not in MESH_CLASSES:
        return False
    devices = argument(mesh, 0, "devices")
    if isinstance(devices, ast.Call) and call_name(names, devices) in ARRAY_OF and len(devices.args) == 1:
        devices = devices.args[0]
    return _passed_in(names, devices)


def _passed_in(names, devices: ast.expr, seen: frozenset[int] = frozenset()) -> bool:
    """A parameter, or a name bound to ``<parameter> or <default>`` (flax's ``devices = devices or
    _pmap_device_order()``) whose default reads no global device list."""
    bindings = names.bindings(devices) if isinstance(devices, ast.Name) else []
    if not bindings:
        return False
    for binding in bindings:
        if isinstance(binding, OpaqueBinding) and isinstance(binding.node, ast.arg):
            continue
        value = getattr(binding, "value", None)
        if id(value) in seen:  # the binding being read: its other answers decide
            continue
        if not (isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(seen) < 4
                and _passed_in(names, value.values[0], seen | {id(value)})
                and not any(reads_call(names, other, GLOBAL_DEVICES) for other in value.values[1:])):
            return False
    return True
