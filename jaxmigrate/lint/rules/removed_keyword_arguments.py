import ast
import re

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import LegacyKeywordRule
from jaxmigrate.lint.rule import Edit, Fix, Invalid, Safety, Valid


class RemovedKeywordArguments(LegacyKeywordRule):
    """
    ## What it does
    Reports keyword arguments that JAX removed or renamed between 0.4.0 and 0.10.2, in calls that
    resolve to the function that took them (through aliases, rebindings and
    `functools.partial`): `jnp.clip(a_min=, a_max=)` (now `min=`, `max=`), `interpolation=` of
    `jnp.quantile`/`percentile`, `jnp.reshape(newshape=)`, `with_sharding_constraint(axis_resources=)`,
    `jax.pure_callback(vectorized=)`, `jnp.where(condition=, x=, y=)` and the other JM603 entries
    of `symbols.toml`.

    ## Why is this bad
    The function no longer has the parameter: the call raises `TypeError: ... got an unexpected
    keyword argument` on the target JAX (a flax lm1b program that "passed" crashed at
    `jnp.clip(x, a_max=1.0e4)` on JAX 0.10.2).

    ## Example
    ```python
    y = jnp.clip(x, a_min=0.0, a_max=1.0e4)
    ```

    ## Use instead
    ```python
    y = jnp.clip(x, min=0.0, max=1.0e4)
    ```

    ## Fix safety
    Safe where the keyword was renamed and kept its meaning: the old keyword was forwarded to the
    new one in the releases that took both (`a_min` -> `min`, `a_max` -> `max`, `interpolation`
    -> `method`, `newshape` -> `shape`, `axis_resources` -> `shardings`, `beta(x=, y=)` -> `a=`,
    `b=`, jax.export's `lowering_platforms` -> `platforms`); tests/test_runtime_removed_apis.py
    runs a sample on JAX 0.4.30 and 0.10.2. No fix when the call already passes the new keyword,
    and none where the replacement is not a keyword rename (`clip(a=)` and `where(x=)` become
    positional, `vectorized=` maps to a `vmap_method` chosen by what the callback does,
    `softmax(initial=)` and `named_shape=` are dropped): the finding names the replacement.

    ## References
    - [JAX 0.10.0 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-10-0-april-16-2026)
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    """

    code = "JM603"
    name = "removed-keyword-argument"
    summary = "a keyword argument JAX removed or renamed (`jnp.clip(a_max=)`, ...)"
    jax_versions = "each entry's own (symbols.toml): removed 0.4.8 - 0.10.0"
    fixable = Safety.SAFE

    VALID = [
        Valid("import jax.numpy as jnp\ny = jnp.clip(x, min=0, max=1)\nz = jnp.clip(x, 0, 1)\n"),
        Valid("import numpy as np\ny = np.clip(x, a_min=0, a_max=1)\n"),
        Valid("import jax.numpy as jnp\ndef clip(x, a_max):\n    return x\ny = clip(x, a_max=1)\n"),
        Valid("import jax.numpy as jnp\ny = jnp.quantile(x, 0.5, method='nearest')\n"),
    ]
    INVALID = [
        Invalid("import jax.numpy as jnp\ny = jnp.clip(x, a_max=1.0e4)\n",
                expected="import jax.numpy as jnp\ny = jnp.clip(x, max=1.0e4)\n"),
        Invalid("from jax.numpy import clip as c\ny = c(x, a_min=0, a_max=1)\n",
                expected="from jax.numpy import clip as c\ny = c(x, min=0, max=1)\n", count=2),
        Invalid("import jax.numpy as jnp\nq = jnp.percentile(x, 50, interpolation='lower')\n",
                expected="import jax.numpy as jnp\nq = jnp.percentile(x, 50, method='lower')\n"),
        Invalid("import functools\nimport jax.numpy as jnp\nf = functools.partial(jnp.reshape, newshape=(2, 3))\n",
                expected="import functools\nimport jax.numpy as jnp\nf = functools.partial(jnp.reshape, shape=(2, 3))\n"),
        Invalid("import jax\ny = jax.lax.with_sharding_constraint(x, axis_resources=s)\n",
                expected="import jax\ny = jax.lax.with_sharding_constraint(x, shardings=s)\n"),
        Invalid("import jax.numpy as jnp\ny = jnp.clip(a=x, a_max=1)\n", expected="import jax.numpy as jnp\ny = jnp.clip(a=x, max=1)\n", count=2),
        Invalid("import jax.numpy as jnp\ny = jnp.clip(x, a_max=1, max=2)\n"),  # no fix: it would repeat max=
        Invalid("import jax\nr = jax.pure_callback(f, s, x, vectorized=True)\n"),
    ]

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        self._call = node  # the call whose keywords are being reported, for fix_for
        super().visit_Call(node, ctx)

    def fix_for(self, symbol: Symbol, node: ast.AST, ctx: FileContext) -> Fix | None:
        assert isinstance(node, ast.keyword) and node.arg == symbol.keyword
        new = re.fullmatch(r"`(\w+)=`", symbol.replacement)
        if symbol.fix != "rename" or new is None or any(kw.arg == new[1] for kw in self._call.keywords):
            return None
        start = ctx.source.offset(node.lineno, node.col_offset)
        safety = Safety.SAFE if symbol.safety == "safe" else Safety.UNSAFE
        return Fix(safety, f"rename to `{new[1]}=`", (Edit(start, start + len(node.arg), new[1]),))
