"""JM401: a collective or a PartitionSpec names an axis that no pmap, vmap or mesh of the module defines."""

from __future__ import annotations

import ast
import re

from jaxmigrate.lint.patterns import (
    COLLECTIVES, PARTITION_SPEC, SHARD_MAPS, argument, call_name_among, literal_strings, spec_repr, str_literal,
)
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.names import PARTIAL

# axis-defining call -> (position, keyword) of the names it defines
DEFINERS = {
    "jax.pmap": (1, "axis_name"), "jax.vmap": (3, "axis_name"),
    "jax.make_mesh": (1, "axis_names"), "jax.sharding.Mesh": (1, "axis_names"),
    "jax.sharding.AbstractMesh": (1, "axis_names"), "jax.experimental.maps.Mesh": (1, "axis_names"),
}
# Keywords by which any other call may bind axis names (`partial(jax.pmap, axis_name="i")`, a
# wrapper's `axis_name=`, Pallas's `thread_name=` / `grid_names=`): never a reason to report, only
# a reason not to.
BINDING_KEYWORDS = frozenset({"axis_name", "axis_names", "spmd_axis_name", "thread_name", "grid_names"})
PMAP_DEFAULT_AXIS = "_internal_pmap_axis_name"
COLLECTIVE_WORDS = re.compile(r"\b(?:" + "|".join(n.rsplit(".", 1)[1] for n in COLLECTIVES) + r")\b")
SPEC_WORDS = re.compile(r"\b(?:PartitionSpec|P)\b")
SPECS = PARTITION_SPEC | {"jax.experimental.PartitionSpec", "jax.experimental.pjit.PartitionSpec"}
_ASKED = frozenset(COLLECTIVES) | frozenset(DEFINERS) | SPECS | SHARD_MAPS | PARTIAL  # what a call is compared with


