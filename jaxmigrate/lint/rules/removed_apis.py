from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class RemovedApis(SiteFixes, LegacyNameRule):
    """
    ## What it does
    Reports every mention of a function, class, constant or module that JAX removed (or
    deprecated) between 0.4.0 and 0.10.2: `jax.xla_computation`, `jax.random.shuffle`,
    `jnp.round_`, `jnp.NINF`, `jax.experimental.host_callback`, `jax.lib.xla_bridge`,
    `jax.linear_util`, `import jax.config`, the names gone from `jax.interpreters.xla` and
    `jax.core`, and the rest of the catalogue's JM602 entries (the list is `symbols.toml`, each
    entry with its versions, replacement and the source they were checked in).

    ## Why is this bad
    On the target JAX the name raises `AttributeError` or `ImportError` (or warns, where it is
    only deprecated): a program that "passed" still fails when it runs.

    ## Example
    ```python
    import jax.numpy as jnp
    from jax.config import config
    y = jnp.round_(x, 2)
    ```

    ## Use instead
    ```python
    import jax.numpy as jnp
    from jax import config
    y = jnp.round(x, 2)
    ```

    ## Fix safety
    A fix is offered only where the catalogue says the old name is the new one under another
    name (`fix = "rename"`): the same object in JAX 0.4.30 (`jnp.round_ is jnp.round`,
    `jax.core.Primitive is jax.extend.core.Primitive`), or a NumPy alias with the same parameters
    (`jnp.product` -> `jnp.prod`); tests/test_runtime_removed_apis.py runs a sample on JAX 0.4.30
    and 0.10.2. Those fixes are safe, except where the entry says why not (`jnp.fix` ->
    `jnp.trunc`: unsafe, integer inputs gave floats before JAX 0.4.31). `import jax.config`
    becomes `import jax` (it bound `jax` already), and `from jax.config import config` becomes
    `from jax import config`: the same object. Renames keep the user's alias (`jnp.round_` ->
    `jnp.round`) and move imports like JM601. Everything else is reported with its replacement
    and left to the user: `jax.random.shuffle` -> `permutation(..., independent=True)` draws
    other numbers, `jnp.in1d` -> `isin` keeps the shape, modules changed their contents.

    ## References
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    - [API compatibility policy](https://docs.jax.dev/en/latest/api_compatibility.html)
    """

    code = "JM602"
    name = "removed-api"
    summary = "a function, class, constant or module JAX removed or renamed (0.4.0 - 0.10.2)"
    jax_versions = "each entry's own (symbols.toml): deprecated 0.3.5 - 0.10.0, removed 0.4.2 - 0.10.0"

    fixable = Safety.SAFE
    sometimes_unsafe = True  # jnp.fix -> jnp.trunc (its entry says why)
    site_planner = "jaxmigrate.migrate.moved_names:analyse_removed_apis"
    site_codemod = "jaxmigrate.migrate.moved_names:rewrite"
    site_fix_message = "use the same function under its current name"

    VALID = [
        Valid("import jax.numpy as jnp\ny = jnp.round(x, 2) + jnp.prod(x)\n"),
        Valid("import jax\njax.config.update('jax_enable_x64', True)\n"),
        Valid("from jax import config\nconfig.update('jax_enable_x64', True)\n"),
        Valid("import numpy as np\ny = np.round_(x) + np.product(x)\n"),
        Valid("import jax\ndef f(jax):\n    return jax.xla_computation(g)\n"),
        Valid("try:\n    from jax.extend.backend import get_backend\nexcept ImportError:\n    from jax.lib.xla_bridge import get_backend\n"),
    ]
    INVALID = [
        Invalid("import jax.numpy as jnp\ny = jnp.round_(x, 2)\n", expected="import jax.numpy as jnp\ny = jnp.round(x, 2)\n"),
        Invalid("from jax.config import config\n", expected="from jax import config\n"),
        Invalid("import jax\nimport jax.config\njax.config.update('a', 1)\n",
                expected="import jax\njax.config.update('a', 1)\n"),
        Invalid("import jax.config as cfg\n", expected="from jax import config as cfg\n"),
        Invalid("import jax\nc = jax.xla_computation(f)(x)\n"),
        Invalid("from jax.experimental import host_callback as hcb\nhcb.id_tap(print, x)\n"),
        # the module's import (no fix of its own) goes once its one use is renamed, its comment too
        Invalid("from jax.lib import xla_bridge  # for the platform\nname = xla_bridge.get_backend().platform\n",
                expected="import jax.extend.backend\nname = jax.extend.backend.get_backend().platform\n", count=2),
        Invalid("from jax.numpy import product, NINF\n", count=2,
                expected="from jax.numpy import NINF\nfrom jax.numpy import prod as product\n"),
        Invalid("import jax.core\np = jax.core.Primitive('p')\n", expected="import jax.core\nimport jax.extend.core\np = jax.extend.core.Primitive('p')\n"),
        Invalid("import jax.numpy as jnp\ny = jnp.fix(x)\n", expected="import jax.numpy as jnp\ny = jnp.trunc(x)\n"),
    ]
