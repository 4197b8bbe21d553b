from jaxmigrate.lint.legacy import LegacyKeywordRule
from jaxmigrate.lint.rule import Invalid, Valid


class ShardMapCheckRep(LegacyKeywordRule):
    """
    ## What it does
    Reports `check_rep=` in calls to `jax.experimental.shard_map.shard_map` or `jax.shard_map`
    (directly, through aliases, or in a `functools.partial`).

    ## Why is this bad
    `check_rep` was replaced by `check_vma` (varying-manual-axes checking). Only the deprecated
    experimental wrapper still maps it; `jax.shard_map` rejects it with a `TypeError`.

    ## Example
    ```python
    f = shard_map(g, mesh, in_specs=P("x"), out_specs=P(), check_rep=False)
    ```

    ## Use instead
    ```python
    f = jax.shard_map(g, mesh=mesh, in_specs=P("x"), out_specs=P(), check_vma=False)
    ```

    ## Fix safety
    No fix yet. The planned keyword rename is safe.

    ## References
    - [Introduction to shard_map](https://docs.jax.dev/en/latest/notebooks/shard_map.html)
    """

    code = "JM306"
    name = "shard-map-check-rep"
    summary = "`shard_map(check_rep=...)` is now `check_vma=`"
    trigger_words = ("check_rep",)
    jax_versions = "deprecated with jax.experimental.shard_map in 0.8.0"

    VALID = [
        Valid("import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_vma=False)\n"),
        Valid("def shard_map(f, check_rep=True):\n    return f\n\nshard_map(g, check_rep=False)\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s, s, check_rep=False)\n"),
        Invalid("import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_rep=False)\n"),
        Invalid("import functools, jax\nsm = functools.partial(jax.shard_map, check_rep=False)\n"),
    ]
