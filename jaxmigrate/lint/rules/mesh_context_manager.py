import ast

from jaxmigrate import catalogue
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import CatalogueRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes
from jaxmigrate.names import ValueBinding


class MeshContextManager(SiteFixes, CatalogueRule):
    """
    ## What it does
    Reports `with mesh:` where the with-item is a `jax.sharding.Mesh` (or the removed
    `jax.experimental.maps.Mesh`, or `jax.make_mesh(...)`): either such a call written in the
    `with`, or a name every binding of which is such a call.

    ## Why is this bad
    Entering a `Mesh` as a context manager set the implicit mesh that `pjit` and
    `with_sharding_constraint` read. It is deprecated in favour of `jax.set_mesh`, and emits a
    `DeprecationWarning` in JAX 0.10.

    ## Example
    ```python
    mesh = jax.make_mesh((8,), ("x",))
    with mesh:
        y = step(x)
    ```

    ## Use instead
    ```python
    with jax.set_mesh(mesh):
        y = step(x)
    ```

    ## Fix safety
    Unsafe. `with mesh:` becomes `with jax.set_mesh(mesh):` for a mesh built by `Mesh(...)` or by
    `jax.make_mesh(..., axis_types=<all Auto>)`; bare `PartitionSpec`s in `jit` shardings,
    `with_sharding_constraint` and `device_put` then resolve against it as before. JAX 0.10.2's
    `pjit` is the other way round: it reads `with mesh:` only and raises `RuntimeError: pjit
    requires a non-empty mesh in context` under `set_mesh`. So in a module that uses pjit (any
    spelling, `jax._src.pjit` included) the fix also rewrites every pjit to `jax.jit` (JM201), and
    is offered only when every one of them can be. Kept, with the reason: `with mesh as m:`, meshes
    with Explicit axes or of unknown origin, a module with a pjit that stays, and a `with` that runs
    under a trace (in a function that is jitted, pjitted, pmapped, vmapped, grad'ed, scanned, a flax
    Module method, or called from one), where `set_mesh` raises `ValueError`. Unsafe because code of
    other modules run under it may still call pjit, and libraries that read the old resource-env
    mesh (flax.linen partitioning helpers) do not see `set_mesh`'s.

    ## References
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    """

    code = "JM308"
    name = "mesh-context-manager"
    summary = "`with mesh:` is deprecated; use `with jax.set_mesh(mesh):`"
    trigger_words = ("Mesh", "make_mesh")
    jax_versions = "deprecated after 0.10.0 (warns in 0.10.2)"

    fixable = Safety.UNSAFE
    site_planner = "jaxmigrate.migrate.sharding_apis:analyse_mesh_context_manager"
    site_codemod = "jaxmigrate.migrate.sharding_apis:rewrite_mesh_context_manager"
    site_fix_message = "rewrite as `with jax.set_mesh(mesh):`"

    def visit_With(self, node: ast.With, ctx: FileContext) -> None:
        (entry,) = [s for s in catalogue.for_code(self.code) if s.kind == "context-manager"]
        if not entry.applies_to(ctx.target_jax):
            return
        for item in node.items:
            if self._is_mesh(item.context_expr, ctx, set(entry.constructors)):
                self.report(item.context_expr, entry, "with mesh:", ctx)

    def _is_mesh(self, expr: ast.expr, ctx: FileContext, constructors: set[str]) -> bool:
        if isinstance(expr, ast.Call):
            return _makes_mesh(expr, ctx, constructors)
        if isinstance(expr, ast.Name):
            bindings = ctx.names.bindings(expr)
            return bool(bindings) and all(
                isinstance(b, ValueBinding) and isinstance(b.value, ast.Call) and _makes_mesh(b.value, ctx, constructors)
                for b in bindings
            )
        return False

    VALID = [
        Valid("import jax\nmesh = jax.make_mesh((8,), ('x',))\nwith jax.set_mesh(mesh):\n    pass\n"),
        Valid("from jax.sharding import Mesh\nmesh = Mesh(d, ('x',))\nmesh = other\nwith mesh:\n    pass\n"),
        Valid("def Mesh(*a):\n    return open('f')\n\nwith Mesh(1) as f:\n    pass\n"),
        Valid("import jax\ndef f(mesh):\n    with mesh:\n        pass\n"),
    ]
    INVALID = [
        Invalid(
            """
            import jax
            from jax.sharding import Mesh

            mesh = Mesh(jax.devices(), ('x',))
            with mesh:
                y = f(x)
            """,
            expected="""
            import jax
            from jax.sharding import Mesh

            mesh = Mesh(jax.devices(), ('x',))
            with jax.set_mesh(mesh):
                y = f(x)
            """,
        ),
        Invalid("import jax\nmesh = jax.make_mesh((8,), ('x',))\nwith mesh:\n    y = f(x)\n"),
        Invalid("from jax.sharding import Mesh as M\nwith M(devs, ('x',)) as mesh:\n    pass\n"),
        Invalid(
            "import jax\nfrom jax.sharding import Mesh\nm = Mesh(d, ('x',))\n\ndef run():\n"
            "    with m, open('log'):\n        pass\n",
            expected="""
            import jax
            from jax.sharding import Mesh
            m = Mesh(d, ('x',))

            def run():
                with jax.set_mesh(m), open('log'):
                    pass
            """,
        ),
        Invalid(
            """
            import jax
            from jax.experimental.pjit import pjit
            from jax.sharding import Mesh, PartitionSpec as P

            mesh = Mesh(jax.devices(), ('x',))
            with mesh:
                y = pjit(f, in_shardings=P('x'))(x)
            """,
            expected="""
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            mesh = Mesh(jax.devices(), ('x',))
            with jax.set_mesh(mesh):
                y = jax.jit(f, in_shardings=NamedSharding(mesh, P('x')))(x)
            """,
        ),
        Invalid(  # a pjit the jit rewrite does not follow: no fix
            "import jax\nfrom jax._src.pjit import pjit\nfrom jax.sharding import Mesh\n"
            "mesh = Mesh(jax.devices(), ('x',))\nwith mesh:\n    y = pjit(f)(x)\n"
        ),
        Invalid(  # under a trace, where set_mesh raises: no fix
            "import jax\nfrom jax.sharding import Mesh\nmesh = Mesh(jax.devices(), ('x',))\n\n"
            "@jax.jit\ndef f(x):\n    with mesh:\n        return x\n"
        ),
    ]


def _makes_mesh(call: ast.Call, ctx: FileContext, constructors: set[str]) -> bool:
    """Whether every name the callee may be is a mesh constructor: `Mesh` imported both from
    `jax.experimental.maps` and from `jax.sharding` is a mesh either way (and becomes one name once
    JM303 moved the first import, which must not make a `with mesh:` appear only then)."""
    func = call.func
    if isinstance(func, ast.Attribute) and not any(c.endswith(f".{func.attr}") for c in constructors):
        return False  # `with tf.name_scope(...)`: no constructor ends so (resolving costs)
    candidates = ctx.names.candidates(func)
    return bool(candidates) and candidates <= constructors
