from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class ExperimentalShardMap(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.experimental.shard_map.shard_map`. Importing the
    `jax.experimental.shard_map` module alone is not reported.

    ## Why is this bad
    `shard_map` moved to `jax.shard_map`; the experimental entry point is deprecated since JAX
    0.8.0 and kept only as a legacy wrapper (it still takes `check_rep`, see JM306).

    ## Example
    ```python
    from jax.experimental.shard_map import shard_map
    ```

    ## Use instead
    ```python
    from jax import shard_map
    ```

    ## Fix safety
    No fix yet. The rename is safe once `check_rep=` becomes `check_vma=` (JM306) and
    positional `mesh`/`in_specs`/`out_specs` become keywords.

    ## References
    - [Introduction to shard_map](https://docs.jax.dev/en/latest/notebooks/shard_map.html)
    """

    code = "JM305"
    name = "experimental-shard-map"
    summary = "`jax.experimental.shard_map.shard_map` is deprecated; use `jax.shard_map`"
    trigger_words = ("shard_map",)
    jax_versions = "deprecated in 0.8.0"

    VALID = [
        Valid("import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s)\n"),
        Valid("from jax import shard_map\n"),
        Valid("try:\n    from jax import shard_map\nexcept ImportError:\n    from jax.experimental.shard_map import shard_map\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s, s)\n"),
        Invalid("import jax.experimental.shard_map as shmap\nf = shmap.shard_map(g, m, s, s)\n"),
        Invalid("import jax\nf = jax.experimental.shard_map.shard_map(g, m, s, s)\n"),
    ]
