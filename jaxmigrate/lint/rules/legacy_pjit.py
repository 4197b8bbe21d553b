from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class LegacyPjit(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.experimental.pjit.pjit`: `from jax.experimental.pjit import
    pjit`, `pj.pjit` after `import jax.experimental.pjit as pj`, the full attribute chain, and a
    bare `pjit` from a star import. Importing the `jax.experimental.pjit` module alone is not
    reported: the module still exists.

    ## Why is this bad
    Since the jit/pjit merge (JAX 0.4.4) `pjit` is `jax.jit`; the experimental alias is deprecated
    since JAX 0.8.0 and warns on access.

    ## Example
    ```python
    from jax.experimental.pjit import pjit

    step = pjit(f, in_shardings=s, out_shardings=s)
    ```

    ## Use instead
    ```python
    step = jax.jit(f, in_shardings=s, out_shardings=s)
    ```

    ## Fix safety
    No fix yet. The planned rename is safe: both names are the same function.

    ## References
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    """

    code = "JM201"
    name = "legacy-pjit"
    summary = "`jax.experimental.pjit.pjit` is deprecated; it is `jax.jit`"
    trigger_words = ("pjit",)
    jax_versions = "deprecated in 0.8.0"

    VALID = [
        Valid("import jax\nstep = jax.jit(f, in_shardings=s)\n"),
        Valid("import jax.experimental.pjit as pj\n"),
        Valid("def pjit(f):\n    return f\n\nstep = pjit(g)\n"),
        Valid("try:\n    from jax import jit as pjit\nexcept ImportError:\n    from jax.experimental.pjit import pjit\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental.pjit import pjit\nstep = pjit(f)\n"),
        Invalid("import jax.experimental.pjit as pj\nstep = pj.pjit(f)\n"),
        Invalid("import jax\nstep = jax.experimental.pjit.pjit(f)\n"),
        Invalid("from jax.experimental import pjit as pjit_mod\nstep = pjit_mod.pjit(f)\n"),
        Invalid("from jax.experimental.pjit import *\nstep = pjit(f)\n"),
    ]
