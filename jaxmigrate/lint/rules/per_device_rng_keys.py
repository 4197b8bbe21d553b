"""JM503: one PRNG key per device, the pmap way of drawing random numbers."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import argument, call_name, is_device_count
from jaxmigrate.lint.rule import Invalid, Rule, Valid

SPLIT = frozenset({"jax.random.split"})


class PerDeviceRngKeys(Rule):
    """
    ## What it does
    Finds `jax.random.split(key, n)` where `n` is the device count (`jax.local_device_count()`,
    `jax.device_count()`, `len(jax.devices())`, or a name bound once to one of them): per-device
    keys, made to be fed to a `pmap`.

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
    Reported only when the call is jax's `split` (through the resolver) and the count is literally
    a device count or a name bound once, by plain assignment, to one. A literal or computed count
    is never reported.

    ## Fix safety
    No fix: which stream to keep is a modelling decision.

    ## References
    - https://docs.jax.dev/en/latest/migrate_pmap.html
    - https://docs.jax.dev/en/latest/random-numbers.html
    """

    code = "JM503"
    name = "per-device-rng-keys"
    summary = "one PRNG key per device: random streams change under a global-view migration"
    # The key count must be a device count: `jax.local_device_count()`, `jax.device_count()`,
    # `len(jax.devices())` / `len(jax.local_devices())`, or a name bound to one of them, which
    # spells one of these words out too. ("split" alone would wake the rule on every str.split.)
    trigger_words = ("local_device_count", "device_count", "devices", "local_devices")
    jax_versions = "pmap convention; any version"

    VALID = [
        Valid("import jax\nkeys = jax.random.split(key, 4)\n"),
        Valid("import jax\nk1, k2 = jax.random.split(key)\n"),
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
        Invalid("import jax\nkeys = jax.random.split(key, jax.local_device_count())\n"),
        Invalid(
            """
            import jax as J
            from jax import random as jr
            n_dev = len(J.devices())
            keys = jr.split(key, n_dev)
            """
        ),
        Invalid(
            """
            from jax.random import split as sp
            from jax import device_count
            keys = sp(key, num=device_count())
            """
        ),
    ]

    def visit_Call(self, node: ast.Call, ctx) -> None:
        if call_name(ctx.names, node) not in SPLIT:
            return
        count = argument(node, 1, "num")
        if count is not None and is_device_count(ctx.names, count):
            ctx.report(
                node,
                "splits one PRNG key per device for pmap; a global-view jit that samples global"
                " shapes from one key draws different numbers from the same seed. Accept the new"
                " streams once, or keep these keys and `jax.vmap` the sampling over them to"
                " reproduce the pmap values",
            )
