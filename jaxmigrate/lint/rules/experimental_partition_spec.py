from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class ExperimentalPartitionSpec(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.experimental.PartitionSpec` (and the equally removed
    `jax.experimental.pjit.PartitionSpec` / `jax.interpreters.pxla.PartitionSpec` paths).

    ## Why is this bad
    `PartitionSpec` moved out of experimental in JAX 0.4.1; the old paths were removed in 0.4.11.

    ## Example
    ```python
    from jax.experimental import PartitionSpec as P
    ```

    ## Use instead
    ```python
    from jax.sharding import PartitionSpec as P  # or jax.P
    ```

    ## Fix safety
    No fix yet. The planned rename is safe: it is the same class.

    ## References
    - [JAX 0.4.11 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-11-may-31-2023)
    """

    code = "JM304"
    name = "experimental-partition-spec"
    summary = "`jax.experimental.PartitionSpec` moved to `jax.sharding.PartitionSpec`"
    trigger_words = ("PartitionSpec",)
    jax_versions = "deprecated in 0.4.1, removed in 0.4.11"

    VALID = [
        Valid("from jax.sharding import PartitionSpec as P\n"),
        Valid("import jax\ns = jax.sharding.PartitionSpec('x')\n"),
        Valid("class PartitionSpec:\n    pass\n\nPartitionSpec()\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental import PartitionSpec as P\ns = P('x')\n"),
        Invalid("import jax\ns = jax.experimental.PartitionSpec('x')\n"),
        Invalid("from jax.experimental.pjit import PartitionSpec\n"),
    ]
