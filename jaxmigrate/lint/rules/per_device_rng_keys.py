"""JM503: one PRNG key per device, the pmap way of drawing random numbers."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import argument, call_name, has_exact_pmap_rewrite, is_device_count
from jaxmigrate.lint.rule import Invalid, Rule, Valid

SPLIT = frozenset({"jax.random.split"})
# flax's helper is exactly `jax.random.split(prng_key, num=jax.local_device_count())` (flax 0.6.4
# and 0.8.5, flax/training/common_utils.py), and exists only to feed a pmap.
SHARD_PRNG_KEY = "flax.training.common_utils.shard_prng_key"


class PerDeviceRngKeys(Rule):
    """
    ## What it does
    Finds `jax.random.split(key, n)` where `n` is the device count (`jax.local_device_count()`,
    `jax.device_count()`, `len(jax.devices())`, or a name bound once to one of them): per-device
    keys, made to be fed to a `pmap`. Also flax's `flax.training.common_utils.shard_prng_key(key)`,
    which is `jax.random.split(key, num=jax.local_device_count())`.

    ## Why is this bad
    Under `pmap` each device draws from its own key. A global-view migration (`jax.jit` over a
    batch sharded `P("data")`) that samples the global shape from one key draws *different numbers*
    with the same seed - verified with jax 0.10.2 on 8 CPU devices:
    `pmap(lambda k: normal(k, (3,)))(split(key, 8))` and `jit(lambda k: normal(k, (8, 3)))(key)`
    disagree, while `jit(vmap(lambda k: normal(k, (3,))))(split(key, 8))` reproduces the pmap values
    exactly. Dropout masks, noise and initialisations change silently, and the key array's leading
    axis is tied to the device count (a different host size gives a different program).

    ## Example
    ```python
    keys = jax.random.split(key, jax.local_device_count())
    out = jax.pmap(sample)(keys)
    ```

    ## Use instead
    ```python
    out = jax.jit(sample_global)(key)  # accept new streams once, or, to keep them:
    out = jax.jit(jax.vmap(sample))(jax.random.split(key, n_shards))
    ```

    ## Confidence
    Reported only when the call is jax's `split` (through the resolver), the count is literally
    a device count or a name bound once, by plain assignment, to one, and the module uses
    `jax.pmap` or JM101's exact rewrite of one (`jax.jit(jax.shard_map(jax.vmap(f), ...))`, which
    keeps pmap's device axis: the keys are for it). The same split in a module without either -
    after the global-view migration, or under a plain `jax.vmap` as *Use instead* suggests - is
    what keeps the old streams, and is never reported; nor is a literal or computed count. `shard_prng_key` is reported wherever it
    is called: it has no other use than feeding a pmap.

    ## Fix safety
    No fix: which stream to keep is a modelling decision.

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://docs.jax.dev/en/latest/random-numbers.html
    """

    code = "JM503"
    name = "per-device-rng-keys"
    summary = "one PRNG key per device: random streams change under a global-view migration"
    # Reported only in a module that refers to `jax.pmap`, which any such reference spells out
    # ("split" or the device-count words would wake the rule on far more files).
    trigger_words = ("pmap", "shard_prng_key", "shard_map")
    reach = (SHARD_PRNG_KEY, *SPLIT)
    jax_versions = "pmap convention; any version"

    VALID = [
        Valid("import jax\nkeys = jax.random.split(key, 4)\nout = jax.pmap(f)(keys)\n"),
        Valid("import jax\nk1, k2 = jax.random.split(key)\nout = jax.pmap(f)(k1)\n"),
        Valid(  # no pmap: what *Use instead* recommends to keep the pmap-era streams
            """
            import jax
            keys = jax.random.split(key, jax.local_device_count())
            out = jax.jit(jax.vmap(sample))(keys)
            """
        ),
        Valid(  # a parameter shadows the device count name
            """
            import jax
            def f(key, n):
                return jax.random.split(key, n)
            """
        ),
        Valid(  # str.split is not jax's
            """
            import jax
            parts = line.split(",", jax.local_device_count())
            """
        ),
    ]
    INVALID = [
        Invalid("import jax\nkeys = jax.random.split(key, jax.local_device_count())\nout = jax.pmap(f)(keys)\n"),
        Invalid(  # JM101's exact rewrite of the pmap keeps the per-device keys
            "import jax\nkeys = jax.random.split(key, jax.local_device_count())\n"
            "out = jax.jit(jax.shard_map(jax.vmap(f), mesh=m, in_specs=P('i'), out_specs=P('i')))(keys)\n"
        ),
        Invalid(
            """
            import jax as J
            from jax import random as jr
            n_dev = len(J.devices())
            keys = jr.split(key, n_dev)
            step = J.pmap(train_step, axis_name="batch")
            """
        ),
        Invalid("from flax.training import common_utils as cu\nrngs = cu.shard_prng_key(rng)\n"),
        Invalid(
            """
            from functools import partial
            from jax import pmap as pm
            from jax.random import split as sp
            from jax import device_count
            keys = sp(key, num=device_count())
            @partial(pm, axis_name="i")
            def f(k):
                return k
            """
        ),
    ]

    def _uses_pmap(self, ctx) -> bool:
        """Whether the module refers to `jax.pmap` (under any alias): who splits keys per device
        in it, splits them for the pmap. Asked once per file."""
        if not hasattr(self, "_pmap"):
            aliases = {"pmap"} | {
                a.asname or a.name for _, a in ctx.by_type.get(ast.alias, ()) if a.name.rpartition(".")[2] == "pmap"
            }
            candidates = [*ctx.attributes.get("pmap", ()), *(n for a in aliases for n in ctx.names_by_id.get(a, ()))]
            self._pmap = any(ctx.names.qualified_name(node) == "jax.pmap" for node in candidates) or (
                "shard_map" in ctx.source.text and has_exact_pmap_rewrite(ctx.names, ctx.by_type))
        return self._pmap

    def visit_Call(self, node: ast.Call, ctx) -> None:
        name = call_name(ctx.names, node)
        if name == SHARD_PRNG_KEY:
            ctx.report(
                node,
                "`shard_prng_key` splits the PRNG key into one key per local device"
                " (`jax.random.split(key, num=jax.local_device_count())`) for a pmap; a global-view"
                " jit that samples global shapes from one key draws different numbers from the same"
                " seed. Pass the key itself and accept the new streams once, or keep the split keys"
                " and `jax.vmap` the sampling over them to reproduce the pmap values",
            )
            return
        if name not in SPLIT:
            return
        count = argument(node, 1, "num")
        if count is not None and is_device_count(ctx.names, count) and self._uses_pmap(ctx):
            ctx.report(
                node,
                "splits one PRNG key per device for pmap; a global-view jit that samples global"
                " shapes from one key draws different numbers from the same seed. Accept the new"
                " streams once, or keep these keys and `jax.vmap` the sampling over them to"
                " reproduce the pmap values",
            )
