import ast

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import LegacyKeywordRule, describe
from jaxmigrate.lint.findings import Blocker
from jaxmigrate.lint.rule import Edit, Fix, Invalid, Safety, Valid
from jaxmigrate.names import PARTIAL

MODERN = "jax.shard_map"
EXPERIMENTAL = "jax.experimental.shard_map.shard_map"


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
    Safe. On `jax.shard_map` (or a partial of it) the keyword is renamed: the author meant
    `check_vma`, and the experimental wrapper of JAX 0.10.2 passes `check_rep` on as exactly that.
    On the experimental `shard_map` the keyword is renamed by the JM305 fix, which moves the call to
    `jax.shard_map` in the same edit: renaming it alone would break the call, since the wrapper
    only takes `check_rep`. Where the callee may be either, or a local function, or where
    `check_vma=` is also given, the finding has no fix and says why.

    ## References
    - [Introduction to shard_map](https://docs.jax.dev/en/latest/notebooks/shard_map.html)
    """

    code = "JM306"
    name = "shard-map-check-rep"
    summary = "`shard_map(check_rep=...)` is now `check_vma=`"
    trigger_words = ("check_rep",)
    jax_versions = "deprecated with jax.experimental.shard_map in 0.8.0"
    fixable = Safety.SAFE

    VALID = [
        Valid("import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_vma=False)\n"),
        Valid("def shard_map(f, check_rep=True):\n    return f\n\nshard_map(g, check_rep=False)\n"),
        Valid(  # jax is imported, but the shard_map called is the module's own
            "import jax\n\ndef shard_map(f, check_rep=True):\n    return f\n\nshard_map(g, check_rep=False)\n"
        ),
    ]
    INVALID = [
        # Renamed by JM305's fix, with the move to jax.shard_map.
        Invalid("from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s, s, check_rep=False)\n"),
        Invalid(
            "import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_rep=False)\n",
            expected="import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_vma=False)\n",
        ),
        Invalid(
            "import functools, jax\nsm = functools.partial(jax.shard_map, check_rep=False)\n",
            expected="import functools, jax\nsm = functools.partial(jax.shard_map, check_vma=False)\n",
        ),
        Invalid(
            "import jax\nsm = jax.shard_map\nf = sm(g, mesh=m, in_specs=s, out_specs=s, check_rep=True)\n",
            expected="import jax\nsm = jax.shard_map\nf = sm(g, mesh=m, in_specs=s, out_specs=s, check_vma=True)\n",
        ),
    ]

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        self._call = node
        super().visit_Call(node, ctx)

    def report(self, node: ast.AST, symbol: Symbol, shown: str, ctx: FileContext, ambiguous=False) -> None:
        message = describe(symbol, shown, ctx, ambiguous)
        callees = self._callees(ctx)
        fix = None
        reason = None
        if any(kw.arg == "check_vma" for kw in self._call.keywords):
            reason = "`check_vma=` is given too"
        elif callees == {MODERN}:
            start = ctx.source.offset(node.lineno, node.col_offset)
            fix = Fix(Safety.SAFE, "rename to `check_vma=`", (Edit(start, start + len("check_rep"), "check_vma"),))
        elif callees == {EXPERIMENTAL}:
            message += ("; not rewritten alone: the JM305 fix renames it where it moves the call to "
                        "`jax.shard_map` (the experimental wrapper only takes `check_rep`)")
        else:
            reason = "the callee may be either shard_map, or a local function"
        if reason is not None:
            message += f"; not rewritten: {reason}"
        blockers = (Blocker("rewrite", reason, node.lineno),) if reason else ()
        ctx.report(node, message, fix, blockers=blockers)

    def _callees(self, ctx: FileContext) -> set[str]:
        targets = ctx.names.resolve(self._call.func)
        if {t.name for t in targets} == PARTIAL:  # the keyword is bound by functools.partial(X, ...)
            targets = ctx.names.resolve(self._call)
        return {t.name for t in targets}
