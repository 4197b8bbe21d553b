from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.legacy import LegacyNameRule, describe
from jaxmigrate.lint.findings import Blocker
from jaxmigrate.lint.rule import Fix, Invalid, Safety, Valid

if TYPE_CHECKING:
    from jaxmigrate.migrate.pmap_to_shard_map import Application

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
    The global view: plain `jax.jit` (the `pmean` of per-shard means goes: GSPMD inserts it), and
    the driving code lays out global arrays on a mesh built where training starts.
    ```python
    import jax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

    step = jax.jit(train_step)

    def train(params, batches):
        mesh = jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(AxisType.Auto,))
        params = jax.device_put(params, NamedSharding(mesh, P()))
        for batch in batches:
            batch = jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), batch)
            params = step(params, batch)
    ```

    ## Fix safety
    Unsafe. With `--unsafe-fixes`, a module whose pmaps and driving code can be proven to mean the
    same over global arrays moves to the global view (below). Otherwise an application may get
    the exact rewrite, one expression over public APIs that keeps pmap's calling convention,
    `jax.jit(jax.shard_map(jax.vmap(f, in_axes=...), mesh=mesh, in_specs=..., out_specs=...,
    check_vma=False))`, with its mesh built just before it; the test suite runs old and new side
    by side on 8 CPU devices.

    The exact rewrite is offered only where it is right in the setting the module shows
    (`jaxmigrate/migrate/_pmap_setting.py`); elsewhere the code stays (JAX 0.10 still runs
    `jax.pmap`) and the finding says why:
    - not at import: the mesh is built where the step is built, and a mesh at module level
      starts JAX's backend when the module is imported, so a launcher that imports it and then
      calls `jax.distributed.initialize()` fails. A pmap applied at module level keeps pmap;
    - built once: in the program's driver (a function called from `if __name__ == "__main__":`
      or handed to `app.run`), not in a loop; pmap caches the compiled step by function, a new
      `jax.jit` object compiles again. Unless the function pmap maps is itself made anew there (a
      nested def, a lambda, a `partial`, as brax's `train()` makes its steps): pmap compiled it
      anew at each call too;
    - over the device count pmap took from the data: pmap maps over `jax.devices()[:n]`, n the
      length of the mapped axis, so every call must pass values shown to have one count as their
      mapped axis (`replicate`, `shard`, a reshape, zeros / ones / full or a broadcast to that
      count, `device_put_replicated` to every device, a key split into one per device, or the
      step's own outputs). The count is every device (the mesh spans them), or a name the driver
      binds before the step and never after (brax's `local_devices_to_use`, at most
      `max_devices_per_host`): the mesh then holds `jax.local_devices()[:n]`;
    - in one process: with several (`jax.process_index`, `jax.process_count`, `jax.distributed`,
      `multihost_utils`), pmap takes and returns each process's own slices and makes them global
      itself, `jax.jit` over a mesh takes global arrays. A `process_count()` read only to refuse
      several processes (`if process_count > 1: raise ...`) shows one.

    Not offered either (the finding says why): nested pmaps, `devices=`, `backend=`, `axis_size=`,
    `out_axes` with a `None`, options computed at run time, calls of the mapped function with
    keyword arguments (`jax.shard_map` takes positional ones only), pmap passed around as a value.

    With `--unsafe-fixes`, a module whose pmaps and driving code can be proven to mean the same
    over global arrays moves to the global view instead (`jaxmigrate/migrate/to_global_jit.py`):
    each pmap becomes `jax.jit`, `pmean` of per-shard means and `psum` of per-shard sums go (a
    `psum` of means keeps its factor of the device count), replicate / shard / `x[0]` at the call
    sites become `jax.device_put` / `jax.make_array_from_process_local_data` on a mesh built
    at the top of each driving function (at module level only in a script whose top level drives
    the step, or once as `self.mesh` in the `__init__` of an object that holds the step) /
    nothing. The program is followed the way it is written: steps decorated, assigned, returned
    by a factory, held by an object (`self.p_step = jax.pmap(...)`) or in a dict
    (`steps["train"](...)`), passed by name to a function of the module that calls it
    (`run_epoch(p_step, state, batches)`), wrapped in `jax.jit`, made by a maker the pmap calls
    (`jax.pmap(make_step(optimizer))`), a `partial` binding leading parameters by position or any
    by name, with keyword-only parameters, called
    at once or with keywords, or (no axis name) a function whose body is not known, such as
    `jax.pmap(opt_init)(params)`, when given replicated values only (it becomes
    `jax.jit(opt_init, out_shardings=NamedSharding(mesh, P()))`); the drivers `app.run(main)`
    starts and the functions that drive the step or are given its values (called with keywords
    and defaults too); the replicate, shard and unreplicate helpers and the losses of the
    program's other modules (found as Python's import finds them); generators that yield batches
    split per device (a device-count reshape or `shard` inside them, iterated with `next`, `for`,
    `enumerate`, `zip`, `tqdm`), which then yield whole batches laid out where a step takes them,
    and iterators mapping a split over host batches (`map(shard, batches)`, flax's
    `prefetch_to_device` of one, which goes);
    flax `TrainState`s (`state.params`, `.replace`, `.apply_gradients`, functions kept in static
    fields) and the Hugging Face examples' `TrainState.replicate` that keeps a dropout key per
    device; models applied with
    `.apply` / `.apply_fn` or called as `model(**batch, params=..., train=...)[0]`, with dropout
    keys; models written in `jax.numpy` alone (12 calls deep; joins, splits and axis moves along
    feature axes, `einsum` with its subscripts written out); `with` blocks in the step over values the same on every device (`jax.named_scope`);
    functions nested in the driving code that read its values (closures, also called from another
    nested beside them); flax's `pad_shard_unpad(step, static_return=True)(...)`, whose padding is
    written out in a module helper (`pad_to_local_devices`); `static_broadcasted_argnums=`, which
    becomes jit's `static_argnums=` where the callers pass host values there, positionally (flax's
    WMT decoding step); per-device keys (split per device, or
    `fold_in` of the device's index) become the one key, and the fix says the random streams
    change. Never a model that keeps statistics of its
    batch (`mutable=` other than `False`, a haiku `transform_with_state`): under pmap it
    normalises each device's slice. Per-example outputs read on the host of a module that runs as
    several processes become each process's own rows (`multihost_utils.
    global_array_to_host_local_array`), as pmap gave them, and `unreplicate(state)` in a branch
    only some processes take becomes the copy the process holds (`x.addressable_data(0)`). A
    replicated value printed or logged (`print`, `logging.info`, a `logging.getLogger` logger's
    methods) is written as the one value where pmap's showed a copy per device (the fix says which
    lines). A step a function makes and never uses keeps `jax.pmap` (its finding says so) while the
    module's other steps move. Unsafe: the
    calling convention changes (no device axis), float reductions regroup, and callers in other
    modules are not seen. Where it cannot be proven, the finding names the line that blocks it,
    and the exact rewrite is the fix where it is right.

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
            "import jax\nstep = jax.pmap(f, axis_name='i')\n"
        ),
        Invalid(
            "import jax as J\nstep = J.pmap(f)\n"
        ),
        Invalid(
            "from jax import pmap as pm\nstep = pm(f)\nagain = pm(g)\n"
        ),
        Invalid("from jax import *\nstep = pmap(f)\n"),
        Invalid(
            "import jax\n\n@jax.pmap\ndef step(x):\n    return x\n"
        ),
        Invalid(
            "import functools, jax\n\n@functools.partial(jax.pmap, axis_name='i')\ndef step(x):\n    return x\n"
        ),
        Invalid(
            "import jax\npm = jax.pmap\nstep = pm(f)\n"
        ),
        # Built once in the program's driver and called with one slice per device: the exact rewrite.
        Invalid(
            """
            import jax


            def main():
                x = jax.numpy.ones(jax.device_count() * 2).reshape((jax.device_count(), 2))
                step = jax.pmap(lambda v: jax.lax.psum(v, 'i'), axis_name='i')
                return step(x)


            if __name__ == "__main__":
                main()
            """,
            expected="""
            import jax
            from jax.sharding import PartitionSpec as P


            def main():
                x = jax.numpy.ones(jax.device_count() * 2).reshape((jax.device_count(), 2))
                mesh = jax.make_mesh(
                    (jax.device_count(),),
                    ('i',),
                    axis_types=(jax.sharding.AxisType.Auto,),
                )
                step = jax.jit(
                    jax.shard_map(
                        jax.vmap(lambda v: jax.lax.psum(v, 'i')),
                        mesh=mesh,
                        in_specs=P('i'),
                        out_specs=P('i'),
                        check_vma=False,
                    ),
                )
                return step(x)


            if __name__ == "__main__":
                main()
            """,
        ),
        # `jax` may be the module or a local object: reported, with the ambiguity in the message.
        Invalid("try:\n    import jax\nexcept ImportError:\n    jax = None\nstep = jax.pmap(f)\n"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._by_mention: dict[int, list[Application]] | None = None

    def fix_for(self, symbol: Symbol, node: ast.AST, ctx: FileContext) -> Fix | None:
        exact = None
        if any(app.exact_reason is None for app in self._applications(node, ctx)):
            exact = Fix(
                Safety.UNSAFE,
                "rewrite as `jax.jit(jax.shard_map(jax.vmap(f), ...))` over a mesh built where the step is built",
                codemod=CODEMOD,
            )
        if self._moved(self._applications(node, ctx), ctx):
            notes = "".join(f"; {note}" for note in _global_view(ctx).notes)
            return Fix(Safety.UNSAFE, "move the module's pmapped steps and their call sites to the global view "
                       "(`jax.jit` over arrays sharded on a mesh, collectives GSPMD inserts removed)" + notes,
                       codemod=GLOBAL_CODEMOD, fallback=exact, whole_module=True)
        return exact

    def report(self, node, symbol, shown, ctx, ambiguous=False) -> None:
        message = describe(symbol, shown, ctx, ambiguous)
        apps = self._applications(node, ctx)
        view = _global_view(ctx) if apps else None
        kept = sorted({app.exact_reason for app in apps if app.exact_reason})
        if kept and self._moved(apps, ctx):
            # The global view is the fix: nothing blocks, and no exact rewrite stands behind it.
            message += "; the exact rewrite is not offered: " + "; ".join(kept)
            kept = []
        # The same reasons as data: the first line each one is found at.
        blockers = [Blocker("rewrite", reason, min(app.line for app in apps if app.exact_reason == reason))
                    for reason in kept]
        if kept:
            message += "; not rewritten: " + "; ".join(kept)
        if view is not None and not view.possible and view.reason not in kept:
            message += f"; global view not possible: {view.blocker}"
            blockers.append(Blocker("global view", str(view.reason), view.line))
        elif view is not None and view.possible and not self._moved(apps, ctx):
            line = min(app.line for app in apps)
            message += f"; the global view leaves it: line {line}: {view.unused[line]}"
            blockers.append(Blocker("global view", view.unused[line], line))
        fix = self.fix_for(symbol, node, ctx)
        ctx.report(node, message, fix, blockers=tuple(blockers))

    @staticmethod
    def _moved(apps: list[Application], ctx: FileContext) -> bool:
        """Whether the module's global view moves one of these pmap applications."""
        return bool(apps) and _global_view(ctx).possible and any(app.line not in _global_view(ctx).unused
                                                                for app in apps)

    def _applications(self, mention: ast.AST, ctx: FileContext) -> list[Application]:
        """The pmap applications that stem from this mention of it."""
        if self._by_mention is None:
            from jaxmigrate.migrate.pmap_to_shard_map import planner_of  # see _global_view

            planner = planner_of(ctx.module)
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
