"""Exact rewrites of the sharding and mesh APIs (JM3xx) onto JAX 0.10, each checked at run time.

Every template is ``rewrite_<thing>(text, sites=None) -> str`` plus ``analyse_<thing>(text) ->
list[Site]``. ``sites`` holds the positions (1-based line, 1-based character column) the lint rule
reports: the legacy name's attribute chain at its use, or the import alias that binds it; ``None``
rewrites every provable site. Unprovable sites are left as they are, and ``analyse_*`` says why.

``PositionalSharding`` (JM301)
    ``PositionalSharding(d).reshape(4, 2).replicate(1)`` ->
    ``NamedSharding(Mesh(np.array(d).reshape(4, 2), ("x", "y")), P("x", None))``; see
    ``_sharding_positional`` for the model and what is kept.

``device_put_replicated`` / ``device_put_sharded`` (JM302)
    -> ``jax.device_put`` of a zero-copy ``np.broadcast_to`` view of every leaf (or the shards
    stacked on the host) over ``NamedSharding(Mesh(devices, ("devices",)), P("devices"))``, at the
    site: a new leading axis of ``len(devices)``, slice i on ``devices[i]``. Safe where every leaf
    is provably a numpy value; unsafe elsewhere (weakly typed leaves become strong, typed PRNG
    keys raise); see ``_device_put``.

``mesh_utils.create_device_mesh`` + ``Mesh`` (JM307)
    ``Mesh(mesh_utils.create_device_mesh(shape), names)`` (directly, or through a variable bound
    once and used only there) -> ``jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * n)``.
    ``make_mesh`` in 0.10.2 calls ``mesh_utils.create_device_mesh(shape, jax.devices()[:prod])``
    and defaults to Explicit axes; Auto keeps what ``Mesh(...)`` gave. On CPU and GPU both orders
    are ``jax.devices()`` reshaped (checked on 8 CPU devices, tests/test_runtime_sharding_apis.py).
    On TPU both go through the same topology-aware ordering of 0.10.2, except TPU v5e/v5 lite,
    where ``make_mesh`` passes ``allow_split_physical_axes=True``: the device order can differ there,
    and between JAX versions, so exactness is claimed for CPU/GPU only.

``with mesh:`` (JM308)
    -> ``with jax.set_mesh(mesh):`` for a mesh built by ``Mesh(...)`` (Auto axes) or by
    ``jax.make_mesh(..., axis_types=<all Auto>)``. In 0.10.2 ``set_mesh`` sets the concrete mesh
    that bare ``PartitionSpec``s in jit ``in_shardings``/``out_shardings``,
    ``with_sharding_constraint`` and ``device_put`` resolve against (``with mesh:`` in 0.10.2 no
    longer does for jit: it raises), and the abstract mesh, which with Auto axes changes nothing.
    But 0.10.2's ``pjit`` is the other way round: it reads ``with mesh:`` only and raises
    ``RuntimeError: pjit requires a non-empty mesh in context`` under ``set_mesh``. So in a module
    that uses pjit the contexts are rewritten together with every pjit of the module (to jit over
    ``NamedSharding(<mesh>, spec)``, ``_pjit_sites``) or not at all: one pjit that stays, or one
    spelled in a way that rewrite does not follow (``jax._src.pjit.pjit``), keeps every site.
    ``set_mesh`` raises ``ValueError`` inside a trace, where ``with mesh:`` did not, so a ``with``
    in traced code (``_traced``) is kept. Libraries that read the old ``thread_resources`` mesh
    (flax.linen partitioning helpers) will not see ``set_mesh``'s. Kept too: ``with mesh as m:``
    (``set_mesh`` binds None), meshes with Explicit axes (``set_mesh`` turns on explicit
    sharding), meshes of unknown origin. Checked on 8 CPU devices, old program on 0.4.30 and new on
    0.10.2 (tests/test_runtime_sharding_apis.py).

``flax.jax_utils.replicate`` / ``unreplicate`` (JM102)
    -> the ``device_put_replicated`` placement above onto ``devices or jax.local_devices()``, and
    ``jax.tree.map(lambda x: x[0], tree)``: flax 0.8.5's own bodies in JAX 0.10 API.
"""

from __future__ import annotations

from jaxmigrate.core.module import ParsedModule, as_module, parse_module
from jaxmigrate.migrate._device_put import plan_device_put, plan_flax_replication
from jaxmigrate.migrate._mesh_apis import plan_create_device_mesh, plan_with_mesh
from jaxmigrate.migrate._plan import Plan, Site, Sites, apply
from jaxmigrate.migrate._sharding_positional import plan_positional

__all__ = [
    "Site", "analyse_create_device_mesh", "analyse_legacy_device_put", "analyse_mesh_context_manager",
    "analyse_positional_sharding", "rewrite_all", "rewrite_create_device_mesh",
    "rewrite_legacy_device_put", "rewrite_mesh_context_manager", "rewrite_positional_sharding",
    "analyse_flax_replication", "rewrite_flax_replication",
]


# -- public API ------------------------------------------------------------------------------


def analyse_positional_sharding(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, plan_positional)


def rewrite_positional_sharding(text: str, sites: Sites = None) -> str:
    return _rewrite(text, sites, plan_positional)


def analyse_legacy_device_put(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, plan_device_put)


def rewrite_legacy_device_put(text: str, sites: Sites = None) -> str:
    return _rewrite(text, sites, plan_device_put)


def analyse_flax_replication(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, plan_flax_replication)


def rewrite_flax_replication(text: str, sites: Sites = None) -> str:
    return _rewrite(text, sites, plan_flax_replication)


def analyse_create_device_mesh(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, plan_create_device_mesh)


def rewrite_create_device_mesh(text: str, sites: Sites = None) -> str:
    return _rewrite(text, sites, plan_create_device_mesh)


def analyse_mesh_context_manager(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, plan_with_mesh)


def rewrite_mesh_context_manager(text: str, sites: Sites = None) -> str:
    return _rewrite(text, sites, plan_with_mesh)


def rewrite_all(text: str) -> str:
    """Every template, in an order where each one's output is the next one's input."""
    for rewrite in (rewrite_positional_sharding, rewrite_legacy_device_put, rewrite_flax_replication,
                    rewrite_create_device_mesh, rewrite_mesh_context_manager):
        text = rewrite(text)
    return text


# -- driver ----------------------------------------------------------------------------------


def _analyse(source: ParsedModule | str, planner) -> list[Site]:
    """Every site and what can be done there; plans but writes nothing (the lint rules call this)."""
    module = as_module(source)
    return [] if module is None else planner(module, Plan(), None)


def _rewrite(text: str, sites: Sites, planner) -> str:
    module = parse_module(text)
    if module is None:
        return text
    plan = Plan()
    planner(module, plan, sites)
    del module  # the tree goes before the result is parsed (``apply``)
    return apply(text, plan)
