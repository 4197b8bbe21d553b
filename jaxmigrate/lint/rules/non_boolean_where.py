"""JM511: a jax.numpy reduction given a `where=` mask that is not boolean (an error since JAX 0.8)."""

from __future__ import annotations

import ast
import re

from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.findings import Safety
from jaxmigrate.lint.patterns import call_name
from jaxmigrate.lint.rule import Invalid, Rule, Valid
from jaxmigrate.names import ValueBinding

# No leading `\b`: it would cost re the literal scan for `where` (25x slower on jax's tree); the
# character before is checked by hand.
_WHERE_KEYWORD = re.compile(r"where\s*(?:#[^\n]*\s*)*=(?!=)")
_WORD_CHAR = re.compile(r"\w")
_NUMPY = ("sum", "prod", "max", "min", "amax", "amin", "all", "any", "mean", "var", "std",
          "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd")
# The functions that pass `where` to jax._src.numpy.reductions.check_where in JAX 0.10.2.
REDUCTIONS = frozenset({*(f"jax.numpy.{name}" for name in _NUMPY),
                        "jax.scipy.special.logsumexp", "jax.nn.logsumexp"})
# Results that are boolean whatever their inputs.
_BOOLEAN_CALLS = frozenset({f"jax.numpy.{name}" for name in (
    "logical_and", "logical_or", "logical_not", "logical_xor", "isnan", "isinf", "isfinite", "isclose",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "isin", "signbit")})
# Results with the dtype their array arguments promote to.
_JOINS = {"jax.numpy.where": slice(1, 3), "jax.numpy.concatenate": None, "jax.numpy.stack": None,
          "jax.numpy.hstack": None, "jax.numpy.vstack": None, "jax.numpy.tile": slice(0, 1),
          "jax.numpy.repeat": slice(0, 1), "jax.numpy.reshape": slice(0, 1),
          "jax.numpy.broadcast_to": slice(0, 1), "jax.numpy.expand_dims": slice(0, 1)}
_ARRAY_METHODS = frozenset({"reshape", "ravel", "flatten", "squeeze", "T", "transpose"})
_CASTS = frozenset({"jax.numpy.asarray", "jax.numpy.array", "numpy.asarray", "numpy.array"})
_BOOL_DTYPES = frozenset({"bool", "jax.numpy.bool_", "numpy.bool_", "jax.numpy.bool", "numpy.bool"})
_DEPTH = 8  # names followed to their values, at most


class NonBooleanWhere(Rule):
    """
    ## What it does
    Finds `jax.numpy` reductions (`sum`, `mean`, `std`, `var`, `max`, `any`, their `nan*` forms,
    `logsumexp`) whose `where=` mask is an integer or float array: made by `jnp.where(c, 1, 0)`,
    a number, arithmetic on them, or a `concatenate`/`stack`/`reshape` of such, followed through
    names bound once.

    ## Why is this bad
    JAX took any mask and read it as `mask != 0` (and weighted `mean`/`var`/`std`'s count by its
    values). JAX 0.4.36 deprecated non-boolean masks (a warning, and a cast to bool); since JAX
    0.8.0 the call raises `ValueError: jnp.std: where must be None or a boolean array`. brax
    0.0.16's ARS trainer (`jnp.std(eval_scores, where=reward_weight_double)`, a 0/1 int mask) fails
    this way on JAX 0.10.

    ## Example
    ```python
    weights = jnp.where(scores > cutoff, 1, 0)
    spread = jnp.std(scores, where=weights)
    ```

    ## Use instead
    ```python
    weights = jnp.where(scores > cutoff, 1, 0)
    spread = jnp.std(scores, where=jnp.asarray(weights, dtype=bool))
    ```

    ## Confidence
    Reported only where the mask is proven not boolean; a mask whose dtype is not known here (a
    parameter, another function's result) is left alone. Array methods (`x.sum(where=...)`) are not
    resolved and not reported.

    ## Fix safety
    Unsafe: the fix casts the mask to bool, as JAX 0.4.36 - 0.7 did. That is the old meaning for a
    0/1 mask; a mask with other values weighted `mean`/`var`/`std`'s count by them before, and
    counts each selected element once after. No fix where the reduction is not called through a
    name bound to `jax.numpy` (the cast is written with it).

    ## References
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html) (0.4.36: non-boolean `where`
      deprecated; 0.8.0: an error)
    """

    code = "JM511"
    name = "non-boolean-reduction-where"
    summary = "a jax.numpy reduction's `where=` mask is not boolean (ValueError since JAX 0.8)"
    trigger_words = ("where",)
    reach = tuple(sorted(REDUCTIONS))
    jax_versions = "non-boolean `where` deprecated in 0.4.36, an error since 0.8.0"
    fixable = Safety.UNSAFE

    @classmethod
    def written(cls, text, words, imports) -> bool:
        """The mask is read only as a keyword: a text that says `where` but never `where=` (the word is
        everywhere, `jnp.where(...)`) has nothing for this rule. A comment may sit before the `=`."""
        return any(not (found.start() and _WORD_CHAR.match(text, found.start() - 1))
                   for found in _WHERE_KEYWORD.finditer(text))

    VALID = [
        Valid("import jax.numpy as jnp\ny = jnp.std(x, where=x > 0)\n"),
        Valid("import jax.numpy as jnp\nm = jnp.where(x > 0, True, False)\ny = jnp.mean(x, where=m)\n"),
        Valid("import jax.numpy as jnp\ny = jnp.sum(x, where=mask)\n"),  # the mask's dtype is not known
        Valid("import jax.numpy as jnp\ny = jnp.mean(x, where=jnp.isfinite(x) & (x != 0))\n"),
        Valid("import numpy as np\ny = np.std(x, where=np.where(x > 0, 1, 0))\n"),  # NumPy casts it
        Valid(  # rebound: either value may reach the call
            """
            import jax.numpy as jnp
            m = jnp.where(x > 0, 1, 0)
            m = x > 0
            y = jnp.std(x, where=m)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import jax.numpy as jnp
            w = jnp.where(s > s.mean(), 1, 0)
            w2 = jnp.concatenate([w, w], axis=0)
            spread = jnp.std(s2, where=w2)
            """,
            expected="""
            import jax.numpy as jnp
            w = jnp.where(s > s.mean(), 1, 0)
            w2 = jnp.concatenate([w, w], axis=0)
            spread = jnp.std(s2, where=jnp.asarray(w2, dtype=bool))
            """,
        ),
        Invalid("import jax.numpy as jnp\ny = jnp.mean(x, where=(x > 0).astype(jnp.int32))\n",
                expected="import jax.numpy as jnp\ny = jnp.mean(x, where=jnp.asarray((x > 0).astype(jnp.int32), dtype=bool))\n"),
        Invalid("from jax.numpy import sum as total\ny = total(x, where=1)\n"),  # no `jnp` to cast with: no fix
    ]

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        where = next((k.value for k in node.keywords if k.arg == "where"), None)
        if where is None or call_name(ctx.names, node) not in REDUCTIONS:
            return
        if _is_boolean(ctx, where, _DEPTH) is not False:
            return
        name = call_name(ctx.names, node).rpartition(".")[2]
        message = (f"`where=` of `{name}` is not a boolean array: JAX read a mask as `mask != 0` and weighted "
                   "mean/var/std's count by its values; JAX 0.4.36 deprecated it and since JAX 0.8.0 the call "
                   "raises ValueError ('where must be None or a boolean array')")
        ctx.report(where, message, _fix(ctx, node, where))


