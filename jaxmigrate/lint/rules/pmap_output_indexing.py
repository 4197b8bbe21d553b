"""JM505: taking device 0's copy of a pmap result (`out[0]`, `tree.map(lambda x: x[0], ...)`)."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import (
    PMAP, TREE_MAPS, call_name, decorated_by, has_exact_pmap_rewrite, is_exact_pmap_rewrite,
)
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.names import OpaqueBinding, ValueBinding

UNREPLICATE = "flax.jax_utils.unreplicate"
# True both before and after jaxmigrate's own fixes: JM102 writes this very `tree.map` for
# `unreplicate`, and JM101's exact rewrite is a jit that keeps the device axis, so the advice is
# about the global-view move, not about "jit".
MESSAGE = (
    "takes device 0's copy along pmap's leading device axis: right while the producer keeps that"
    " axis (a pmap, or jaxmigrate's exact rewrite of one). When the producer moves to the global"
    " view (jit over NamedSharding-ed global arrays, no device axis), `[0]` silently takes the"
    " first row of every leaf instead (wrong shapes and values): remove it in that same change"
)


class PmapOutputIndexing(Rule):
    """
    ## What it does
    Finds the idioms that strip pmap's device axis from a result: `jax.tree.map(lambda x: x[0],
    tree)` and `flax.jax_utils.unreplicate(tree)`, which does that (and is JM102 too: a
    superseded helper, whose safe fix writes that very `tree.map`), also with the
    `x[0]` converted or fetched (`lambda x: np.array(x[0])`, `float(x[0])`,
    `jax.device_get(x[0])`, `x[0].item()`), and `out[0]` where `out` is the result of a pmapped
    function. flax's `get_metrics`, which does the same, is JM104.

    ## Why is this bad
    Under `pmap` every output carries a leading device axis and `x[0]` picks one device's
    replica. Once the producer is a `jax.jit` over global arrays there is no device axis: the same
    `x[0]` indexes the model's own first dimension. Verified with jax 0.10.2 on 8 CPU devices:
    for replicated params `w` of shape `(4,)`, `jax.tree.map(lambda x: x[0], w)` returns a scalar
    (`w[0]`) instead of `w` - no error, just a wrong value that flows into checkpoints and metrics.

    ## Example
    ```python
    state = p_train_step(state, batch)
    params = jax.tree.map(lambda x: x[0], state).params
    ```

    ## Use instead
    ```python
    state = train_step(state, batch)  # jax.jit over NamedSharding-ed arrays
    params = state.params
    ```

    ## Confidence
    The `lambda x: x[0]` tree map and `unreplicate` are reported only in modules that use
    `jax.pmap` or flax's `replicate` (elsewhere it may take the first example of a batch). A bare
    `out[0]` is reported
    only when `out` is bound once, by plain assignment, to the result of a function the resolver
    sees wrapped by `jax.pmap`.

    ## Fix safety
    No fix: the indexing is right as long as the producer keeps pmap's device axis (a pmap, or
    the `jax.jit` over `_shard_map_like_pmap` that JM101's fix writes; JM102's fix of
    `unreplicate` writes this very `tree.map`); it must go in the change that moves the producer
    to the global view.

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://flax.readthedocs.io/en/latest/api_reference/flax.jax_utils.html
    """

    code = "JM505"
    name = "pmap-output-indexing"
    summary = "device-0 indexing of pmap outputs: wrong values once the producer is jit"
    trigger_words = ("pmap", "replicate", "shard_map")  # (`unreplicate` holds `replicate`)
    reach = (*PMAP, "flax.jax_utils.replicate")
    jax_versions = "pmap convention; any version"

    VALID = [
        Valid("import jax\nfirst = jax.tree.map(lambda x: x[1:], batch)\n"),
        Valid(  # the result of a jitted function
            """
            import jax
            step = jax.jit(f)
            out = step(x)
            y = out[0]
            """
        ),
        Valid(  # out rebound: no longer known to come from the pmap
            """
            import jax
            step = jax.pmap(f)
            out = step(x)
            out = post(out)
            y = out[0]
            """
        ),
        Valid(  # no pmap in this module: x[0] may well be the first example of a batch
            "import jax\nfirst = jax.tree.map(lambda x: x[0], batch)\n"
        ),
        Valid("def unreplicate(x):\n    return x\ny = unreplicate(state)\n"),
        Valid(  # not device 0's copy: a sum of rows, a row of another value
            """
            import jax
            step = jax.pmap(f)
            a = jax.tree.map(lambda x: x[0] + x[1], out)
            b = jax.tree.map(lambda x: table[0], out)
            c = jax.tree.map(lambda x, y: x[0], out, other)
            """
        ),
    ]
    INVALID = [
        Invalid("import jax as J\nstep = J.pmap(f)\nstate = J.tree.map(lambda x: x[0], state)\n", count=1),
        Invalid(  # converted to host values on the way
            """
            import jax
            import numpy as np
            step = jax.pmap(f, axis_name="i")
            metrics = jax.tree_map(lambda x: np.array(x[0]), metrics)
            loss = jax.tree_util.tree_map(lambda m: float(m[0].mean()), out)
            params = jax.tree.map(lambda p: jax.device_get(p[0]).copy(), params)
            """,
            count=3,
        ),
        Invalid(
            """
            from flax.jax_utils import replicate
            from jax.tree_util import tree_map as tm
            state = tm(lambda a: a[0], step(replicate(state)))
            """
        ),
        Invalid(  # the same, spelled with flax's helper (JM102's fix writes the tree map above)
            """
            import jax
            from flax import jax_utils
            step = jax.pmap(f, axis_name="i")
            metrics = jax_utils.unreplicate(step(x))
            """
        ),
        Invalid(
            """
            import jax
            from functools import partial

            @partial(jax.pmap, axis_name="batch")
            def step(x):
                return x

            out = step(x)
            loss = out[0]
            """
        ),
        Invalid(  # JM101's exact rewrite keeps the device axis: still device 0's copy
            """
            import jax
            step = jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh, in_specs=P("i"), out_specs=P("i")))
            out = step(x)
            loss = out[0]
            first = jax.tree.map(lambda x: x[0], out)
            """,
            count=2,
        ),
    ]

    def visit_Call(self, node: ast.Call, ctx) -> None:
        name = call_name(ctx.names, node)
        if (name in TREE_MAPS and node.args and _first_of(node.args[0])
                or name == UNREPLICATE and len(node.args) == 1) and self._uses_pmap(ctx):
            ctx.report(node, f"`{ctx.segment(node.func)}` {MESSAGE}")

    def _uses_pmap(self, ctx) -> bool:
        if not hasattr(self, "_pmap_module"):
            self._pmap_module = any(
                isinstance(n, (ast.Name, ast.Attribute))
                and ctx.names.qualified_name(n) in PMAP | {"flax.jax_utils.replicate"}
                for n in ctx.nodes
            ) or has_exact_pmap_rewrite(ctx.names, ctx.by_type)
        return self._pmap_module

    def visit_Subscript(self, node: ast.Subscript, ctx) -> None:
        if not (_is_zero(node.slice) and isinstance(node.value, ast.Name)):
            return
        bindings = ctx.names.bindings(node.value)
        if len(bindings) == 1 and isinstance(bindings[0], ValueBinding):
            value = bindings[0].value
            if isinstance(value, ast.Call) and _is_pmapped(ctx, value.func):
                ctx.report(node, f"`{ctx.segment(node)}` {MESSAGE}")


def _is_zero(index: ast.expr) -> bool:
    if isinstance(index, ast.Tuple) and index.elts:
        index = index.elts[0]
    return isinstance(index, ast.Constant) and index.value == 0 and type(index.value) is int


def _first_of(func: ast.expr) -> bool:
    """``lambda x: x[0]``, also converted or fetched: ``np.array(x[0])``, ``x[0].item()``."""
    return (
        isinstance(func, ast.Lambda)
        and len(func.args.args) == 1
        and not (func.args.vararg or func.args.kwarg or func.args.kwonlyargs or func.args.posonlyargs)
        and _is_first(func.body, func.args.args[0].arg)
    )


def _is_first(expr: ast.expr, param: str) -> bool:
    """``param[0]``, or a call that only passes it on (``np.asarray(x[0], dtype)`` has it first,
    ``float(x[0])``) or a method called on it (``x[0].mean()``): still device 0's copy."""
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Name) and expr.value.id == param and _is_zero(expr.slice)
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and _is_first(expr.func.value, param):
            return True
        return bool(expr.args) and _is_first(expr.args[0], param) and not any(
            _mentions(arg, param) for arg in [*expr.args[1:], *(k.value for k in expr.keywords)]
        )
    return False


def _mentions(expr: ast.expr, param: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == param for node in ast.walk(expr))


def _is_pmapped(ctx, func: ast.expr) -> bool:
    if isinstance(func, ast.Call):
        return call_name(ctx.names, func) in PMAP or is_exact_pmap_rewrite(ctx.names, func)
    if not isinstance(func, ast.Name):
        return False
    bindings = ctx.names.bindings(func)
    if len(bindings) != 1:
        return False
    binding = bindings[0]
    if isinstance(binding, ValueBinding):
        return isinstance(binding.value, ast.Call) and (
            call_name(ctx.names, binding.value) in PMAP or is_exact_pmap_rewrite(ctx.names, binding.value))
    return isinstance(binding, OpaqueBinding) and (
        decorated_by(ctx.names, binding.node, PMAP) or is_exact_pmap_rewrite(ctx.names, binding.node))
