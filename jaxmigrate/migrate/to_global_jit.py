"""Global view: pmapped steps become plain ``jax.jit`` over global arrays laid out on a mesh.

What it produces
----------------
::

    @functools.partial(jax.pmap, axis_name="batch", donate_argnums=(0,))
    def update(params, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        grads = lax.pmean(grads, axis_name="batch")
        ...
    params = jax.device_put_replicated(params, jax.local_devices())
    x = x.reshape((jax.local_device_count(), -1) + x.shape[1:])
    params, loss = update(params, x)
    print(loss[0])

    # becomes

    mesh = jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(AxisType.Auto,))

    @functools.partial(jax.jit, donate_argnums=(0,))
    def update(params, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        ...
    params = jax.device_put(params, NamedSharding(mesh, P()))
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), x)
    params, loss = update(params, x)
    print(loss)

The decision is all or nothing for a module: every pmap of the module moves to the global view
together, with every value that carries pmap's device axis, or none does (the exact rewrite then
applies) and the finding names the first line that blocks it. ``step`` proves what the
step's collectives compute (``pmean`` of a per-shard mean and ``psum`` of a per-shard sum go,
``psum`` of a per-shard mean keeps its factor of the device count); ``driving`` follows the
driving code. Planning is ``ast``-only; ``apply`` writes.

Preconditions (each one a reason in the finding when it fails): every pmap is a decorator or a
module-level ``name = jax.pmap(f, ...)`` of a module function, with a literal ``axis_name``, no
``devices`` / ``backend`` / ``axis_size`` (``static_broadcasted_argnums`` becomes jit's
``static_argnums``), ``in_axes`` of 0 /
None and ``out_axes`` 0; it is only called, in this module, by code the analysis follows; its
outputs are replicated or per-example values; and no value with the device axis leaves what the
analysis sees (returned, stored in an attribute, passed to another function, captured).
Per-device RNG keys become the one key they were split from (the random streams change; the fix's
message says so, from ``GlobalView.notes``).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass, field

from jaxmigrate.core.module import ParsedModule, as_module
from jaxmigrate.migrate._plan import Plan, Unprovable, apply
from jaxmigrate.migrate._pmap_sites import Application, planner_of
from jaxmigrate.migrate.global_view.kinds import Blocked
from jaxmigrate.migrate.global_view.modes import candidate_modes
from jaxmigrate.migrate.global_view.render import Builder


@dataclass
class GlobalView:
    """The plan for a module, or the reason (with its line) there is none."""

    applications: list[Application] = field(default_factory=list)
    plan: Plan | None = None
    line: int | None = None
    reason: str | None = None
    notes: tuple[str, ...] = ()  # what changes besides the calling convention (random streams)
    unused: dict[int, str] = field(default_factory=dict)  # a pmap's line the plan leaves as it is -> why

    @property
    def possible(self) -> bool:
        return self.plan is not None

    @property
    def blocker(self) -> str:
        return f"line {self.line}: {self.reason}" if self.line else str(self.reason)


def plan_global(source: ParsedModule | str) -> GlobalView:
    """The global view of a module (the lint context's, or text parsed): its plan, or what blocks it.
    Planned once per module, however many findings and fixes ask."""
    module = as_module(source)
    if module is None:
        return GlobalView(reason="the module does not parse")
    if "global_view" not in module.shared:
        module.shared["global_view"] = _plan_global(module)
    return module.shared["global_view"]


def _plan_global(module: ParsedModule) -> GlobalView:
    apps = planner_of(module).applications()
    view = GlobalView(apps)
    if not apps:
        view.reason = "no pmap in this module"
        return view
    try:
        builder, view.plan = _built(module, apps)
        view.notes = tuple(sorted(builder.notes))
        view.unused = builder.unused
    except Blocked as blocked:
        view.line, view.reason = blocked.line, blocked.message
    except Unprovable as error:
        view.reason = str(error)
    except (RecursionError, Exception) as error:  # a bug here must not cost JM101 its finding
        view.reason = (f"the global-view analysis failed on this module ({type(error).__name__}: {error}); "
                       "please report it")
    return view


def _built(module: ParsedModule, apps: list[Application]) -> tuple[Builder, Plan]:
    """The builder and its plan: the module read as it is or, where that is blocked and the
    program runs pmap in one of two modes chosen at run time (``modes``), read in its pmap mode.
    Blocked in that mode too, the mode's reason is the one given (the other is its two modes)."""
    builder = Builder(module, apps)
    try:
        return builder, builder.build()
    except Blocked as blocked:
        modes = candidate_modes(module, [_binding_and_names(module, app) for app in apps])
        if not modes:
            raise
        reason = blocked
    for mode in modes:
        builder = Builder(module, apps, mode)
        try:
            return builder, builder.build()
        except Blocked as blocked:
            reason = Blocked(blocked.line, f"in the program's pmap mode ({mode.described()}): {blocked.message}",
                             blocked.argument)
    raise reason


def _binding_and_names(module: ParsedModule, app: Application) -> tuple[ast.AST, set[str]]:
    """Where ``app`` binds its step, and the names the step is called by there."""
    if app.kind == "decorator" and isinstance(app.mapped, ast.FunctionDef):
        return app.mapped, {app.mapped.name}
    statement = module.parent_of(app.node) if app.node is not None else None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement, {statement.targets[0].id}
    return app.node if app.node is not None else app.ref, set()


def fix(text: str, sites: Collection[tuple[int, int]]) -> str:
    """JM101's global-view codemod: the whole module's pmaps at once, when a reported one is among
    them (``sites`` are reported mentions of ``jax.pmap``)."""
    view = plan_global(text)
    if not view.possible:
        return text
    new = apply(text, view.plan)
    # A removed first import (functools) must not leave the module starting with a blank line.
    return new if text[:1] == "\n" else new.lstrip("\n")