def _fix(ctx: FileContext, call: ast.Call, where: ast.expr):
    func = call.func
    if not (isinstance(func, ast.Attribute) and ctx.names.qualified_name(func.value) == "jax.numpy"):
        return None
    cast = f"{ctx.segment(func.value)}.asarray({ctx.segment(where)}, dtype=bool)"
    return ctx.fix(Safety.UNSAFE, "cast the mask to bool, as JAX 0.4.36 - 0.7 did (the old meaning for a 0/1 "
                   "mask; other values weighted mean/var/std's count before)", ctx.replace(where, cast))


def _is_boolean(ctx: FileContext, node: ast.expr, depth: int) -> bool | None:
    """True: a boolean array or value; False: proven not boolean; None: not known here."""
    if depth <= 0:
        return None
    if isinstance(node, ast.Constant):
        return None if node.value is None else isinstance(node.value, bool)
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_boolean(ctx, node.operand, depth - 1) if isinstance(node.op, ast.Invert) else None
    if isinstance(node, ast.BinOp):
        sides = [_is_boolean(ctx, side, depth - 1) for side in (node.left, node.right)]
        if False in sides:
            return False
        return True if sides == [True, True] and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) else None
    if isinstance(node, (ast.List, ast.Tuple)):
        return _join(ctx, node.elts, depth)
    if isinstance(node, ast.Name):
        bindings = ctx.names.bindings(node)
        if len(bindings) == 1 and isinstance(bindings[0], ValueBinding):
            return _is_boolean(ctx, bindings[0].value, depth - 1)
        return None
    if isinstance(node, ast.Attribute) and node.attr in _ARRAY_METHODS:
        return _is_boolean(ctx, node.value, depth - 1)
    if isinstance(node, ast.Call):
        return _call_is_boolean(ctx, node, depth)
    return None


def _call_is_boolean(ctx: FileContext, node: ast.Call, depth: int) -> bool | None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "astype" and len(node.args) == 1:
        return _dtype_is_boolean(ctx, node.args[0])
    if isinstance(func, ast.Attribute) and func.attr in _ARRAY_METHODS:
        return _is_boolean(ctx, func.value, depth - 1)
    name = call_name(ctx.names, node)
    if name in _BOOLEAN_CALLS:
        return True
    if name in _CASTS:
        dtype = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "dtype"), None)
        if dtype is not None:
            return _dtype_is_boolean(ctx, dtype)
        return _is_boolean(ctx, node.args[0], depth - 1) if node.args else None
    if name in _JOINS:
        span = _JOINS[name]
        args = node.args[span] if span is not None else node.args[:1]
        return _join(ctx, args, depth) if args else None
    return None


def _join(ctx: FileContext, values, depth: int) -> bool | None:
    """The dtype kind values promote to: boolean only if all are, not boolean if one is not."""
    kinds = [_is_boolean(ctx, value, depth - 1) for value in values]
    if False in kinds:
        return False
    return True if kinds and all(kinds) else None


def _dtype_is_boolean(ctx: FileContext, dtype: ast.expr) -> bool | None:
    if isinstance(dtype, ast.Constant) and isinstance(dtype.value, str):
        return dtype.value in ("bool", "bool_", "?")
    if isinstance(dtype, ast.Name) and dtype.id in ("bool", "int", "float") and not ctx.names.bindings(dtype):
        return dtype.id == "bool"
    name = ctx.names.qualified_name(dtype)
    if name is None or not name.startswith(("jax.numpy.", "numpy.")):
        return None
    return name in _BOOL_DTYPES
