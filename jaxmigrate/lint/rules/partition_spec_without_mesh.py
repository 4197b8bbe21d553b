"""JM507: a bare `PartitionSpec` passed where a sharding is needed, in a module that never sets a mesh."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import (
    JIT, MESH_CONTEXTS, MESH_MAKERS, PARTITION_SPEC, argument, call_name, calls_to, single_value,
)
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.names import LOCAL, PARTIAL

WSC = frozenset({"jax.lax.with_sharding_constraint", "jax.experimental.pjit.with_sharding_constraint"})
SPECS = PARTITION_SPEC | {"jax.experimental.PartitionSpec", "jax.experimental.pjit.PartitionSpec"}

FULL, LEGACY = "full", "legacy"  # what entering a `with` item may do to the context mesh


def _error(name: str | None, argname: str) -> str:
    if name in WSC:
        return "RuntimeError: with_sharding_constraint requires a non-empty mesh in context"
    if name == "jax.device_put":
        return "ValueError: Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to device_put"
    return f"RuntimeError: jit requires a non-empty mesh in context if you are passing `PartitionSpec`s to {argname}"


class PartitionSpecWithoutMesh(Rule):
    """
    ## What it does
    Finds a bare `PartitionSpec` (or a tuple/list/dict of them) passed to
    `lax.with_sharding_constraint`, to `jax.jit(in_shardings=..., out_shardings=...)` (also via
    `partial(jax.jit, ...)`) or to `jax.device_put`, in a module that builds a mesh but never makes
    it the context mesh (`jax.set_mesh`, `jax.sharding.use_mesh`, `with mesh:`).

    ## Why is this bad
    A `PartitionSpec` names mesh axes, not a mesh; JAX resolves it against the context mesh and
    fails when there is none. Verified with jax 0.10.2 on 8 CPU devices:
    `RuntimeError: with_sharding_constraint requires a non-empty mesh in context if you are
    passing `PartitionSpec`s to shardings. You can define a context mesh via `jax.set_mesh(mesh)`.
    Alternatively, provide `Sharding`s to shardings and then the mesh context manager is not
    required.`; `jax.jit(f, in_shardings=P("data"))(x)` raises `RuntimeError: jit requires a
    non-empty mesh in context if you are passing `PartitionSpec`s to in_shardings.` (the same for
    `out_shardings`); `jax.device_put(x, P("data"))` raises `ValueError: Please set a mesh via
    `jax.set_mesh` if a PartitionSpec is passed to device_put`. Legacy `with mesh:` (Auto axes)
    satisfies `with_sharding_constraint` but not `jit`'s in/out shardings (same error) nor
    `jax.device_put` (same error).

    ## Example
    ```python
    mesh = jax.make_mesh((8,), ("data",))
    step = jax.jit(f, in_shardings=P("data"))
    ```

    ## Use instead
    ```python
    step = jax.jit(f, in_shardings=NamedSharding(mesh, P("data")))
    ```
    or call it inside `with jax.set_mesh(mesh):`.

    ## Confidence
    Reported only in a module that builds a mesh itself (`make_mesh`, `Mesh`) and nowhere calls
    `set_mesh` / `use_mesh` / `__enter__` / `enter_context`, nor enters a `with` whose item may
    set a context mesh (a name or attribute not bound once in view, a call not resolved to an
    imported non-mesh API). A `with` over what surely is a `Mesh` (a mesh constructor, or a name
    bound once to one) is the legacy context: only `with_sharding_constraint` is then left alone.
    A module without a mesh of its own (a library) is never reported: its callers may set one.
    Specs are followed through names bound once; computed shardings are left alone.

    ## Fix safety
    No fix: whether to wrap the spec in `NamedSharding(mesh, ...)` or to set a context mesh (which
    also changes how tracing sees shardings) is the author's choice.

    ## References
    - https://docs.jax.dev/en/latest/sharded-computation.html
    - https://docs.jax.dev/en/latest/_autosummary/jax.set_mesh.html
    """

    code = "JM507"
    name = "partition-spec-without-mesh"
    summary = "bare `PartitionSpec` used as a sharding in a module that never sets a context mesh"
    trigger_words = ("with_sharding_constraint", "in_shardings", "out_shardings", "device_put")
    reach = tuple(MESH_MAKERS)  # only a module that builds a mesh is checked
    jax_versions = "PartitionSpec shardings resolve against the context mesh; checked on 0.10.2"

    VALID = [
        Valid(  # the module sets the mesh
            """
            import jax
            from jax.sharding import PartitionSpec as P
            mesh = jax.make_mesh((8,), ("data",))
            with jax.set_mesh(mesh):
                y = jax.jit(f, in_shardings=P("data"))(x)
            """
        ),
        Valid(  # the legacy `with mesh:` is enough for with_sharding_constraint
            """
            import jax
            from jax.sharding import Mesh, PartitionSpec as P
            mesh = Mesh(jax.devices(), ("data",))
            with mesh:
                y = jax.jit(lambda v: jax.lax.with_sharding_constraint(v, P("data")))(x)
            """
        ),
        Valid(  # NamedSharding carries its mesh
            "import jax\nfrom jax import P, NamedSharding as NS\nm = jax.make_mesh((8,), ('d',))\n"
            "y = jax.lax.with_sharding_constraint(x, NS(m, P('d')))\n"
        ),
        Valid(  # no mesh built here: a library whose callers set one
            "import jax\nfrom jax import P\ndef f(x):\n    return jax.lax.with_sharding_constraint(x, P('d'))\n"
        ),
        Valid(  # a context manager defined elsewhere may set the mesh
            "import jax\nfrom jax import P\nm = jax.make_mesh((8,), ('d',))\n"
            "with run_context(m):\n    y = jax.device_put(x, P('d'))\n"
        ),
        Valid(  # a local P is not jax's
            "import jax\nm = jax.make_mesh((8,), ('d',))\ndef P(*a):\n    return sharding_for(m, a)\n"
            "step = jax.jit(f, out_shardings=P('d'))\n"
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            from jax.sharding import PartitionSpec as P
            mesh = jax.make_mesh((8,), ("data",))
            step = jax.jit(f, in_shardings=(P("data"), P()), out_shardings=P())
            """,
            count=2,
        ),
        Invalid(
            """
            import functools
            import jax as J
            from jax.lax import with_sharding_constraint as wsc
            spec = J.P("data")
            mesh = J.sharding.Mesh(J.devices(), ("data",))
            @functools.partial(J.jit, out_shardings={"w": spec})
            def f(x):
                return {"w": wsc(x, spec)}
            """,
            count=2,
        ),
        Invalid(  # ... but not for jit's shardings nor device_put
            """
            import jax
            from jax.sharding import Mesh, PartitionSpec as P
            mesh = Mesh(jax.devices(), ("data",))
            with mesh:
                y = jax.jit(lambda v: v, out_shardings=P("data"))(jax.device_put(x, P("data")))
            """,
            count=2,
        ),
    ]

    def check_module(self, ctx):
        names = ctx.names
        if not any(calls_to(names, n, MESH_MAKERS) for _, n in ctx.by_type.get(ast.Call, ())):
            return
        nodes = list(ctx.nodes)
        legacy = False  # a legacy `with mesh:` is entered somewhere: with_sharding_constraint is fine
        for node in nodes:
            if isinstance(node, (ast.With, ast.AsyncWith)):
                kinds = {self._mesh_context(ctx, item.context_expr) for item in node.items}
                if FULL in kinds:
                    return
                legacy = legacy or LEGACY in kinds
            if calls_to(names, node, MESH_CONTEXTS) or (
                isinstance(node, ast.Attribute) and node.attr in ("__enter__", "enter_context")
            ):
                return
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            name, where = call_name(names, node), []
            if name in WSC and not legacy:
                where = [("shardings", argument(node, 1, "shardings"))]
            elif name == "jax.device_put":
                where = [("device", argument(node, 1, "device"))]
            elif name in JIT or (node.args and names.candidates(node.func) & PARTIAL
                                 and names.qualified_name(node.args[0]) in JIT):
                where = [(k.arg, k.value) for k in node.keywords if k.arg in ("in_shardings", "out_shardings")]
            for argname, value in where:
                if value is not None and self._has_spec(ctx, value, 0):
                    context = (
                        "whose only mesh context is the legacy `with mesh:`, which `jax.jit` and"
                        " `jax.device_put` do not read" if legacy else "that builds a mesh but never sets"
                        " a context mesh"
                    )
                    ctx.report(
                        value,
                        f"bare `PartitionSpec` as `{argname}` of `{ctx.segment(node.func)}` in a module"
                        f" {context}; it raises `{_error(name, argname)}`. Use `NamedSharding(mesh, spec)`,"
                        " or run it under `with jax.set_mesh(mesh):`",
                    )

    def _has_spec(self, ctx, expr: ast.AST, depth: int) -> bool:
        if depth > 4:
            return False
        if isinstance(expr, ast.Call):
            return calls_to(ctx.names, expr, SPECS)
        if isinstance(expr, (ast.Tuple, ast.List)):
            return any(self._has_spec(ctx, e, depth + 1) for e in expr.elts)
        if isinstance(expr, ast.Dict):
            return any(self._has_spec(ctx, v, depth + 1) for v in expr.values)
        if isinstance(expr, ast.Name):
            value = single_value(ctx.names, expr)
            return value is not None and self._has_spec(ctx, value, depth + 1)
        return False

    def _mesh_context(self, ctx, expr: ast.expr, depth: int = 0) -> str | None:
        """What entering ``expr`` may do: LEGACY when it surely is a `Mesh` object (its
        context sets the mesh for `with_sharding_constraint` only), FULL when it may set the
        context mesh (or we cannot tell), None when it surely does not."""
        if isinstance(expr, ast.Name) and depth < 4 and (value := single_value(ctx.names, expr)) is not None:
            return self._mesh_context(ctx, value, depth + 1)  # `mesh = Mesh(...)` ... `with mesh:`
        if not isinstance(expr, ast.Call):
            return FULL  # `with mesh:` of a name bound elsewhere, `with self.mesh:`
        found = ctx.names.candidates(expr.func)
        if found and found <= MESH_MAKERS:
            return LEGACY
        if found & (MESH_CONTEXTS | MESH_MAKERS) or LOCAL in found:
            return FULL
        if not found:  # a builtin or a star-imported name
            return None if isinstance(expr.func, ast.Name) and expr.func.id == "open" else FULL
        return None
