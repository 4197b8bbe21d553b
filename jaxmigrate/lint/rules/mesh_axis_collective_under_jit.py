"""JM402: a collective over a mesh axis, in a function run by plain `jax.jit` (no shard_map binds it)."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import (
    JIT, SHARD_MAPS, argument, call_name, literal_strings, own_nodes, refers_to,
)
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.lint.rules.unbound_collective_axis import COLLECTIVES, DEFINERS

MESHES = {name: where for name, where in DEFINERS.items() if name not in ("jax.pmap", "jax.vmap")}
MAPS = {"jax.pmap": 1, "jax.vmap": 3}  # position of axis_name
MAP_WORDS = ("shard_map", "smap", "xmap", "shmap")


class MeshAxisCollectiveUnderJit(Rule):
    """
    ## What it does
    Finds a collective (`lax.psum`, `pmean`, `all_gather`, `ppermute`, `axis_index`, ...) over an
    axis name that a mesh of the module defines, inside a function that is run by plain `jax.jit`
    (`@jax.jit`, `@partial(jax.jit, ...)` or `jax.jit(f)`), in a module where no `shard_map`,
    `pmap` or `vmap(axis_name=...)` binds that name - what is left when a `pmap` is swapped for a
    `jit` and the body keeps its collectives. JM401 (unbound-collective-axis) reports names that
    nothing defines; this rule reports names a mesh defines but nothing binds: a mesh (even a
    context mesh from `jax.set_mesh`) names axes for shardings, it does not map a function over them.

    ## Why is this bad
    Verified with jax 0.10.2 on 8 CPU devices, also inside `with jax.set_mesh(mesh):`: `@jax.jit`
    over `v - lax.pmean(v, "data")` with `mesh = jax.make_mesh((8,), ("data",))` raises
    `NameError: Found an unbound axis name: data. To fix this, please call psum under
    `jax.shard_map`.`; `axis_index` / `ppermute` the same naming themselves, `all_gather` raises
    `NameError: unbound axis name: data`.

    ## Example
    ```python
    mesh = jax.make_mesh((8,), ("data",))
    @jax.jit
    def step(g):
        return lax.pmean(g, "data")
    ```

    ## Use instead
    A global-view `jit` over arrays sharded on `mesh` already computes over the whole batch
    (GSPMD inserts the reduction): `return g` for a mean of per-device means of equal shards, or
    `jnp.mean` over the batch. To keep per-device code, map it:
    `jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P("data"), out_specs=P()))`.

    ## Confidence
    Silent when the module names `shard_map` / `smap` / `xmap` anywhere, when a `pmap` / `vmap`
    (or any call with `axis_name=` / `spmd_axis_name=`) may bind the name, and when the function
    is used other than by being called or passed to `jax.jit` (it may be mapped elsewhere).
    Only literal axis names are compared.

    ## Fix safety
    No fix: dropping a collective is only the same math for some reductions (see the pmap
    migration's global-view codemod), and mapping the function changes its calling convention.

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://docs.jax.dev/en/latest/notebooks/shard_map.html
    """

    code = "JM402"
    name = "mesh-axis-collective-under-jit"
    summary = "collective over a mesh axis in a function run by plain `jax.jit`, with nothing binding the axis"
    trigger_words = tuple(short.rsplit(".", 1)[1] for short in COLLECTIVES)  # each spells its own name
    reach = tuple(MESHES)  # only an axis a mesh names is reported
    jax_versions = "any version"

    VALID = [
        Valid(  # mapped by shard_map: the mesh axis is bound
            """
            import jax
            from jax import lax
            mesh = jax.make_mesh((8,), ("data",))
            def step(g):
                return lax.pmean(g, "data")
            f = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=P("data"), out_specs=P()))
            """
        ),
        Valid(  # a pmap binds the same name
            """
            import jax
            from jax import lax
            mesh = jax.make_mesh((8,), ("i",))
            @jax.jit
            def g(x):
                return lax.psum(x, "i")
            h = jax.pmap(lambda x: g(x), axis_name="i")
            """
        ),
        Valid(  # passed to a helper that may map it
            """
            import jax
            from jax import lax
            mesh = jax.make_mesh((8,), ("data",))
            @jax.jit
            def step(g):
                return lax.pmean(g, "data")
            run_mapped(step, mesh)
            """
        ),
        Valid(  # not a mesh axis: JM401's business
            "import jax\nfrom jax import lax\nm = jax.make_mesh((8,), ('data',))\n"
            "f = jax.jit(lambda v: lax.psum(v, 'batch'))\n"
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            from jax import lax
            mesh = jax.make_mesh((8,), ("data",))
            @jax.jit
            def step(g):
                return g - lax.pmean(g, axis_name="data")
            y = step(x)
            """
        ),
        Invalid(
            """
            import functools
            import jax as J
            from jax.lax import axis_index as ai, psum
            mesh = J.sharding.Mesh(J.devices(), ("data",))
            def loss(x):
                return psum(x * ai("data"), "data")
            step = functools.partial(J.jit, donate_argnums=0)(loss)
            g = J.jit(lambda v: psum(v, ("data",)))
            """,
            count=3,
        ),
    ]

    def check_module(self, ctx):
        names, mesh_axes, bound = ctx.names, set(), set()
        if any(word in ctx.names_by_id or word in ctx.attributes for word in MAP_WORDS) or any(
            node.name.rpartition(".")[2] in MAP_WORDS for _, node in ctx.by_type.get(ast.alias, ())
        ):
            return
        nodes = list(ctx.nodes)
        for _, node in ctx.by_type.get(ast.Call, ()):
            name = call_name(names, node)
            if name in SHARD_MAPS:
                return
            if name in MESHES:
                mesh_axes |= literal_strings(argument(node, *MESHES[name])) or set()
            if name in COLLECTIVES:
                continue  # uses a name, binds none
            values = [k.value for k in node.keywords if k.arg in ("axis_name", "spmd_axis_name")]
            if name in MAPS and (value := argument(node, MAPS[name], "axis_name")) is not None:
                values.append(value)
            for value in values:
                if (axes := literal_strings(value)) is None:
                    return  # a computed binding may bind anything
                bound |= axes
        if not mesh_axes - bound:
            return  # no axis a collective could name without a binding
        for function, jitted_at in self._jitted(ctx, nodes):
            body = function.body if isinstance(function, ast.FunctionDef) else [function.body]
            for node in own_nodes(body):
                if (name := call_name(names, node)) in COLLECTIVES:
                    axes = sorted((literal_strings(argument(node, *COLLECTIVES[name])) or set()) & mesh_axes - bound)
                    if axes:
                        short = name.rsplit(".", 1)[1]
                        ctx.report(
                            node,
                            f"`{short}` over mesh axis {axes[0]!r} in a function run by plain `jax.jit`"
                            f" (line {jitted_at.lineno}); a mesh defines the name but only shard_map/pmap/vmap"
                            f" binds it, so tracing raises `NameError: Found an unbound axis name: {axes[0]}`."
                            " Under a global-view jit drop the collective (GSPMD reduces over the sharded"
                            " batch), or wrap the function in `jax.shard_map(..., mesh=mesh)`",
                        )

    def _jitted(self, ctx, nodes):
        """(function, where it is jitted) for defs and lambdas that only ever run under plain jit."""
        names = ctx.names
        parents = {id(c): n for n in nodes for c in ast.iter_child_nodes(n)}
        loads: dict[str, list[ast.Name]] = {}
        for node in nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                loads.setdefault(node.id, []).append(node)
        for node in nodes:
            if isinstance(node, ast.Call) and call_name(names, node) in JIT and node.args:
                if isinstance(node.args[0], ast.Lambda):
                    yield node.args[0], node
        for function in nodes:
            if not isinstance(function, ast.FunctionDef):
                continue
            decorators = function.decorator_list
            jitted_at = [function] if decorators and all(_is_jit(names, d) for d in decorators) else []
            if decorators and not jitted_at:
                continue  # another decorator (a mapping?) wraps it
            for use in loads.get(function.name, ()):
                if not refers_to(names, use, function):
                    continue
                parent = parents.get(id(use))
                if isinstance(parent, ast.Call) and parent.func is use:
                    continue  # called: runs under whatever runs the caller
                if isinstance(parent, ast.Call) and parent.args and parent.args[0] is use and _is_jit(names, parent.func):
                    jitted_at.append(parent)
                    continue
                break  # passed somewhere else: may be mapped there
            else:
                if jitted_at:
                    yield function, jitted_at[0]


def _is_jit(names, expr: ast.expr) -> bool:
    """`jax.jit` itself, or `jax.jit(...)` / `partial(jax.jit, ...)` used as a decorator."""
    if isinstance(expr, ast.Call) and not names.resolve(expr):
        expr = expr.func
    return bool(names.resolve(expr)) and all(t.name in JIT for t in names.resolve(expr))
