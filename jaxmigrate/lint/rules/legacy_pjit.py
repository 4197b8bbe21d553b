from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import LegacyNameRule, describe
from jaxmigrate.lint.findings import Blocker
from jaxmigrate.lint.rule import Fix, Invalid, Safety, Valid

if TYPE_CHECKING:
    from jaxmigrate.migrate.pjit_to_jit import PjitSite

CODEMOD = "jaxmigrate.migrate.pjit_to_jit:fix_{}"


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

    with mesh:
        step = pjit(f, in_shardings=P("x"), out_shardings=None)
        y = step(x)
    ```

    ## Use instead
    ```python
    with mesh:
        step = jax.jit(f, in_shardings=NamedSharding(mesh, P("x")), out_shardings=NamedSharding(mesh, P()))
        y = step(x)
    ```

    ## Fix safety
    In JAX 0.10.2 `pjit` is `jax.jit` but for one flag (`jax/_src/pjit.py`, `use_resource_env`):
    it takes the mesh of the `with mesh:` it is called under, binds bare `PartitionSpec` leaves of
    `in_shardings`/`out_shardings` to it, turns `None` leaves into `NamedSharding(mesh, P())`,
    traces the function under it, and, given no sharding at all, runs on all of its devices.

    - Safe: no shardings, or only `Sharding` objects (`NamedSharding(...)`, or names bound once
      to one) and no `None`: renamed to `jax.jit`.
    - Safe: `PartitionSpec(...)`/`None` leaves (in tuples, lists, dicts) where the jitted function
      is called only under `with M:` (applied inside it, or a local name called only inside it),
      `M` a name bound once to a mesh with Auto axes (`Mesh(...)`, `make_mesh(...,
      axis_types=(Auto, ...))`, legacy `maps.Mesh`): `jax.jit` with `NamedSharding(M, leaf)` /
      `NamedSharding(M, P())`.
    - Unsafe, the message saying what it assumes: the same where no `with` shows the mesh but
      exactly one is in scope and some `with` of the module enters it (assumed to be the one the
      calls run under: a mesh no `with` enters is no evidence), or the function is
      also used outside its `with`; and no shardings at all where a call runs under `with M:`
      (assumes the arguments are already on `M`'s devices: otherwise pjit runs on all of them and
      jit on one, checked at run time).
    - Kept, the reason after "not rewritten:": leaves computed at run time, several meshes or
      none, a spec naming an axis the mesh does not have, a mesh that may have Explicit axes (pjit then traces with sharding in types), a `with`
      that may enter another mesh, `device=`/`backend=`, `**kwargs`, pjit used as a value or
      through a variable or a stored `partial`, and a function whose own body reads the context
      mesh (`shard_map` without `mesh=`, `get_abstract_mesh`, `reshard`, a bare `PartitionSpec`
      given to anything but `NamedSharding`/`with_sharding_constraint`/pjit): jit traces it
      without the mesh until `with mesh:` becomes `jax.set_mesh` (JM308). Functions the body
      calls are not followed, nor callers in other modules.

    `in_axis_resources=`/`out_axis_resources=` count as `in_shardings=`/`out_shardings=`. Old and
    generated programs run side by side on 8 CPU devices in the test suite, on JAX 0.10.2 and 0.4.30.

    ## References
    - [JAX changelog](https://docs.jax.dev/en/latest/changelog.html)
    """

    code = "JM201"
    name = "legacy-pjit"
    summary = "`jax.experimental.pjit.pjit` is deprecated; it is `jax.jit`"
    trigger_words = ("pjit",)
    jax_versions = "deprecated in 0.8.0"
    fixable = Safety.SAFE
    sometimes_unsafe = True

    VALID = [
        Valid("import jax\nstep = jax.jit(f, in_shardings=s)\n"),
        Valid("import jax.experimental.pjit as pj\n"),
        Valid("def pjit(f):\n    return f\n\nstep = pjit(g)\n"),
        Valid("try:\n    from jax import jit as pjit\n"
              "except ImportError:\n    from jax.experimental.pjit import pjit\n"),
        Valid("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            mesh = jax.sharding.Mesh(jax.devices(), ("x",))
            with mesh:
                y = jax.jit(f, in_shardings=NamedSharding(mesh, P("x")))(x)
        """),
    ]
    INVALID = [
        Invalid("from jax.experimental.pjit import pjit\nstep = pjit(f)\n",
                expected="import jax\nstep = jax.jit(f)\n"),
        Invalid("import jax.experimental.pjit as pj\nstep = pj.pjit(f)\n",
                expected="import jax\nstep = jax.jit(f)\n"),
        Invalid("import jax\nstep = jax.experimental.pjit.pjit(f)\n",
                expected="import jax\nstep = jax.jit(f)\n"),
        Invalid("from jax.experimental import pjit as pjit_mod\nstep = pjit_mod.pjit(f)\n",
                expected="import jax\nstep = jax.jit(f)\n"),
        # Kept: the star import may bind `jax` itself.
        Invalid("from jax.experimental.pjit import *\nstep = pjit(f)\n"),
        Invalid("import jax as J\nfrom jax.experimental.pjit import pjit\n\n@pjit\ndef step(x):\n    return x\n",
                expected="import jax as J\n\n@J.jit\ndef step(x):\n    return x\n"),
        Invalid(
            """
            import jax
            from jax.experimental.pjit import pjit
            from jax.sharding import PartitionSpec as P
            mesh = jax.sharding.Mesh(jax.devices(), ("x",))
            with mesh:
                y = pjit(f, in_shardings=P("x"), out_shardings=None)(x)
            """,
            expected="""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            mesh = jax.sharding.Mesh(jax.devices(), ("x",))
            with mesh:
                y = jax.jit(
                    f,
                    in_shardings=NamedSharding(mesh, P("x")),
                    out_shardings=NamedSharding(mesh, P()),
                )(x)
            """,
        ),
        # Unsafe: no `with` says which mesh; the one in scope is assumed.
        Invalid(
            """
            import functools
            import jax
            from jax.experimental.pjit import pjit
            from jax.sharding import PartitionSpec as P
            mesh = jax.sharding.Mesh(jax.devices(), ("x",))

            @functools.partial(pjit, in_axis_resources=P("x"))
            def step(x):
                return x

            def run(x):
                with mesh:
                    return step(x)
            """,
            expected="""
            import functools
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            mesh = jax.sharding.Mesh(jax.devices(), ("x",))

            @functools.partial(jax.jit, in_shardings=NamedSharding(mesh, P("x")))
            def step(x):
                return x

            def run(x):
                with mesh:
                    return step(x)
            """,
        ),
        # Kept: the mesh has no name to bind the PartitionSpec to.
        Invalid(
            """
            import jax
            from jax.experimental.pjit import pjit
            from jax.sharding import PartitionSpec as P
            with jax.sharding.Mesh(jax.devices(), ("x",)):
                y = pjit(f, in_shardings=P("x"))(x)
            """
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._sites: list[PjitSite] | None = None

    def report(self, node: ast.AST, symbol: Symbol, shown: str, ctx: FileContext, ambiguous=False) -> None:
        position = ctx.source.position(ctx.source.span(node)[0])
        apps = [site for site in self._planned(ctx) if position in site.mentions]
        message = describe(symbol, shown, ctx, ambiguous)
        fix = None
        if any(site.safe for site in apps):
            fix = Fix(Safety.SAFE, "rewrite as `jax.jit`", codemod=CODEMOD.format("safe"))
        elif any(site.rewritable for site in apps):
            fix = Fix(Safety.UNSAFE, "rewrite as `jax.jit`, assuming what the message says",
                      codemod=CODEMOD.format("unsafe"))
        for site in apps:
            if site.rewritable and site.assumption:
                message += f"; the unsafe fix at line {site.line} {site.assumption}"
        kept = sorted({s.reason for s in apps if s.reason})
        if kept:
            message += "; not rewritten: " + "; ".join(kept)
        blockers = tuple(Blocker("rewrite", reason, min(s.line for s in apps if s.reason == reason))
                         for reason in kept)
        ctx.report(node, message, fix, blockers=blockers)

    def _planned(self, ctx: FileContext) -> list[PjitSite]:
        if self._sites is None:
            # Imported here, once a file mentions pjit: the planner (ast only, no LibCST) and the
            # mesh analysis it shares with the sharding codemods would cost every run ~25 ms.
            from jaxmigrate.migrate.pjit_to_jit import plan_pjit
            from jaxmigrate.migrate._plan import Plan

            self._sites = plan_pjit(ctx.module, Plan())
        return self._sites
