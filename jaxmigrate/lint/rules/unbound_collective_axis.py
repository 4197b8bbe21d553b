"""JM401: a collective names an axis that no pmap, vmap or mesh of the module defines."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import argument, call_name, str_literal
from jaxmigrate.lint.rule import Invalid, Rule, Valid

# collective -> (position, keyword) of its axis name
COLLECTIVES = {
    **{f"jax.lax.{n}": (1, "axis_name") for n in (
        "psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "all_to_all", "psum_scatter",
        "pshuffle", "pbroadcast")},
    "jax.lax.axis_index": (0, "axis_name"),
    "jax.lax.axis_size": (0, "axis_name"),
}
# axis-defining call -> (position, keyword) of the names it defines
DEFINERS = {
    "jax.pmap": (1, "axis_name"), "jax.vmap": (3, "axis_name"),
    "jax.make_mesh": (1, "axis_names"), "jax.sharding.Mesh": (1, "axis_names"),
    "jax.sharding.AbstractMesh": (1, "axis_names"), "jax.experimental.maps.Mesh": (1, "axis_names"),
}


def _names(node: ast.AST | None) -> set[str] | None:
    """The literal axis names of an argument; None when they are not all literal."""
    if (text := str_literal(node)) is not None:
        return {text}
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = [_names(e) for e in node.elts]
        return None if any(p is None for p in parts) else set().union(*parts)
    return None


class UnboundCollectiveAxis(Rule):
    """
    ## What it does
    Finds collectives (`lax.psum`, `pmean`, `pmax`, `pmin`, `all_gather`, `ppermute`,
    `all_to_all`, `psum_scatter`, `axis_index`, `axis_size`) whose literal axis name is defined by
    no `pmap(axis_name=...)`, `vmap(axis_name=...)`, `jax.make_mesh` or `Mesh` in the same module -
    typically left behind when a `pmap` was removed or its axis renamed.

    ## Why is this bad
    Outside a mapping that binds the name, tracing fails. Verified with jax 0.10.2 on 8 CPU
    devices: `jax.jit(lambda v: lax.psum(v, "batch"))(x)` raises
    `NameError: Found an unbound axis name: batch. To fix this, please call psum under
    `jax.shard_map`.` (and `axis_index` the same, naming `axis_index`). Under a global-view
    `jit` the reduction over the batch is implied by the global computation and the collective
    should go; under `shard_map` the name must be one of the mesh's axes.

    ## Example
    ```python
    mesh = jax.make_mesh((8,), ("data",))
    def loss(x):
        return lax.pmean(x, axis_name="batch")
    ```

    ## Use instead
    ```python
    def loss(x):
        return lax.pmean(x, axis_name="data")  # inside jax.shard_map over `mesh`
    ```

    ## Confidence
    Reported only when the module itself defines axis names, every definition it makes is
    literal, and the collective's name is a literal none of them defines. A module that defines
    no axes (a library called under someone else's pmap or mesh) is never reported.

    ## Fix safety
    No fix: either the name or the collective is wrong, and only the author knows which.

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://docs.jax.dev/en/latest/notebooks/shard_map.html
    """

    code = "JM401"
    name = "unbound-collective-axis"
    summary = "collective over an axis name no pmap, vmap or mesh in the module defines"
    trigger_words = ("psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "all_to_all",
                     "psum_scatter", "pshuffle", "pbroadcast", "axis_index", "axis_size")
    jax_versions = "any version"

    VALID = [
        Valid(
            """
            import jax
            from jax import lax
            step = jax.pmap(lambda x: lax.psum(x, "i"), axis_name="i")
            """
        ),
        Valid(  # no axis defined here: a library function used under someone else's mapping
            "from jax import lax\ndef loss(x):\n    return lax.pmean(x, 'batch')\n"
        ),
        Valid(  # a computed definition: unknown names, stay silent
            """
            import jax
            from jax import lax
            mesh = jax.make_mesh((8,), AXES)
            y = lax.psum(x, "data")
            """
        ),
        Valid(  # a local psum
            """
            import jax
            mesh = jax.make_mesh((8,), ("data",))
            def psum(x, name):
                return x
            y = psum(x, "batch")
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            from jax import lax
            mesh = jax.make_mesh((8,), ("data",))
            def loss(x):
                return lax.pmean(x, axis_name="batch")
            """
        ),
        Invalid(
            """
            import jax as J
            from jax.lax import axis_index as ai, psum
            step = J.pmap(f, axis_name="devices")
            def g(x):
                return psum(x, ("i", "devices")) + ai("i")
            """,
            count=2,
        ),
    ]

    def check_module(self, ctx):
        defined: set[str] = set()
        uses = []
        for node in ctx.nodes:
            name = call_name(ctx.names, node)
            if name in DEFINERS:
                position, keyword = DEFINERS[name]
                value = argument(node, position, keyword)
                if value is None and name in ("jax.pmap", "jax.vmap"):
                    continue
                names = _names(value)
                if names is None:
                    return  # a definition we cannot read: any name may be defined
                defined |= names
            elif name in COLLECTIVES:
                names = _names(argument(node, *COLLECTIVES[name]))
                if names:
                    uses.append((node, name, names))
        if not defined:
            return
        for node, name, names in uses:
            missing = sorted(names - defined)
            if missing:
                ctx.report(
                    node,
                    f"`{name.rsplit('.', 1)[1]}` over axis {', '.join(map(repr, missing))}, which no pmap,"
                    f" vmap or mesh in this module defines (defined: {', '.join(map(repr, sorted(defined)))});"
                    f" outside a mapping that binds it, tracing raises `NameError: Found an unbound axis"
                    f" name: {missing[0]}`. Use the mesh's axis name under `jax.shard_map`, or drop the"
                    " collective under a global-view jit",
                )
