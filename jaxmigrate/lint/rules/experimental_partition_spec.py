from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class ExperimentalPartitionSpec(SiteFixes, LegacyNameRule):
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
    Safe: every old path was a re-export of the one class `jax.sharding.PartitionSpec`. An import
    moves to `jax.sharding` keeping its local name (`as P` stays, so uses are untouched; an import
    of several names is split); a dotted use keeps the user's `jax` alias (`J.sharding.PartitionSpec`)
    or, through a module alias (`pjit.PartitionSpec`), is spelled from `jax`, adding `import jax`
    once and removing the alias import when nothing else uses it. Star imports and names that may be
    local are reported without a fix.

    ## References
    - [JAX 0.4.11 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-11-may-31-2023)
    """

    code = "JM304"
    name = "experimental-partition-spec"
    summary = "`jax.experimental.PartitionSpec` moved to `jax.sharding.PartitionSpec`"
    trigger_words = ("PartitionSpec",)
    jax_versions = "deprecated in 0.4.1, removed in 0.4.11"

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.moved_names:analyse_partition_spec"
    site_codemod = "jaxmigrate.migrate.moved_names:rewrite"
    site_fix_message = "use `jax.sharding.PartitionSpec`, the same class"

    VALID = [
        Valid("import jax\nname = 'jax.experimental.PartitionSpec'\n"),  # the name in a string: past the pre-filter, no use
        Valid("from jax.sharding import PartitionSpec as P\n"),
        Valid("import jax\ns = jax.sharding.PartitionSpec('x')\n"),
        Valid("class PartitionSpec:\n    pass\n\nPartitionSpec()\n"),
    ]
    INVALID = [
        Invalid(
            "from jax.experimental import PartitionSpec as P\ns = P('x')\n",
            expected="from jax.sharding import PartitionSpec as P\ns = P('x')\n",
        ),
        Invalid(
            "import jax\ns = jax.experimental.PartitionSpec('x')\n",
            expected="import jax\ns = jax.sharding.PartitionSpec('x')\n",
        ),
        Invalid(
            "from jax.experimental.pjit import PartitionSpec\n",
            expected="from jax.sharding import PartitionSpec\n",
        ),
        Invalid(
            "from jax.experimental.pjit import pjit, PartitionSpec as P\n",
            expected="from jax.experimental.pjit import pjit\nfrom jax.sharding import PartitionSpec as P\n",
        ),
        Invalid(
            "import jax.experimental.pjit as pj\ns = pj.PartitionSpec('x')\n",
            expected="import jax\ns = jax.sharding.PartitionSpec('x')\n",
        ),
        Invalid("from jax.experimental import *\ns = PartitionSpec('x')\n"),
    ]
