from jaxmigrate.lint.legacy import LegacyKeywordRule
from jaxmigrate.lint.rule import Invalid, Valid


class PjitAxisResources(LegacyKeywordRule):
    """
    ## What it does
    Reports the `in_axis_resources=` and `out_axis_resources=` keywords in any call that resolves
    to `jax.experimental.pjit.pjit` — through aliases, rebindings, or `functools.partial(pjit,
    in_axis_resources=...)` (reported once, where the keyword is written).

    ## Why is this bad
    The keywords were deprecated in JAX 0.4.9 and removed in JAX 0.4.14; passing them raises a
    `TypeError` on any current JAX.

    ## Example
    ```python
    step = pjit(f, in_axis_resources=P("x"), out_axis_resources=P())
    ```

    ## Use instead
    ```python
    step = jax.jit(f, in_shardings=NamedSharding(mesh, P("x")), out_shardings=NamedSharding(mesh, P()))
    ```

    ## Fix safety
    No fix yet. The planned keyword rename is safe (the semantics are unchanged).

    ## References
    - [JAX 0.4.14 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-14-july-27-2023)
    """

    code = "JM202"
    name = "pjit-axis-resources"
    summary = "`in_axis_resources=`/`out_axis_resources=` were renamed `in_shardings=`/`out_shardings=`"
    trigger_words = ("in_axis_resources", "out_axis_resources")
    jax_versions = "deprecated in 0.4.9, removed in 0.4.14"

    VALID = [
        Valid("from jax.experimental.pjit import pjit\nstep = pjit(f, in_shardings=s)\n"),
        Valid("def pjit(f, in_axis_resources=None):\n    return f\n\nstep = pjit(g, in_axis_resources=1)\n"),
        Valid("import jax\nstep = jax.jit(f, in_axis_resources=s)\n"),
        Valid("make(in_axis_resources=s)\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental.pjit import pjit\nstep = pjit(f, in_axis_resources=s)\n"),
        Invalid(
            "import jax.experimental.pjit as pj\nstep = pj.pjit(f, in_axis_resources=a, out_axis_resources=b)\n",
            count=2,
        ),
        Invalid(
            "from functools import partial\nfrom jax.experimental.pjit import pjit as P\n\n"
            "@partial(P, out_axis_resources=s)\ndef step(x):\n    return x\n"
        ),
        Invalid(
            "import functools\nimport jax.experimental.pjit as pj\n"
            "p = functools.partial(pj.pjit, in_axis_resources=a)\nstep = p(f, out_axis_resources=b)\n",
            count=2,
        ),
    ]
