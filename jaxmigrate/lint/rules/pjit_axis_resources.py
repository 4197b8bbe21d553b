import ast

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import LegacyKeywordRule
from jaxmigrate.lint.rule import Edit, Fix, Invalid, Safety, Valid


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
    Safe: the keyword is renamed, nothing else changes. Up to JAX 0.4.13 `in_axis_resources=`
    was `in_shardings=` under another name (bare `PartitionSpec`s resolved against `with mesh:`
    either way); from 0.4.14 pjit rejects it, so the rename is what keeps the program running.
    No fix when the call already passes the new name too (the result would repeat a keyword).
    JM201's fix then turns the pjit into `jax.jit`.

    ## References
    - [JAX 0.4.14 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-4-14-july-27-2023)
    """

    code = "JM202"
    name = "pjit-axis-resources"
    summary = "`in_axis_resources=`/`out_axis_resources=` were renamed `in_shardings=`/`out_shardings=`"
    trigger_words = ("in_axis_resources", "out_axis_resources")
    jax_versions = "deprecated in 0.4.9, removed in 0.4.14"
    fixable = Safety.SAFE

    VALID = [
        Valid("from jax.experimental.pjit import pjit\nstep = pjit(f, in_shardings=s)\n"),
        Valid("def pjit(f, in_axis_resources=None):\n    return f\n\nstep = pjit(g, in_axis_resources=1)\n"),
        Valid("import jax\nstep = jax.jit(f, in_axis_resources=s)\n"),
        Valid("make(in_axis_resources=s)\n"),
    ]
    INVALID = [
        Invalid("from jax.experimental.pjit import pjit\nstep = pjit(f, in_axis_resources=s)\n",
                expected="from jax.experimental.pjit import pjit\nstep = pjit(f, in_shardings=s)\n"),
        Invalid(
            "import jax.experimental.pjit as pj\nstep = pj.pjit(f, in_axis_resources=a, out_axis_resources=b)\n",
            expected="import jax.experimental.pjit as pj\nstep = pj.pjit(f, in_shardings=a, out_shardings=b)\n",
            count=2,
        ),
        Invalid(
            "from functools import partial\nfrom jax.experimental.pjit import pjit as P\n\n"
            "@partial(P, out_axis_resources=s)\ndef step(x):\n    return x\n",
            expected="from functools import partial\nfrom jax.experimental.pjit import pjit as P\n\n"
            "@partial(P, out_shardings=s)\ndef step(x):\n    return x\n",
        ),
        Invalid(
            "import functools\nimport jax.experimental.pjit as pj\n"
            "p = functools.partial(pj.pjit, in_axis_resources=a)\nstep = p(f, out_axis_resources=b)\n",
            expected="import functools\nimport jax.experimental.pjit as pj\n"
            "p = functools.partial(pj.pjit, in_shardings=a)\nstep = p(f, out_shardings=b)\n",
            count=2,
        ),
        # No fix: the call passes the new name too.
        Invalid("from jax.experimental.pjit import pjit\nstep = pjit(f, in_shardings=a, in_axis_resources=b)\n"),
    ]

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        self._call = node  # the call whose keywords are being reported, for fix_for
        super().visit_Call(node, ctx)

    def fix_for(self, symbol: Symbol, node: ast.AST, ctx: FileContext) -> Fix | None:
        # Imported on a finding only (JM201's planner module is not free to import); the names
        # live there because the JM201 codemod renames them too.
        from jaxmigrate.migrate._pjit_sites import RENAMED

        assert isinstance(node, ast.keyword) and node.arg in RENAMED
        new = RENAMED[node.arg]
        if any(kw.arg == new for kw in self._call.keywords):
            return None
        start = ctx.source.offset(node.lineno, node.col_offset)
        return Fix(Safety.SAFE, f"rename to `{new}=`", (Edit(start, start + len(node.arg), new),))
