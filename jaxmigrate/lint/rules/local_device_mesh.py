"""JM508: a mesh over this process's devices only, used for global-view shardings."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import (
    MESH_CONTEXTS, NAMED_SHARDING, SHARD_MAPS, STACK_FUNCTIONS, TREE_MAPS, argument, broadcast_copies, call_name,
    call_name_among, calls_to, reads_call, single_value,
)
from jaxmigrate.lint.rule import Invalid, Rule, Valid

LOCAL_DEVICES = frozenset({"jax.local_devices"})
GLOBAL_DEVICES = frozenset({"jax.devices"})
LOCAL_COUNT = frozenset({"jax.local_device_count"})
DEVICE_PUT = frozenset({"jax.device_put"})
MESH_CLASSES = frozenset({"jax.sharding.Mesh", "jax.experimental.maps.Mesh"})
_MESH_USERS = NAMED_SHARDING | MESH_CONTEXTS | SHARD_MAPS  # the calls check_module asks about


class LocalDeviceMesh(Rule):
    """
    ## What it does
    Finds a mesh built from this process's devices - `Mesh(np.array(jax.local_devices()), ...)`,
    `jax.make_mesh(..., devices=jax.local_devices())` or `jax.make_mesh((jax.local_device_count(),),
    ...)` - that the module then uses for global-view computation: in a `NamedSharding`, as the
    context mesh (`jax.set_mesh`, `with mesh:`) or as a `shard_map`'s `mesh=`.

    ## Why is this bad
    `pmap` code counts local devices on purpose: pmap maps over all processes' devices and each
    process feeds its local slice. A mesh is global: with several processes (`jax.distributed`) a
    mesh of local devices makes each process run its own computation, so "global" reductions are
    silently per-process. Shown by `fixtures/runtime/sharp_local_device_mesh` (2 processes of 4 CPU
    devices on one host, jax 0.10.2): `jnp.mean` of a batch sharded over a local-devices mesh gives
    3.5 on process 0 and 103.5 on process 1; over `Mesh(jax.devices(), ...)` with
    `jax.make_array_from_process_local_data` both get 53.5, while `pmap(psum)` over local devices
    sums all 8. `jax.make_mesh((jax.local_device_count(),), ...)` takes process 0's devices on
    every process. Feeding the per-process batch to a global sharding with `jax.device_put`
    instead fails: `AssertionError: <class 'numpy.ndarray'> passed to device_put is not the same
    on each process.` On one process local and global devices coincide: nothing fails there.

    ## Example
    ```python
    mesh = Mesh(np.array(jax.local_devices()), ("data",))
    batch = jax.device_put(local_batch, NamedSharding(mesh, P("data")))
    ```

    ## Use instead
    ```python
    mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(AxisType.Auto,))
    batch = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local_batch)
    ```

    ## Confidence
    Not reported: the sharding of a `jax.device_put` whose value has one slice per local device (it
    reads `jax.local_device_count()`, is copies of one value made by `broadcast_to`, or stacks a
    list of shards leaf by leaf, `jax.tree.map(lambda *xs: np.stack(xs), *shards)`), pmap's
    convention, per process on purpose - what `device_put_replicated` and `device_put_sharded` did
    (the latter through this very `NamedSharding(Mesh(devices, ...), P(...))`) and JM302's fix
    writes. Otherwise reported only when the construction reads `jax.local_devices()` / is shaped by
    `jax.local_device_count()` alone (never `jax.devices()`; a `(jax.process_count(),
    jax.local_device_count())` shape is global), and the mesh - written inline or through a name
    bound once - reaches a `NamedSharding`, a context mesh or a `shard_map`. A mesh used for nothing
    else (e.g. only to list devices for `pmap`) is not reported. Single-host programs are reported
    too: the code is correct there only by coincidence - unless the function that builds the mesh
    refuses several processes itself (`if jax.process_count() > 1: raise ...`, as brax's ES and ARS
    trainers do, and the exact pmap rewrite then builds such a mesh there).

    ## Fix safety
    No fix: a global mesh also needs global arrays (`jax.make_array_from_process_local_data`),
    which the data pipeline must provide.

    ## References
    - https://docs.jax.dev/en/latest/multi_process.html
    - https://docs.jax.dev/en/latest/_autosummary/jax.make_array_from_process_local_data.html
    """

    code = "JM508"
    name = "local-device-mesh"
    summary = "mesh over `jax.local_devices()` used for global-view shardings (per-process in multi-process runs)"
    trigger_words = ("local_devices", "local_device_count")
    reach = (*MESH_CLASSES, "jax.make_mesh")
    jax_versions = "any version with jax.Array (0.4.1+)"

    VALID = [
        Valid(  # global devices
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "m = Mesh(np.array(jax.devices()), ('d',))\ns = NamedSharding(m, P('d'))\n"
        ),
        Valid(  # the documented global (process, local-device) mesh
            "import jax\nfrom jax import NamedSharding, P\n"
            "m = jax.make_mesh((jax.process_count(), jax.local_device_count()), ('i', 'j'))\n"
            "s = NamedSharding(m, P('i', 'j'))\n"
        ),
        Valid(  # only feeds pmap
            "import jax, numpy as np\nfrom jax.sharding import Mesh\n"
            "m = Mesh(np.array(jax.local_devices()), ('i',))\nf = jax.pmap(g, devices=list(m.devices.flat))\n"
        ),
        Valid(  # one slice per local device: pmap's convention, as JM302's fix places it
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "params = jax.device_put(\n"
            "    jax.tree.map(lambda x: np.broadcast_to(x, (jax.local_device_count(), *np.shape(x))), params),\n"
            "    NamedSharding(Mesh(jax.local_devices(), ('devices',)), P('devices')),\n)\n"
        ),
        Valid(  # copies of one value for two of the devices, as JM302's fix places device_put_replicated's
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "devices = jax.local_devices()\n"
            "both = jax.device_put(\n    jax.tree.map(lambda x: np.broadcast_to(x, (2, *np.shape(x))), table),\n"
            "    NamedSharding(Mesh([devices[1], devices[0]], ('devices',)), P('devices')),\n)\n"
        ),
        Valid(  # one shard per device, stacked: device_put_sharded's own placement, as JM302's fix writes it
            "import jax, numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "devices = jax.local_devices()\n"
            "batch = jax.device_put(\n    jax.tree.map(lambda *xs: np.stack(xs), *list(shards)),\n"
            "    NamedSharding(Mesh(devices, ('devices',)), P('devices')),\n)\n"
        ),
        Valid(  # a function that refuses several processes: local devices are every device
            "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n"
            "def train(x, n):\n    if jax.process_count() > 1:\n        raise ValueError('one process only')\n"
            "    mesh = jax.make_mesh((n,), ('d',), devices=jax.local_devices()[:n])\n"
            "    return jax.device_put(x, NamedSharding(mesh, P('d')))\n"
        ),
        Valid(  # a local `local_devices`
            "import jax\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
            "def local_devices():\n    return jax.devices()\nm = Mesh(local_devices(), ('d',))\ns = NamedSharding(m, P())\n"
        ),
    ]
    INVALID = [
        Invalid(  # the refusal guards another function
            """
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            def check():
                if jax.process_count() > 1:
                    raise ValueError("one process only")
            def train(x, n):
                mesh = jax.make_mesh((n,), ("d",), devices=jax.local_devices()[:n])
                return jax.device_put(x, NamedSharding(mesh, P("d")))
            """
        ),
        Invalid(
            """
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            devices = np.array(jax.local_devices())
            mesh = Mesh(devices, ("data",))
            batch = jax.device_put(x, NamedSharding(mesh, P("data")))
            """
        ),
        Invalid(
            """
            import jax as J
            from jax import local_device_count as ldc
            n = ldc()
            mesh = J.make_mesh((n,), ("data",))
            with J.set_mesh(mesh):
                y = step(x)
            s = J.NamedSharding(J.make_mesh((8,), ("d",), devices=J.local_devices()), J.P())
            """,
            count=2,
        ),
    ]

    def check_module(self, ctx):
        names, uses = ctx.names, {}
        per_device = self._per_device_placements(ctx)
        # The `with` statements and calls, in walk order (not every node of the tree).
        for _, node in sorted([*ctx.by_type.get(ast.With, ()), *ctx.by_type.get(ast.Call, ())]):
            if isinstance(node, ast.With):
                for item in node.items:
                    uses.setdefault(id(item.context_expr), "a `with` context mesh")
            elif (name := call_name_among(names, node, _MESH_USERS)) in NAMED_SHARDING and node.args:
                if id(node) not in per_device:
                    uses.setdefault(id(node.args[0]), "a `NamedSharding`")
            elif name in MESH_CONTEXTS and node.args:
                uses.setdefault(id(node.args[0]), "the context mesh")
            elif name in SHARD_MAPS and (mesh := argument(node, 1, "mesh")) is not None:
                uses.setdefault(id(mesh), "a `shard_map`")
        for node in ctx.nodes if uses else ():
            if id(node) in uses:
                mesh = single_value(names, node) if isinstance(node, ast.Name) else node
                if mesh is not None and self._is_local_mesh(ctx, mesh) and not self._one_process(ctx, mesh):
                    ctx.report(
                        mesh,
                        f"mesh over this process's devices only, used for {uses[id(node)]}: with several"
                        " processes each one computes on its own devices and reductions over the"
                        " mesh are silently per-process (pmap counted local devices on purpose; a mesh"
                        " does not). Build it from `jax.devices()` (`jax.make_mesh((jax.device_count(),),"
                        " ...)`) and make batches with `jax.make_array_from_process_local_data`",
                    )

    @staticmethod
    def _one_process(ctx, mesh: ast.expr) -> bool:
        """The function building the mesh refuses several processes (``if jax.process_count() >
        1: raise``): local and global devices are the same there, by the code's own check (the
        exact pmap rewrite builds such meshes in brax's ES and ARS)."""
        from jaxmigrate.migrate._pmap_sites import planner_of

        return planner_of(ctx.module).refuses_processes_at(mesh)

    def _per_device_placements(self, ctx) -> set[int]:
        """The shardings of `jax.device_put(value, sharding)` calls whose value has one slice per
        local device (it reads `jax.local_device_count()` or `len(jax.local_devices())`): pmap's
        calling convention, per process on purpose, as `device_put_replicated` placed it and as
        JM302's fix writes it. Not the global-view use this rule is about."""
        found = set()
        for node in ctx.by_type.get(ast.Call, ()):
            call = node[1]
            if call_name_among(ctx.names, call, DEVICE_PUT) not in DEVICE_PUT:
                continue
            value, sharding = argument(call, 0, "x"), argument(call, 1, "device")
            if value is None or not isinstance(sharding, ast.Call):
                continue
            if reads_call(ctx.names, value, LOCAL_COUNT) or reads_call(ctx.names, value, LOCAL_DEVICES) \
                    or self._stacked_shards(ctx, value) or broadcast_copies(ctx.names, value):
                found.add(id(sharding))
        return found

    @staticmethod
    def _stacked_shards(ctx, value: ast.expr) -> bool:
        """``jax.tree.map(lambda *xs: np.stack(xs), *shards)``: a list of shards stacked leaf by leaf,
        one slice per entry, as ``device_put_sharded`` stacked them onto its devices (and as JM302's
        fix writes it)."""
        if not (isinstance(value, ast.Call) and call_name_among(ctx.names, value, TREE_MAPS) in TREE_MAPS
                and len(value.args) >= 2 and isinstance(value.args[1], ast.Starred)):
            return False
        leaf = value.args[0]
        if not (isinstance(leaf, ast.Lambda) and leaf.args.vararg is not None and not leaf.args.args):
            return False
        body = leaf.body
        return (isinstance(body, ast.Call) and call_name_among(ctx.names, body, STACK_FUNCTIONS) in STACK_FUNCTIONS
                and len(body.args) == 1 and not body.keywords and isinstance(body.args[0], ast.Name)
                and body.args[0].id == leaf.args.vararg.arg)

    def _is_local_mesh(self, ctx, call: ast.expr) -> bool:
        names, name = ctx.names, call_name(ctx.names, call)
        if name in MESH_CLASSES:
            devices = argument(call, 0, "devices")
        elif name == "jax.make_mesh":
            devices = argument(call, 2, "devices")
            shape = argument(call, 0, "axis_shapes")
            if isinstance(shape, ast.Name):
                shape = single_value(names, shape)
            if devices is None and isinstance(shape, (ast.Tuple, ast.List)) and len(shape.elts) == 1:
                (size,) = shape.elts
                size = single_value(names, size) if isinstance(size, ast.Name) else size
                return size is not None and calls_to(names, size, LOCAL_COUNT)
        else:
            return False
        return devices is not None and reads_call(names, devices, LOCAL_DEVICES) and not reads_call(
            names, devices, GLOBAL_DEVICES)
