"""JM502: the non-partitionable threefry RNG, switched on explicitly (or by the target's default)."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import JIT, argument, call_name, decorated_by, own_nodes, str_literal
from jaxmigrate.lint.rule import Invalid, Rule, Valid

FLAG = "jax_threefry_partitionable"
ENV = FLAG.upper()
FALSE_STRINGS = {"0", "false", "False", "FALSE", "no", "off"}
SHARDING = ("jax.sharding.NamedSharding", "jax.NamedSharding", "jax.sharding.PositionalSharding",
            "jax.make_mesh", "jax.sharding.Mesh")
SAMPLERS = ("jax.random.",)
NOT_SAMPLERS = {"jax.random.key", "jax.random.PRNGKey", "jax.random.split", "jax.random.fold_in",
                "jax.random.key_data", "jax.random.wrap_key_data", "jax.random.key_impl"}


class NonPartitionableRng(Rule):
    """
    ## What it does
    Finds code that turns the partitionable threefry RNG off - `jax.config.update(
    "jax_threefry_partitionable", False)`, `jax.threefry_partitionable(False)` or the
    `JAX_THREEFRY_PARTITIONABLE` environment variable set false - and, when `target-jax` is older
    than 0.5 (where that was still the default), random sampling inside a jitted function in a
    module that shards arrays.

    ## Why is this bad
    The non-partitionable threefry is not a pure map over counters: sampling a sharded shape under
    `jit` makes XLA insert a `collective-permute` (and redundant work). Verified with jax 0.10.2 on 8
    CPU devices: `jax.jit(lambda k, x: x + jax.random.uniform(k, x.shape))` over an array sharded
    `P("data")` compiles with a `collective-permute` when the flag is False and without one by
    default. The two settings also draw *different numbers from the same key*
    (`[0.725, 1.853, 2.983, ...]` vs `[0.489, 1.680, 2.616, ...]` for the tutorial's example), so
    flipping the flag during a migration changes results, and keeping it False costs communication.
    jax 0.5.0 made `True` the default.

    ## Example
    ```python
    jax.config.update("jax_threefry_partitionable", False)
    ```

    ## Use instead
    Delete the override and accept the new streams once (re-baseline tests that pinned values), or
    keep it only where bit-for-bit old streams are required and note the cost.

    ## Confidence
    The flag must be the literal name and the value a literal false; a computed value is not
    judged. The sampling clause applies only when `target-jax` < 0.5, the module builds a mesh or
    sharding, the sampling call sits directly in a `jax.jit`-decorated function, and the module does
    not set the flag itself.

    ## Fix safety
    No fix: removing the override changes every random stream the program draws.

    ## References
    - https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html#generating-random-numbers
    - https://github.com/jax-ml/jax/discussions/18480
    """

    code = "JM502"
    name = "non-partitionable-rng"
    summary = "the non-partitionable threefry RNG: extra collective-permutes and different streams"
    trigger_words = (FLAG, ENV, "threefry_partitionable", "random")
    reach = ("jax.config", "jax.threefry_partitionable", "os.putenv", "os.environ", "jax.random")
    jax_versions = "jax_threefry_partitionable defaults to True since jax 0.5.0"

    MESSAGE = (
        "turns off `jax_threefry_partitionable`: random sampling over sharded shapes under jit then"
        " compiles with a `collective-permute`, and draws different numbers than the default"
        " (True since jax 0.5.0) from the same key; remove the override unless the old streams"
        " must be kept bit-for-bit"
    )

    VALID = [
        Valid(
            """
            import jax
            jax.config.update("jax_threefry_partitionable", True)
            """
        ),
        Valid(  # another flag
            """
            import jax
            jax.config.update("jax_enable_x64", False)
            """
        ),
        Valid(  # target 0.10: the default is partitionable, sampling under jit is fine
            """
            import jax
            from jax.sharding import NamedSharding

            @jax.jit
            def f(key, x):
                return x + jax.random.uniform(key, x.shape)
            """
        ),
        Valid(  # a local `config` object, not jax's
            """
            class config:
                @staticmethod
                def update(name, value): ...
            config.update("jax_threefry_partitionable", False)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            jax.config.update("jax_threefry_partitionable", False)
            """
        ),
        Invalid(
            """
            import jax as J
            with J.threefry_partitionable(False):
                pass
            """
        ),
        Invalid(
            """
            import os
            from os import environ as env
            os.environ["JAX_THREEFRY_PARTITIONABLE"] = "0"
            env.setdefault("JAX_THREEFRY_PARTITIONABLE", "false")
            """,
            count=2,
        ),
    ]

    @classmethod
    def triggers(cls, target_jax):
        # "random" only wakes the clause about sampling under the old default (targets before 0.5);
        # otherwise the flag must be named: a file that only samples is not even parsed.
        return cls.trigger_words if target_jax < (0, 5) else (FLAG, ENV, "threefry_partitionable")

    def check_module(self, ctx):
        if ctx.target_jax >= (0, 5) and not any(
            word in ctx.text for word in (FLAG, ENV, "threefry_partitionable")
        ):
            return  # only the old-default clause needs more than the flag's own name
        names = ctx.names
        sets_flag = False
        for node in ctx.nodes:
            if isinstance(node, ast.Call):
                name = call_name(names, node)
                if name == "jax.config.update" and str_literal(argument(node, 0, "name")) == FLAG:
                    sets_flag = True
                    if _is_false(argument(node, 1, "val")):
                        ctx.report(node, self.MESSAGE)
                elif name == "jax.threefry_partitionable":
                    sets_flag = True
                    if _is_false(argument(node, 0, "new_val")):
                        ctx.report(node, self.MESSAGE)
                elif name in ("os.putenv", "os.environ.setdefault") and _env_false(node.args):
                    ctx.report(node, self.MESSAGE)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if (
                    isinstance(target, ast.Subscript)
                    and names.qualified_name(target.value) == "os.environ"
                    and _env_false([target.slice, node.value])
                ):
                    ctx.report(node, self.MESSAGE)
        if ctx.target_jax < (0, 5) and not sets_flag:
            self._old_default(ctx)

    def _old_default(self, ctx) -> None:
        names = ctx.names
        calls = [call_name(names, n) or "" for n in ctx.nodes if isinstance(n, ast.Call)]
        if not any(c in SHARDING for c in calls):
            return
        for func in ctx.nodes:
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and decorated_by(names, func, JIT):
                for node in own_nodes(func.body):
                    name = call_name(names, node) or ""
                    if name.startswith(SAMPLERS) and name not in NOT_SAMPLERS:
                        ctx.report(
                            node,
                            f"with target jax {ctx.target_jax[0]}.{ctx.target_jax[1]} the threefry RNG is"
                            " not partitionable by default: sampling a sharded shape inside jit compiles"
                            " with a `collective-permute`; set `jax_threefry_partitionable` to True"
                            " (the default from jax 0.5.0, which draws different numbers)",
                        )


def _is_false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, 0) and node.value is not None


def _env_false(args: list[ast.expr]) -> bool:
    return len(args) == 2 and str_literal(args[0]) == ENV and str_literal(args[1]) in FALSE_STRINGS
