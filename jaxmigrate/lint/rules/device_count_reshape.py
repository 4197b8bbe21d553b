"""JM504: reshaping a batch to a leading device axis, pmap's calling convention."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import DEVICE_COUNTS, DEVICE_LISTS, call_name, is_device_count, mentions_devices
from jaxmigrate.lint.rule import Invalid, Rule, Valid

RESHAPE_FUNCTIONS = frozenset({"jax.numpy.reshape", "numpy.reshape"})
# `shard_prng_key` splits a key per device rather than reshaping a batch: JM503 reports it.
SHARD_HELPERS = frozenset({"flax.training.common_utils.shard"})
_ATTRS = frozenset(name.rpartition(".")[2] for name in RESHAPE_FUNCTIONS | SHARD_HELPERS) | {"reshape"}


class DeviceCountReshape(Rule):
    """
    ## What it does
    Finds reshapes whose leading dimension is the device count -
    `x.reshape((jax.local_device_count(), -1, ...))`, `jnp.reshape(x, (n_dev, ...))`, also inside
    `jax.tree.map(lambda x: x.reshape(n_dev, ...), batch)` - and flax's
    `flax.training.common_utils.shard`, which does exactly that.

    ## Why is this bad
    A leading device axis is pmap's calling convention: `pmap` maps over it. `jax.jit` works on
    global arrays and shards the batch itself (`NamedSharding(mesh, P("data"))`), so after a
    migration the reshape is unnecessary, and wrong: the jitted function sees an extra axis, a
    `P("data")` sharding now splits the device axis rather than the batch, and reductions over
    "the batch" run over the wrong axis.

    ## Example
    ```python
    batch = jax.tree.map(lambda x: x.reshape((jax.local_device_count(), -1) + x.shape[1:]), batch)
    ```

    ## Use instead
    ```python
    batch = jax.device_put(batch, NamedSharding(mesh, P("data")))
    ```

    ## Confidence
    The leading dimension must be a device count through the resolver (`jax.local_device_count()`,
    `jax.device_count()`, `len(jax.devices())`, or a name bound once to one of them). Reshapes of an
    array of *devices* (building a mesh by hand) are not reported. Code that keeps pmap, or uses
    `shard_map` with per-device blocks, may still want the axis: silence with `# noqa: JM504`.

    ## Fix safety
    No fix: the call sites and the function body must change together (see `jaxmigrate migrate`).

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://docs.jax.dev/en/latest/sharded-computation.html
    """

    code = "JM504"
    name = "device-count-reshape"
    summary = "reshape to a leading device-count axis (pmap convention), wrong under global-view jit"
    trigger_words = ("local_device_count", "device_count", "devices", "local_devices", "shard")
    reach = (*SHARD_HELPERS, *DEVICE_COUNTS, *DEVICE_LISTS)  # a reshape counts when it reads these
    jax_versions = "pmap convention; any version"

    @classmethod
    def written(cls, text, words, imports) -> bool:
        """A finding is a call of the `shard` helper (a trigger word) or a reshape, which names
        `reshape` (a method, `jnp.reshape`, or imported under another name): a text that writes
        neither has nothing for this rule, however often it says `devices`."""
        return "shard" in words or "reshape" in text

    VALID = [
        Valid("import jax\ny = x.reshape((8, -1))\n"),
        Valid(  # a mesh built by hand: the reshaped array holds devices
            """
            import jax, numpy as np
            devs = np.array(jax.devices()).reshape(jax.device_count(), 1)
            """
        ),
        Valid(  # the device count is not leading
            "import jax\ny = x.reshape((-1, jax.local_device_count()))\n"
        ),
        Valid(  # a local function named shard
            "def shard(x):\n    return x\ny = shard(batch)\n"
        ),
        Valid(  # n shadowed by a parameter
            """
            import jax
            n = jax.local_device_count()
            def f(x, n):
                return x.reshape(n, -1)
            """
        ),
    ]
    INVALID = [
        Invalid("import jax\ny = x.reshape((jax.local_device_count(), -1) + x.shape[1:])\n"),
        Invalid(
            """
            import jax as J
            n_dev = J.local_device_count()
            batch = J.tree.map(lambda x: x.reshape(n_dev, -1, *x.shape[1:]), batch)
            """
        ),
        Invalid(
            """
            import jax.numpy as jnp
            from jax import devices as devs
            y = jnp.reshape(x, (len(devs()), -1))
            """
        ),
        Invalid("from flax.training import common_utils as cu\nbatch = cu.shard(batch)\n"),
    ]

    def visit_Call(self, node: ast.Call, ctx) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr not in _ATTRS:
            return  # `x.attr(...)`: neither a reshape nor a shard helper, whatever x is
        name = call_name(ctx.names, node)
        if name in SHARD_HELPERS:
            ctx.report(node, f"`{name.rsplit('.', 1)[1]}` adds pmap's leading device axis;"
                       " under global-view jit pass the global batch with"
                       " `jax.device_put(batch, NamedSharding(mesh, P('data')))` instead")
            return
        if name in RESHAPE_FUNCTIONS and len(node.args) >= 2:
            receiver, shape = node.args[0], node.args[1:2]
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "reshape" and name is None:
            receiver, shape = node.func.value, node.args
        else:
            return
        if len(shape) == 1 and isinstance(shape[0], (ast.Tuple, ast.List)):
            shape = shape[0].elts
        elif len(shape) == 1 and isinstance(shape[0], ast.BinOp) and isinstance(shape[0].left, ast.Tuple):
            shape = shape[0].left.elts  # (n, -1) + x.shape[1:]
        if not shape or not is_device_count(ctx.names, shape[0]) or mentions_devices(ctx.names, receiver):
            return
        ctx.report(node, "reshapes to a leading device-count axis, pmap's calling convention;"
                   " under global-view jit keep the global batch and shard it with"
                   " `NamedSharding(mesh, P('data'))` - with the reshape, `P('data')` splits the device"
                   " axis and the function sees an extra dimension")
