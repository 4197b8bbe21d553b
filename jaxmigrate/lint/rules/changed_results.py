"""JM510: a function whose result changed between the JAX the code was written for and the target."""

from __future__ import annotations

import ast

from jaxmigrate import catalogue
from jaxmigrate.catalogue import Symbol, parse_version
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import CatalogueRule
from jaxmigrate.lint.rule import Invalid, Valid
from jaxmigrate.names import LOCAL


class ChangedResults(CatalogueRule):
    """
    ## What it does
    Finds calls of JAX functions that still exist but return something else than they did in the
    JAX the code was written for: `jnp.floor`/`ceil`/`trunc` of integers (float before 0.4.31,
    the input's dtype since), the gamma-family samplers (other numbers for the same key since
    0.4.14), 8- and 16-bit `randint` (0.7.2), `jnp.unique(return_inverse=True)` (0.4.24),
    callbacks that receive `jax.Array` (0.4.27) and the other JM510 entries of `symbols.toml`.
    Reported only for code written before the change (`from-jax`, or the project's pin, see JM506)
    and migrated to a JAX at or after it.

    ## Why is this bad
    Nothing fails: the program runs and computes something else (a dtype that changes later
    promotion, other random numbers, another shape), which a migration should show rather than
    leave for a test to find.

    ## Example
    ```python
    # from-jax: 0.4
    idx = jnp.floor(counts / 2)   # integer counts: float32 on 0.4.30, int32 on 0.10
    ```

    ## Use instead
    ```python
    idx = jnp.floor(counts / 2).astype(jnp.float32)   # or keep the integers, knowingly
    ```

    ## Confidence
    Silent when the JAX the code was written for is not known (these functions are everywhere,
    and most calls do not meet the changed case: integer inputs, 8-bit dtypes, complex inputs), for
    code written at or after the change, and for targets before it. A `from-jax` of `0.4` counts
    as before a change made in a later 0.4 release (0.4.31). When `from-jax` is not known the
    rule is not even given the file (`Rule.applies`), so the pre-filter parses nothing for it.

    ## Fix safety
    No fix: which result the program wants is the user's call; the finding names the way to keep
    the old one.

    ## References
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    """

    code = "JM510"
    name = "changed-result"
    summary = "a call whose result changed between the code's JAX (`from-jax`) and the target"
    jax_versions = "each entry's own (symbols.toml): changed 0.4.14 - 0.10.0"

    VALID = [
        Valid("# from-jax: 0.4\nimport numpy as np\ny = np.floor(x)\n"),
        Valid("import jax.numpy as jnp\ny = jnp.floor(x)\n"),  # from-jax not known: silent
        Valid("# from-jax: 0.5\nimport jax.numpy as jnp\ny = jnp.floor(x)\n"),  # written after 0.4.31
        Valid("# from-jax: 0.4\nimport jax.numpy as jnp\ndef floor(x):\n    return x\ny = floor(x)\n"),
    ]
    INVALID = [
        Invalid("# from-jax: 0.4\nimport jax.numpy as jnp\ny = jnp.floor(x)\n"),
        Invalid("# from-jax: 0.4\nfrom jax import random\nz = random.gamma(key, 2.0)\n"),
        Invalid("# from-jax: 0.9\nimport jax.scipy.stats as st\nr = st.rankdata(x)\n"),
    ]

    @classmethod
    def applies(cls, target_jax: tuple[int, int], from_jax: tuple[int, int] | None) -> bool:
        return from_jax is not None and from_jax <= target_jax

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        table = catalogue.behaviours(self.code)
        for target in ctx.names.resolve(node.func):
            symbol = table.get(target.name)
            if symbol is not None and target.name != LOCAL and _between(symbol, ctx):
                self.report(node.func, symbol, target.name, ctx)
                return


def _between(symbol: Symbol, ctx: FileContext) -> bool:
    """Whether the change lies after the JAX the code was written for and by the target."""
    changed = parse_version(symbol.changed_in)
    if ctx.from_jax is None or ctx.target_jax < changed[:2]:
        return False
    # `from-jax 0.4` may be any 0.4 release: one before a change made in 0.4.31.
    return ctx.from_jax < changed[:2] or (ctx.from_jax == changed[:2] and any(changed[2:]))
