"""JM506: `jax.make_mesh` without `axis_types`, whose default became Explicit in jax 0.9."""

from __future__ import annotations

import ast

from jaxmigrate.lint.patterns import argument, call_name
from jaxmigrate.lint.rule import Edit, Invalid, Rule, Safety, Valid

EXPLICIT_APIS = ("jax.sharding.AxisType.Explicit", "jax.sharding.reshard", "jax.sharding.auto_axes",
                 "jax.sharding.explicit_axes", "jax.typeof", "jax.reshard")


class MeshImplicitAxisTypes(Rule):
    """
    ## What it does
    Finds `jax.make_mesh(shape, names)` calls without `axis_types` in code being migrated from a
    JAX before 0.9 to 0.9 or newer, in modules that use none of the explicit-sharding APIs
    (`AxisType.Explicit`, `reshard`, `auto_axes`, `explicit_axes`, `jax.typeof`) - code written
    for Auto propagation. Which JAX the code was written for is `from-jax` (`--from-jax 0.4`, or
    `from-jax = "0.4"` in `[tool.jaxmigrate]`); by default, the lowest version the project's own
    requirements allow (`jax==0.4.30`, `jax>=0.4,<0.5`, `jax[cpu]~=0.4.30` in `pyproject.toml`,
    `requirements*.txt`, `setup.cfg` or `setup.py`). Code written for 0.9 or newer, where
    Explicit axes are the intended default, is never reported.

    ## Why is this bad
    Up to jax 0.8 `make_mesh` built `Auto` axes (0.8.x warned: "The default axis_types will change
    in JAX v0.9.0 to jax.sharding.AxisType.Explicit"); from 0.9.0 it builds `Explicit` axes, where
    sharding is part of each array's type and operations GSPMD used to resolve become errors.
    Verified with jax 0.10.2 on 8 CPU devices: `jax.jit(lambda a: jnp.roll(a, 1, axis=0))` on a
    `(16, 4)` array sharded `P("data")` works on an Auto mesh and raises on the default mesh:
    `ShardingTypeError: slicing on sharded dims where out dim (1) is not divisible by mesh axes
    (8) with spec (data) is not implemented.` Output shardings differ too (`P(None, None)` vs `P()`).

    ## Example
    ```python
    mesh = jax.make_mesh((8,), ("data",))
    ```

    ## Use instead
    ```python
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    ```

    ## Confidence
    Silent for targets before 0.9, for code written for 0.9 or newer, when `axis_types` is passed,
    when arguments are unpacked (`*args`, `**kw`), and in modules that already use an
    explicit-sharding API. When the JAX the code was written for is not known (no `from-jax`, no
    jax requirement with a lower bound found) the call is reported, because this is a migration
    tool and a silent change of meaning costs more than a finding that one setting turns off;
    the message says so.

    ## Fix safety
    Safe when the code is known to be written for a JAX before 0.9: the fix spells out `Auto`, the
    meaning the call had when the code was written. Unsafe when that is not known: for code
    written for 0.9 or newer, `Auto` would replace the Explicit axes it meant. It is offered when
    the call is written through the `jax` module (`jax.make_mesh`, `J.make_mesh`, to reuse that
    alias) and the number of axes is a literal tuple or list.

    ## References
    - https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html
    - https://docs.jax.dev/en/latest/_autosummary/jax.make_mesh.html
    """

    code = "JM506"
    name = "mesh-implicit-axis-types"
    summary = "`jax.make_mesh` without `axis_types` builds Explicit axes from jax 0.9"
    trigger_words = ("make_mesh",)
    reach = ("jax.make_mesh",)
    jax_versions = "default axis_types Explicit since jax 0.9.0 (warned in 0.8.x)"
    fixable = Safety.SAFE
    sometimes_unsafe = True

    VALID = [
        Valid("import jax\nm = jax.make_mesh((8,), ('data',), axis_types=(jax.sharding.AxisType.Auto,))\n"),
        Valid(  # explicit-sharding code: Explicit is what it wants
            """
            import jax
            from jax.sharding import reshard
            mesh = jax.make_mesh((8,), ("data",))
            """
        ),
        Valid(  # AxisType.Explicit named: Explicit is what it wants
            """
            import jax
            from jax.sharding import AxisType as T
            mesh = jax.make_mesh((8,), ("data",))
            other = jax.make_mesh((8,), ("x",), axis_types=(T.Explicit,))
            """
        ),
        Valid("import jax\nm = jax.make_mesh(*spec)\n"),
        Valid("def make_mesh(*a):\n    pass\nm = make_mesh((8,), ('data',))\n"),
    ]
    INVALID = [
        Invalid(
            "import jax\nmesh = jax.make_mesh((8,), ('data',))\n",
            "import jax\nmesh = jax.make_mesh((8,), ('data',), axis_types=(jax.sharding.AxisType.Auto,))\n",
        ),
        Invalid(
            "import jax as J\nmesh = J.make_mesh((2, 4), names)\n",
            "import jax as J\nmesh = J.make_mesh((2, 4), names, axis_types=(J.sharding.AxisType.Auto,) * 2)\n",
        ),
        Invalid("from jax import make_mesh as mm\nmesh = mm(shape, ('data', 'model'))\n"),
    ]

    def check_module(self, ctx):
        if ctx.target_jax < (0, 9) or (ctx.from_jax is not None and ctx.from_jax >= (0, 9)):
            return
        if any(b.qualname in EXPLICIT_APIS for b, _ in ctx.names.imports()):
            return
        calls = []
        for node in ctx.nodes:
            if isinstance(node, (ast.Name, ast.Attribute)) and ctx.names.qualified_name(node) in EXPLICIT_APIS:
                return
            if isinstance(node, ast.Call) and call_name(ctx.names, node) == "jax.make_mesh":
                calls.append(node)
        for call in calls:
            if argument(call, 2, "axis_types") is not None or any(
                isinstance(a, ast.Starred) for a in call.args
            ) or any(k.arg is None for k in call.keywords) or len(call.args) + len(call.keywords) < 2:
                continue
            message = (
                "`make_mesh` without `axis_types` builds Explicit axes from jax 0.9 (Auto before):"
                " code written for Auto propagation can fail with `ShardingTypeError` or get other"
                " output shardings; pass `axis_types=(AxisType.Auto,) * n` to keep the old meaning"
            )
            if ctx.from_jax is None:
                message += (
                    " (the JAX this code was written for is not known: if it is 0.9 or newer, set"
                    " `from-jax` in [tool.jaxmigrate] or pin jax in the project's requirements)"
                )
            ctx.report(call, message, self._fix(ctx, call))

    def _fix(self, ctx, call: ast.Call):
        func = call.func
        if not (isinstance(func, ast.Attribute) and ctx.names.qualified_name(func.value) == "jax"):
            return None
        count = None
        for arg in (argument(call, 0, "axis_shapes"), argument(call, 1, "axis_names")):
            if isinstance(arg, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in arg.elts):
                count = len(arg.elts)
                break
        if count is None:
            return None
        last = max([*call.args, *(k.value for k in call.keywords)], key=lambda n: ctx.source.span(n)[1])
        end = ctx.source.span(last)[1]
        auto = f"({ctx.segment(func.value)}.sharding.AxisType.Auto,)"
        text = f", axis_types={auto}" + (f" * {count}" if count > 1 else "")
        if ctx.from_jax is None:  # Auto may not be what the code meant: it may be written for 0.9+
            return ctx.fix(Safety.UNSAFE, "spell out Auto, the axis types before jax 0.9 (the JAX this code"
                           " was written for is not known)", Edit(end, end, text))
        return ctx.fix(Safety.SAFE, "spell out the Auto axis types it had before jax 0.9", Edit(end, end, text))
