"""JM501: arrays committed to different devices or shardings meet in one computation."""

from __future__ import annotations

import ast
import itertools

from jaxmigrate.lint.patterns import JIT, decorated_by, own_nodes
from jaxmigrate.lint.placement import DEVICE_PUT, Committed, PlacementWalk
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.names import OpaqueBinding, ValueBinding

ERROR = "ValueError: Received incompatible devices for jitted computation"


class CommittedDeviceMismatch(Rule):
    """
    ## What it does
    Finds two arrays explicitly placed with `jax.device_put` on different single devices, or one on
    a single device and one on a multi-device sharding, that are then combined in one operation
    (`a + b`, a `jax.numpy` / `jax.lax` call) or passed to one jitted function.

    ## Why is this bad
    `jax.device_put(x, device_or_sharding)` *commits* an array: JAX never moves it implicitly.
    When committed arguments disagree, every operation fails at run time (checked with jax 0.10.2
    on 8 CPU devices):
    `ValueError: Received incompatible devices for jitted computation. Got argument x of add with
    shape float32[16] and with device ids [0] on platform CPU and argument y of add with shape
    float32[16] and with device ids [0, 1, 2, 3, 4, 5, 6, 7] on platform CPU`.
    pmap code often parks a value on `jax.devices()[0]`; once the rest of the program runs on a
    mesh, that value collides with the sharded batch.

    ## Example
    ```python
    w = jax.device_put(w, jax.devices()[0])
    x = jax.device_put(x, NamedSharding(mesh, P("data")))
    y = step(w, x)  # step is jax.jit-ed
    ```

    ## Use instead
    ```python
    w = jax.device_put(w, NamedSharding(mesh, P()))  # replicated on the same mesh
    x = jax.device_put(x, NamedSharding(mesh, P("data")))
    y = step(w, x)
    ```
    or leave `w` uncommitted (no `device_put`): uncommitted arrays move to where they are needed.

    ## Confidence
    Placements are tracked through plain assignments in straight-line code of one function or
    module body; a name rebound in a branch, loop or second assignment is forgotten. Two shardings
    are never compared (they may share a mesh), nor are `jax.devices()` and `jax.local_devices()`
    indices. A multi-device sharding is assumed to span more than one device. Only operators,
    `jax.numpy`/`jax.lax` calls and functions wrapped by `jax.jit` count as meeting points.

    ## Fix safety
    No fix: which placement is right is the author's choice.

    ## References
    - https://docs.jax.dev/en/latest/faq.html#controlling-data-and-computation-placement-on-devices
    - https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html
    """

    code = "JM501"
    name = "committed-device-mismatch"
    summary = "arrays committed to different devices or shardings meet in one computation"
    trigger_words = ("device_put",)
    reach = (DEVICE_PUT,)  # committed only by a device_put
    jax_versions = "jax.Array (0.4.1+): committed arrays are never moved implicitly"

    def check_module(self, ctx):
        walk = PlacementWalk(ctx.names, lambda nodes: ", ".join(ctx.segment(n) for n in nodes))
        calls = [node for _, node in ctx.by_type.get(ast.Call, ())]
        functions = [node for t in (ast.FunctionDef, ast.AsyncFunctionDef) for _, node in ctx.by_type.get(t, ())]
        for body in walk.busy_scopes(ctx.tree, calls, functions):
            for stmt, env in walk.walk(body):
                for node in own_nodes([stmt]):
                    if isinstance(node, ast.BinOp):
                        self._meet(ctx, walk, env, node, [node.left, node.right])
                    elif isinstance(node, ast.Call) and self._computes(ctx, node.func):
                        self._meet(ctx, walk, env, node, [*node.args, *(k.value for k in node.keywords)])

    def _meet(self, ctx, walk, env, node, operands) -> None:
        committed = [(o, f) for o in operands if isinstance(f := walk.classify(o, env), Committed)]
        for (a, fa), (b, fb) in itertools.combinations(committed, 2):
            if fa.placement.conflicts_with(fb.placement):
                ctx.report(
                    node,
                    f"`{ctx.segment(a)}` is committed to `{fa.placement.text}` and"
                    f" `{ctx.segment(b)}` to `{fb.placement.text}`; combining them raises"
                    f" `{ERROR}`. Put both on the same device or sharding, or drop one"
                    " `device_put` so that array stays uncommitted.",
                )
                return

    def _computes(self, ctx, func: ast.expr) -> bool:
        names = ctx.names.candidates(func)
        if len(names) == 1 and next(iter(names)).startswith(("jax.numpy.", "jax.lax.")):
            return True
        if isinstance(func, ast.Call):  # jax.jit(f)(a, b)
            return ctx.names.qualified_name(func.func) in JIT
        if isinstance(func, ast.Name):
            bindings = ctx.names.bindings(func)
            if len(bindings) != 1:
                return False
            binding = bindings[0]
            if isinstance(binding, ValueBinding) and isinstance(binding.value, ast.Call):
                return ctx.names.qualified_name(binding.value.func) in JIT
            if isinstance(binding, OpaqueBinding):
                return decorated_by(ctx.names, binding.node, JIT)
        return False

    VALID = [
        Valid(  # both on the same device
            """
            import jax
            a = jax.device_put(1.0, jax.devices()[0])
            b = jax.device_put(2.0, jax.devices()[0])
            c = a + b
            """
        ),
        Valid(  # b is uncommitted: JAX moves it
            """
            import jax, jax.numpy as jnp
            a = jax.device_put(jnp.ones(8), jax.devices()[1])
            b = jnp.ones(8)
            c = a + b
            """
        ),
        Valid(  # rebound in a branch: no longer known
            """
            import jax
            a = jax.device_put(1.0, jax.devices()[0])
            b = jax.device_put(2.0, jax.devices()[1])
            if flag:
                b = jax.device_put(b, jax.devices()[0])
            c = a + b
            """
        ),
        Valid(  # a local `jax` is not jax
            """
            def f(jax):
                a = jax.device_put(1.0, jax.devices()[0])
                b = jax.device_put(2.0, jax.devices()[1])
                return a + b
            """
        ),
        Valid(  # passed to a plain Python function, not a computation
            """
            import jax
            a = jax.device_put(1.0, jax.devices()[0])
            b = jax.device_put(2.0, jax.devices()[1])
            save(a, b)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            a = jax.device_put(1.0, jax.devices()[0])
            b = jax.device_put(2.0, jax.devices()[1])
            c = a + b
            """
        ),
        Invalid(
            """
            import jax as J
            from jax.sharding import NamedSharding as NS, PartitionSpec as P

            @J.jit
            def step(w, x):
                return w * x

            def main(mesh, w, x):
                d0 = J.devices()[0]
                w = J.device_put(w, d0)
                x = J.device_put(x, NS(mesh, P("data")))
                return step(w, x)
            """
        ),
    ]