def _in_functions(ctx) -> set[int]:
    """ids of the nodes inside a function or lambda body (asked only when there is a finding)."""
    inside: set[int] = set()
    for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
        for _, function in ctx.by_type.get(kind, ()):
            body = function.body if isinstance(function.body, list) else [function.body]
            inside.update(id(node) for stmt in body for node in ast.walk(stmt))
    return inside


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
    typically left behind when a `pmap` was removed or its axis renamed. In a module that builds a
    mesh, also finds `PartitionSpec` entries naming an axis that none of the module's meshes (nor
    pmaps, vmaps) defines.

    ## Why is this bad
    Outside a mapping that binds the name, tracing fails. Verified with jax 0.10.2 on 8 CPU
    devices: `jax.jit(lambda v: lax.psum(v, "batch"))(x)` raises
    `NameError: Found an unbound axis name: batch. To fix this, please call psum under
    `jax.shard_map`.` (and `axis_index` the same, naming `axis_index`). Under a global-view
    `jit` the reduction over the batch is implied by the global computation and the collective
    should go; under `shard_map` the name must be one of the mesh's axes. A `PartitionSpec` is
    resolved against a mesh: with `mesh = jax.make_mesh((8,), ("data",))`,
    `NamedSharding(mesh, P("batch"))` (and a `P("batch")` under `jax.set_mesh(mesh)`) raises
    `ValueError: Resource axis: batch of P('batch',) is not found in mesh: ('data',).`, and
    `jax.shard_map(..., in_specs=P("batch"))` raises `ValueError: shard_map in_specs argument
    must refer to an axis marked as manual (frozenset({'data'})), but: in_specs refers to 'batch'`.

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
    literal, and the collective's name is a literal none of them defines, nor any other call binds
    by keyword (`partial(jax.pmap, axis_name=...)`, a wrapper's `axis_name=`, Pallas's
    `thread_name=`; such a keyword with a computed value silences the module). A module that
    defines no axes (a library called under someone else's pmap or mesh) is never reported. A
    `PartitionSpec` is checked only in a module that builds a mesh itself, against the union of
    every axis name the module defines, and only its literal names (`None`, computed entries and
    `P.UNCONSTRAINED` are skipped): a spec that fits any mesh of the module is never reported.
    A module that defines no axes, yet jits a function whose collective nothing binds (a `pmap`
    replaced by `jit` in a module that builds no mesh), stays silent: the jitted function may be
    called under a pmap elsewhere, where the name is bound. For the same reason a collective inside
    a function is reported as raising "unless the function is called under a mapping elsewhere":
    other modules' pmaps and meshes are not followed.

    ## Fix safety
    No fix: either the name or the collective is wrong, and only the author knows which.

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://docs.jax.dev/en/latest/notebooks/shard_map.html
    """

    code = "JM401"
    name = "unbound-collective-axis"
    summary = "collective or PartitionSpec over an axis name no pmap, vmap or mesh in the module defines"
    # A collective spells its own name; a PartitionSpec is only checked in a module that builds a
    # mesh, whose constructor's name it must then spell.
    trigger_words = ("psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "all_to_all",
                     "psum_scatter", "pshuffle", "pbroadcast", "axis_index", "axis_size",
                     "make_mesh", "Mesh", "AbstractMesh")
    reach = tuple(DEFINERS)  # no finding without an axis some pmap, vmap or mesh defines
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
        Valid(  # a partial of pmap with no axis_name binds pmap's own unnamed axis
            """
            import jax
            from functools import partial
            from jax import lax
            mesh = jax.make_mesh((8,), ("data",))
            @partial(jax.pmap, in_axes=(0, None), out_axes=None)
            def broadcast_sum(x, y):
                return lax.psum(x, "_internal_pmap_axis_name") + y
            """
        ),
        Valid(  # bound by a pmap through functools.partial, or by another call's axis_name=
            """
            import jax
            from functools import partial
            from jax import lax
            mesh = jax.make_mesh((8,), ("data",))
            @partial(jax.pmap, axis_name="r")
            def ring(x):
                return lax.psum(x, "r") + lax.axis_index("wg")
            k = kernel(ring, thread_name="wg")
            """
        ),
        Valid(  # specs that fit one of the module's meshes; None and computed entries skipped
            """
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            mesh = jax.make_mesh((4, 2), ("data", "model"))
            mesh2 = Mesh(jax.devices(), ("replica",))
            a = NamedSharding(mesh, P(None, ("data", "model")))
            b = NamedSharding(mesh2, P("replica", axis, P.UNCONSTRAINED))
            """
        ),
        Valid(  # no mesh built here: the spec is for a caller's mesh
            """
            import jax
            from jax.sharding import PartitionSpec as P
            step = jax.pmap(f, axis_name="i")
            spec = P("batch")
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
        Invalid(
            """
            import jax as J
            from jax.sharding import NamedSharding, PartitionSpec
            mesh = J.make_mesh((8,), ("data",))
            s = NamedSharding(mesh, PartitionSpec("batch"))
            f = J.shard_map(g, mesh=mesh, in_specs=(J.P("data"),), out_specs=J.P(("data", "model")))
            """,
            count=2,
        ),
    ]

    def check_module(self, ctx):
        if not COLLECTIVE_WORDS.search(ctx.text) and not SPEC_WORDS.search(ctx.text):
            return  # woken by a mesh constructor's name, with no collective and no spec to check
        defined: set[str] = set()
        bound: set[str] = set()  # names other calls may bind
        uses, specs, in_map_specs, builds_mesh = [], [], {}, False
        for kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            for _, node in ctx.by_type.get(kind, ()):
                if any(ctx.names.qualified_name(d) == "jax.pmap" for d in node.decorator_list):
                    bound.add(PMAP_DEFAULT_AXIS)  # a bare `@jax.pmap`
        for _, node in ctx.by_type.get(ast.Call, ()):
            name = call_name_among(ctx.names, node, _ASKED)
            if name not in COLLECTIVES:
                for keyword in node.keywords:
                    if keyword.arg in BINDING_KEYWORDS:
                        if (names := _names(keyword.value)) is None:
                            return  # a binding we cannot read: any name may be bound
                        bound |= names
            if name in PARTIAL and len(node.args) in (1, 2) and ctx.names.qualified_name(node.args[0]) == "jax.pmap" \
                    and not any(k.arg == "axis_name" for k in node.keywords):
                bound.add(PMAP_DEFAULT_AXIS)  # `@partial(jax.pmap, in_axes=...)`: pmap's unnamed axis
            if name in DEFINERS:
                position, keyword = DEFINERS[name]
                value = argument(node, position, keyword)
                if value is None and name in ("jax.pmap", "jax.vmap"):
                    if name == "jax.pmap":  # what jax 0.10's pmap names an unnamed axis
                        bound.add(PMAP_DEFAULT_AXIS)
                    continue
                names = _names(value)
                if names is None:
                    return  # a definition we cannot read: any name may be defined
                defined |= names
                builds_mesh = builds_mesh or name not in ("jax.pmap", "jax.vmap")
            elif name in COLLECTIVES:
                names = _names(argument(node, *COLLECTIVES[name]))
                if names:
                    uses.append((node, name, names))
            elif name in SPECS:
                names = set().union(*(literal_strings(arg) or set() for arg in node.args))
                if names:
                    specs.append((node, names))
            elif name in SHARD_MAPS:
                for keyword in node.keywords:
                    if keyword.arg in ("in_specs", "out_specs"):
                        in_map_specs.update((id(n), keyword.arg) for n in ast.walk(keyword.value))
        if not defined:
            return
        if builds_mesh:
            self._check_specs(ctx, specs, defined, bound, in_map_specs)
        in_functions = None
        for node, name, names in uses:
            missing = sorted(names - defined - bound)
            if not missing:
                continue
            if in_functions is None:
                in_functions = _in_functions(ctx)
            # A function may be called from another module, under a pmap or shard_map there that
            # binds the name: only code that runs here, at module level, raises for certain.
            when = ("unless the function is called under a mapping elsewhere that binds it (another"
                    " module's pmap or shard_map), tracing" if id(node) in in_functions else "it")
            ctx.report(
                node,
                f"`{name.rsplit('.', 1)[1]}` over axis {', '.join(map(repr, missing))}, which no pmap,"
                f" vmap or mesh in this module defines (defined: {', '.join(map(repr, sorted(defined)))});"
                f" {when} raises `NameError: Found an unbound axis name: {missing[0]}`. Use the mesh's"
                " axis name under `jax.shard_map`, or drop the collective under a global-view jit",
            )

    def _check_specs(self, ctx, specs, defined: set[str], bound: set[str], in_map_specs: dict[int, str]) -> None:
        for node, names in specs:
            missing = sorted(names - defined - bound)
            if not missing:
                continue
            where = in_map_specs.get(id(node))
            if where:
                error = (f"`jax.shard_map` raises `ValueError: shard_map {where} argument must refer to an"
                         " axis marked as manual`")
            else:
                error = (f"a `NamedSharding` (or context mesh) resolving it raises `ValueError: Resource"
                         f" axis: {missing[0]} of {spec_repr(node)} is not found in mesh`")
            ctx.report(
                node,
                f"`PartitionSpec` names axis {', '.join(map(repr, missing))}, which no mesh, pmap or vmap"
                f" in this module defines (defined: {', '.join(map(repr, sorted(defined)))}); {error}."
                " Use one of the mesh's axis names",
            )
