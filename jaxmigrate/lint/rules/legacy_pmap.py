from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import LegacyNameRule, describe
from jaxmigrate.lint.rule import Fix, Invalid, Safety, Valid

if TYPE_CHECKING:
    from jaxmigrate.migrate.pmap_to_shard_map import Application, Planner

CODEMOD = "jaxmigrate.migrate.pmap_to_shard_map:fix_mentions"
GLOBAL_CODEMOD = "jaxmigrate.migrate.to_global_jit:fix"


class LegacyPmap(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.pmap`: imports of it, attribute accesses that reach it
    (`jax.pmap`, `J.pmap`) and bare `pmap` brought in by `from jax import *`.

    ## Why is this bad
    `jax.pmap` is superseded, not deprecated: it still works in JAX 0.10, but it is now itself
    implemented as `jax.jit` over `jax.shard_map`, and its per-device calling convention (a leading
    device axis on every argument and result) does not compose with global `jax.Array`s,
    `NamedSharding`, or multi-dimensional meshes. It is therefore reported whatever the target
    JAX version.

    ## Example
    ```python
    import jax

    step = jax.pmap(train_step, axis_name="batch")
    ```

    ## Use instead
    ```python
    import jax
    from jax.sharding import AxisType, PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(AxisType.Auto,))
    step = jax.jit(jax.shard_map(train_step, mesh=mesh, in_specs=P("batch"), out_specs=P("batch")))
    ```

    ## Fix safety
    Unsafe. Each application whose meaning the site shows becomes one expression over public
    APIs, `jax.jit(jax.shard_map(jax.vmap(f, in_axes=...), mesh=mesh, in_specs=..., out_specs=...,
    check_vma=False))` (a stack of three decorators for `@pmap`), over one module-level mesh per
    axis name, `jax.make_mesh((jax.device_count(),), (axis,), axis_types=(AxisType.Auto,))`. The
    calling convention (a leading device axis on every argument and result) and the collectives
    inside (`psum`, `pmean`, `all_gather`, `ppermute`, `axis_index`) stay as they were; the test
    suite runs old and new side by side on 8 CPU devices.

    It is unsafe because the new code holds under one condition the old code did not need: every
    call maps exactly `jax.device_count()` slices, in a program that runs as one process. pmap
    sizes its mesh at each call, from the first n devices (n the length of the mapped axis), so
    the old code also ran on fewer devices; the new code raises then. With several processes
    (`jax.distributed`), pmap takes each process's own slices and converts them to global arrays
    (and its results back); `jax.jit` expects global arrays, so each call site would first have to
    build them (`jax.make_array_from_process_local_data`), and the module-level
    `jax.device_count()` starts the backend at import, before a later `jax.distributed.initialize()`.
    In a module that shows several processes (`jax.process_index`, `jax.process_count`,
    `jax.distributed`, `multihost_utils`), the finding says so.

    Not offered (the finding says why): nested pmaps, `devices=`, `backend=`, `axis_size=`,
    `out_axes` with a `None`, options computed at run time, calls of the mapped function with
    keyword arguments (`jax.shard_map` takes positional ones only), pmap passed around as a value.

    With `--unsafe-fixes`, a module whose pmaps and driving code can be proven to mean the same
    over global arrays moves to the global view instead (`jaxmigrate/migrate/to_global_jit.py`):
    each pmap becomes `jax.jit`, `pmean` of per-shard means and `psum` of per-shard sums go (a
    `psum` of means keeps its factor of the device count), replicate / shard / `x[0]` at the call
    sites become `jax.device_put` / `jax.make_array_from_process_local_data` on a module-level
    mesh / nothing. Unsafe: the calling convention changes (no device axis), float reductions
    regroup, and callers in other modules are not seen. Where it cannot be proven, the finding
    names the line that blocks it and the exact rewrite above is the fix.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    """

    code = "JM101"
    name = "legacy-pmap"
    summary = "`jax.pmap` is superseded by `jax.shard_map` / `jax.jit`"
    trigger_words = ("pmap",)
    jax_versions = "superseded (still present in 0.10; implemented via jit + shard_map)"
    fixable = Safety.UNSAFE

    VALID = [
        Valid("import jax\nstep = jax.jit(jax.shard_map(f, mesh=m, in_specs=s, out_specs=s))\n"),
        Valid("def pmap(f):\n    return f\n\nstep = pmap(g)\n"),
        Valid("def make(jax):\n    return jax.pmap(f)\n"),
        Valid("class T:\n    def run(self):\n        return self.pmap(f)\n"),
        Valid('import jax\nname = "jax.pmap"  # jax.pmap in a comment\n'),
        Valid("import jax\nx = jax.tree_util.tree_map(f, t)\n"),
        Valid("try:\n    from jax import shard_map\nexcept ImportError:\n    from jax import pmap\n"),
        Valid("from mylib import pmap\nstep = pmap(f)\n"),
    ]
    INVALID = [
        Invalid(
            "import jax\nstep = jax.pmap(f, axis_name='i')\n",
            expected="""
            import jax
            from jax.sharding import PartitionSpec as P
            mesh = jax.make_mesh(
                (jax.device_count(),),
                ('i',),
                axis_types=(jax.sharding.AxisType.Auto,),
            )
            step = jax.jit(
                jax.shard_map(
                    jax.vmap(f),
                    mesh=mesh,
                    in_specs=P('i'),
                    out_specs=P('i'),
                    check_vma=False,
                ),
            )
            """,
        ),
        Invalid(
            "import jax as J\nstep = J.pmap(f)\n",
            expected="""
            import jax as J
            from jax.sharding import PartitionSpec as P
            mesh = J.make_mesh(
                (J.device_count(),),
                ("devices",),
                axis_types=(J.sharding.AxisType.Auto,),
            )
            step = J.jit(
                J.shard_map(
                    J.vmap(f),
                    mesh=mesh,
                    in_specs=P("devices"),
                    out_specs=P("devices"),
                    check_vma=False,
                ),
            )
            """,
        ),
        Invalid(
            "from jax import pmap as pm\nstep = pm(f)\nagain = pm(g)\n",
            expected="""
            import jax
            from jax.sharding import PartitionSpec as P
            mesh = jax.make_mesh(
                (jax.device_count(),),
                ("devices",),
                axis_types=(jax.sharding.AxisType.Auto,),
            )
            step = jax.jit(
                jax.shard_map(
                    jax.vmap(f),
                    mesh=mesh,
                    in_specs=P("devices"),
                    out_specs=P("devices"),
                    check_vma=False,
                ),
            )
            again = jax.jit(
                jax.shard_map(
                    jax.vmap(g),
                    mesh=mesh,
                    in_specs=P("devices"),
                    out_specs=P("devices"),
                    check_vma=False,
                ),
            )
            """,
        ),
        Invalid("from jax import *\nstep = pmap(f)\n"),
        Invalid(
            "import jax\n\n@jax.pmap\ndef step(x):\n    return x\n",
            expected="""
            from functools import partial

            import jax
            from jax.sharding import PartitionSpec as P

            mesh = jax.make_mesh(
                (jax.device_count(),),
                ("devices",),
                axis_types=(jax.sharding.AxisType.Auto,),
            )


            @jax.jit
            @partial(
                jax.shard_map,
                mesh=mesh,
                in_specs=P("devices"),
                out_specs=P("devices"),
                check_vma=False,
            )
            @jax.vmap
            def step(x):
                return x
            """,
        ),
        Invalid(
            "import functools, jax\n\n@functools.partial(jax.pmap, axis_name='i')\ndef step(x):\n    return x\n",
            expected="""
            import functools, jax

            from jax.sharding import PartitionSpec as P

            mesh = jax.make_mesh(
                (jax.device_count(),),
                ('i',),
                axis_types=(jax.sharding.AxisType.Auto,),
            )


            @jax.jit
            @functools.partial(
                jax.shard_map,
                mesh=mesh,
                in_specs=P('i'),
                out_specs=P('i'),
                check_vma=False,
            )
            @jax.vmap
            def step(x):
                return x
            """,
        ),
        Invalid(
            "import jax\npm = jax.pmap\nstep = pm(f)\n",
            expected="""
            import jax
            from jax.sharding import PartitionSpec as P
            pm = jax.pmap
            mesh = jax.make_mesh(
                (jax.device_count(),),
                ("devices",),
                axis_types=(jax.sharding.AxisType.Auto,),
            )
            step = jax.jit(
                jax.shard_map(
                    jax.vmap(f),
                    mesh=mesh,
                    in_specs=P("devices"),
                    out_specs=P("devices"),
                    check_vma=False,
                ),
            )
            """,
        ),
        # `jax` may be the module or a local object: reported, with the ambiguity in the message.
        Invalid("try:\n    import jax\nexcept ImportError:\n    jax = None\nstep = jax.pmap(f)\n"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._by_mention: dict[int, list[Application]] | None = None
        self._planner: Planner | None = None

    def fix_for(self, symbol: Symbol, node: ast.AST, ctx: FileContext) -> Fix | None:
        exact = None
        if any(app.reason is None for app in self._applications(node, ctx)):
            exact = Fix(
                Safety.UNSAFE,
                "rewrite as `jax.jit(jax.shard_map(jax.vmap(f), ...))` over a module-level mesh",
                codemod=CODEMOD,
            )
        if self._applications(node, ctx) and _global_view(ctx).possible:
            notes = "".join(f"; {note}" for note in _global_view(ctx).notes)
            return Fix(Safety.UNSAFE, "move the module's pmapped steps and their call sites to the global view "
                       "(`jax.jit` over arrays sharded on a mesh, collectives GSPMD inserts removed)" + notes,
                       codemod=GLOBAL_CODEMOD, fallback=exact, whole_module=True)
        return exact

    def report(self, node, symbol, shown, ctx, ambiguous=False) -> None:
        message = describe(symbol, shown, ctx, ambiguous)
        apps = self._applications(node, ctx)
        kept = sorted({app.reason for app in apps if app.reason})
        if kept:
            message += "; not rewritten: " + "; ".join(kept)
        view = _global_view(ctx) if apps else None
        if view is not None and not view.possible and view.reason not in kept:
            message += f"; global view not possible: {view.blocker}"
        fix = self.fix_for(symbol, node, ctx)
        if fix is not None and fix.codemod == CODEMOD and self._planner.multi_process:
            # The global view makes host-local batches global itself; the exact rewrite does not.
            message += (
                f"; this module runs as several processes ({self._planner.multi_process}), and the fix is "
                "right in one process only: pmap takes and returns each process's own slices (it makes "
                "them global arrays itself), `jax.jit` over the module-level mesh takes global arrays, "
                "so every call would have to build them (`jax.make_array_from_process_local_data`)"
            )
        ctx.report(node, message, fix)

    def _applications(self, mention: ast.AST, ctx: FileContext) -> list[Application]:
        """The pmap applications that stem from this mention of it."""
        if self._by_mention is None:
            from jaxmigrate.migrate.pmap_to_shard_map import planner_of  # see _global_view

            planner = self._planner = planner_of(ctx.module)
            self._by_mention = {}
            for app in planner.applications():
                for origin in planner.resolver.mentions(app.ref):
                    self._by_mention.setdefault(id(origin), []).append(app)
        return self._by_mention.get(id(mention), [])


def _global_view(ctx: FileContext):
    """The module's global view (``to_global_jit.plan_global``, planned once per module). The
    planners are imported on a file's first pmap: a process checking files that never mention it
    imports none of them. (They are ast-only: no LibCST parse on the check path.)"""
    from jaxmigrate.migrate.to_global_jit import plan_global

    return plan_global(ctx.module)
