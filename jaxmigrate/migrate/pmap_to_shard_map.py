"""Exact migration (JM101): ``jax.pmap`` becomes ``jax.jit(jax.shard_map(jax.vmap(f), ...))``.

What it produces
----------------
::

    step = jax.pmap(f, axis_name="batch", in_axes=(0, None), donate_argnums=(0,))
    # becomes
    mesh = jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))
    step = jax.jit(jax.shard_map(jax.vmap(f, in_axes=(0, None)), mesh=mesh, in_specs=(P("batch"), P()),
                                 out_specs=P("batch"), check_vma=False), donate_argnums=(0,))

    @partial(jax.pmap, axis_name="batch")
    def train_step(params, batch): ...
    # becomes
    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=P("batch"), out_specs=P("batch"), check_vma=False)
    @jax.vmap
    def train_step(params, batch): ...

The calling convention is kept: every argument and result still has pmap's device axis. Each
device's block of that axis has size 1 and ``jax.vmap`` maps it away, as pmap squeezes it;
collectives inside (``psum``, ``pmean``, ``all_gather``, ``ppermute``, ``axis_index``) name the
mesh axis, which has the pmap's axis name. ``_pmap_render`` has the details (specs, static
arguments, why ``check_vma=False``), ``_pmap_sites`` what is left alone and why.

Why it is an unsafe fix, and where it is offered
------------------------------------------------
JAX 0.10's own pmap (``jax/_src/pmap.py``) sizes its mesh per call: ``jax.devices()[:n]``, n the
size of the mapped axis; the rewrite's mesh spans every device, so the two agree only when n is
the device count. With several processes, pmap also converts host-local arguments (one slice per
*local* device) to global arrays and its results back; ``jax.jit`` takes global arrays. A mesh
built at import starts the backend when the module is imported, and a new ``jax.jit`` object
compiles again where pmap's cache did not. So the rewrite is offered only where none of that can
happen (``_pmap_setting``): the step built once in the program's driver, the mesh beside it,
every call mapping values shown to have the device count, one process. The test suite runs every
form old against new on 8 CPU devices (``tests/test_runtime_pmap.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from jaxmigrate.migrate._device_put import relayout_replications
from jaxmigrate.migrate._pmap_render import Rewriter
from jaxmigrate.migrate._pmap_sites import Application, Planner, planner_of
from jaxmigrate.core.module import parse_module
from jaxmigrate.migrate._plan import Plan, Site, Unprovable, apply

__all__ = ["Application", "PmapMigration", "Planner", "Site", "fix", "fix_mentions", "planner_of", "rewrite_module"]


@dataclass(frozen=True)
class PmapMigration:
    text: str  # the new source; the input itself when nothing was rewritten
    sites: list[Site]

    @property
    def changed(self) -> bool:
        return any(site.rewritable for site in self.sites)


def rewrite_module(source: str, only: Collection[tuple[int, int]] | None = None) -> PmapMigration:
    """Rewrite every provable pmap application of ``source`` (or those at the ``(line, column)``
    positions in ``only``, positions as ``Site`` counts them)."""
    module = parse_module(source)
    if module is None:
        return PmapMigration(source, [])
    apps = planner_of(module).applications()
    chosen = [a for a in apps if a.exact_reason is None and (only is None or (a.line, a.column) in only)]
    plan = Plan()
    rewriter = Rewriter(module, plan)
    sites = {}
    for app in chosen:
        try:
            rewriter.render(app)
        except Unprovable as why:  # pragma: no cover - the planner rendered it already
            sites[id(app)] = _site(app, False, str(why))
        else:
            sites[id(app)] = _site(app, True)
    rewriter.finish()
    found = [sites.get(id(a)) or _site(a, False) for a in apps]
    del module, apps, chosen, rewriter  # the tree goes before the result is parsed (``apply``)
    text = apply(source, plan)
    if any(site.rewritable for site in found):
        # An earlier safe fix may have laid a replication out for a pmap rewritten now.
        text = relayout_replications(text)
    return PmapMigration(text, found)


def fix(text: str, sites: Collection[tuple[int, int]]) -> str:
    """Rewrite the applications at these ``Site`` positions: ``function(text, sites) -> text``."""
    return rewrite_module(text, only=sites).text


def fix_mentions(text: str, mentions: Collection[tuple[int, int]]) -> str:
    """JM101's codemod: rewrite the applications that stem from the reported mentions of
    ``jax.pmap`` (an import alias, an attribute chain, or the value a name was bound to)."""
    module = parse_module(text)
    if module is None:
        return text
    planner = planner_of(module)
    chosen = {
        (app.line, app.column)
        for app in planner.applications()
        if module.mention_positions(app.ref) & frozenset(mentions)
    }
    del module, planner  # not held while the rewrite writes its result (``apply``)
    return rewrite_module(text, only=chosen).text if chosen else text


def _site(app: Application, rewritten: bool, reason: str | None = None) -> Site:
    if rewritten:
        return Site(app.line, app.column, True, None)
    return Site(app.line, app.column, False, reason or app.exact_reason or "not selected")
