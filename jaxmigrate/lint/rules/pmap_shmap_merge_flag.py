"""JM103: the `jax_pmap_shmap_merge` flag, which current JAX no longer knows."""

from __future__ import annotations

import ast

from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.patterns import argument, call_name, str_literal
from jaxmigrate.lint.rule import Edit, Fix, Invalid, Rule, Safety, Valid

FLAG = "jax_pmap_shmap_merge"
ENV = FLAG.upper()
# Observed with jax 0.10.2 (`jax.config.update("jax_pmap_shmap_merge", True)`):
ERROR = "AttributeError: Unrecognized config option: jax_pmap_shmap_merge"


class PmapShmapMergeFlag(Rule):
    """
    ## What it does
    Finds `jax.config.update("jax_pmap_shmap_merge", ...)`, reads of `jax.config.jax_pmap_shmap_merge`
    and the `JAX_PMAP_SHMAP_MERGE` environment variable set from Python.

    ## Why is this bad
    The flag chose between the old `pmap` implementation and the new one built on `jit` +
    `shard_map` while JAX moved from one to the other; libraries pinned it to `False` to keep the
    old pmap. The transition is over: JAX 0.10 has only the new pmap and no such option, so the
    update fails with `AttributeError: Unrecognized config option: jax_pmap_shmap_merge` (seen with
    jax 0.10.2) and the program stops before it starts.

    ## Example
    ```python
    jax.config.update("jax_pmap_shmap_merge", False)
    ```

    ## Use instead
    Delete the line; then migrate the `pmap`s themselves (JM101).

    ## Fix safety
    Removing `jax.config.update("jax_pmap_shmap_merge", True)` (a statement of its own) is safe: it
    asked for what every pmap now is. Removing one that sets `False` is unsafe: that code asked for
    the old pmap, whose behaviour the new one does not match in every corner (see the pmap
    migration guide), so review it. Reads and environment variables are reported without a fix.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    """

    code = "JM103"
    name = "pmap-shmap-merge-flag"
    summary = "`jax_pmap_shmap_merge` is gone: setting it raises in JAX 0.10"
    trigger_words = (FLAG, ENV)
    reach = ("jax.config", "os.putenv", "os.environ")
    jax_versions = "transition flag of the jit+shard_map pmap; unknown to JAX 0.10.2"
    fixable = Safety.SAFE
    sometimes_unsafe = True

    VALID = [
        Valid('import jax\njax.config.update("jax_enable_x64", True)\n'),
        Valid('config = {}\nconfig.update("jax_pmap_shmap_merge", False)\n'),
        Valid('name = "jax_pmap_shmap_merge"  # mentioned, not set\n'),
        Valid('def f(jax):\n    jax.config.update("jax_pmap_shmap_merge", True)\n'),
        Valid(  # jax's config read, not set
            'import jax\nmerged = jax.config.read("jax_pmap_shmap_merge")\n'
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            jax.config.update("jax_pmap_shmap_merge", True)
            step = jax.jit(f)
            """,
            expected="""
            import jax
            step = jax.jit(f)
            """,
        ),
        Invalid(
            """
            from jax import config
            if old:
                config.update("jax_pmap_shmap_merge", False)
            """,
            expected="""
            from jax import config
            if old:
                pass
            """,
        ),
        Invalid("import jax\nold = jax.config.jax_pmap_shmap_merge\n"),
        Invalid('import os\nos.environ["JAX_PMAP_SHMAP_MERGE"] = "false"\n'),
    ]

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        name = call_name(ctx.names, node)
        if name == "jax.config.update" and str_literal(argument(node, 0, "name")) == FLAG:
            ctx.report(node, f"`{FLAG}` is gone from current JAX: setting it raises `{ERROR}`;"
                             " delete it (pmap is always jit + shard_map now)", self._removal(node, ctx))
        elif name in ("os.putenv", "os.environ.setdefault") and node.args and str_literal(node.args[0]) == ENV:
            ctx.report(node, self._env_message())

    def visit_Attribute(self, node: ast.Attribute, ctx: FileContext) -> None:
        if node.attr == FLAG and ctx.names.qualified_name(node.value) == "jax.config":
            ctx.report(node, f"`jax.config.{FLAG}` does not exist in current JAX (AttributeError):"
                             " pmap is always jit + shard_map now")

    def visit_Subscript(self, node: ast.Subscript, ctx: FileContext) -> None:
        if str_literal(node.slice) == ENV and ctx.names.qualified_name(node.value) == "os.environ":
            if isinstance(node.ctx, ast.Store):
                ctx.report(node, self._env_message())

    @staticmethod
    def _env_message() -> str:
        return f"`{ENV}` selected the pmap implementation during JAX's transition; current JAX ignores it"

    @staticmethod
    def _removal(call: ast.Call, ctx: FileContext) -> Fix | None:
        """Delete the update when it is a statement of its own (``pass`` when it is a block's only
        statement); the rare file that has one pays for the parent lookup."""
        block, statement = _statement_of(call, ctx.tree)
        if statement is None or ";" in ctx.source.line(statement.lineno):
            return None
        value = argument(call, 1, "val")
        safe = isinstance(value, ast.Constant) and value.value is True
        start, end = ctx.source.span(statement)
        if len(block) == 1:
            edit = Edit(start, end, "pass")
        else:  # the whole line, indentation and line break included
            starts = ctx.source.line_starts
            line_end = starts[statement.end_lineno] if statement.end_lineno < len(starts) else len(ctx.text)
            edit = Edit(starts[statement.lineno - 1], line_end, "")
        return Fix(Safety.SAFE if safe else Safety.UNSAFE, f"delete the `{FLAG}` update", (edit,))


def _statement_of(call: ast.Call, tree: ast.AST) -> tuple[list[ast.stmt], ast.Expr | None]:
    """(the statement list holding it, the expression statement) when ``call`` is one."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                for statement in block:
                    if isinstance(statement, ast.Expr) and statement.value is call:
                        return block, statement
    return [], None
