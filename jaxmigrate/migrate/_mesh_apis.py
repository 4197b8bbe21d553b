"""The mesh APIs (JM307, JM308), planned on ``ast``; the models are in ``sharding_apis``'s docs.

``Mesh(mesh_utils.create_device_mesh(shape), names)`` -> ``jax.make_mesh(shape, names,
axis_types=(jax.sharding.AxisType.Auto,) * n)``; ``with mesh:`` -> ``with jax.set_mesh(mesh):``.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.module import ParsedModule
from jaxmigrate.migrate._meshes import MESH, mesh_kind
from jaxmigrate.migrate._pjit_sites import PJIT, plan_pjit
from jaxmigrate.migrate._traced import TracedCode
from jaxmigrate.migrate._plan import (
    Namer, Plan, Site, Sites, Unprovable, literal_ints, remove_imports_of, resolves, selected,
)

_CREATE_DEVICE_MESH = frozenset({"jax.experimental.mesh_utils.create_device_mesh"})
# What no analysis of this module can rule out.
_ELSEWHERE = ("a pjit in another module's code run under it would raise under `jax.set_mesh` (0.10's pjit reads "
              "`with mesh:`), and flax.linen's partitioning helpers read the old `with mesh:` context")
# Every name pjit is reached by; the pjit rewrite (JM201) follows the first only.
PJIT_SPELLINGS = frozenset({PJIT, "jax.pjit", "jax._src.pjit.pjit"})


def plan_create_device_mesh(module: ParsedModule, plan: Plan, sites: Sites) -> list[Site]:
    out: list[Site] = []
    namer = Namer(module, plan)
    rewritten = False
    for call in module.of_type(ast.Call):
        try:
            if not resolves(module, call.func, _CREATE_DEVICE_MESH):
                continue
        except Unprovable as exc:
            out.append(Site(*selected(module, call.func, sites)[0], False, str(exc)))
            continue
        pos, chosen = selected(module, call.func, sites)
        try:
            mesh_call, drop = _mesh_consumer(module, call)
            new = _make_mesh_call(module, namer, call, mesh_call)
        except Unprovable as exc:
            out.append(Site(*pos, False, str(exc)))
            continue
        out.append(Site(*pos, True, None))
        if chosen:
            plan.edits.append(Edit(*module.span(mesh_call), new))
            if drop is not None:
                plan.edits.append(drop)
            rewritten = True
    if rewritten:
        remove_imports_of(module, plan, {"jax.experimental.mesh_utils", *_CREATE_DEVICE_MESH, *MESH})
        plan.remove_imports.add(("jax.experimental", "mesh_utils", None))
    return sorted(set(out), key=lambda s: (s.line, s.column))


def _mesh_consumer(module: ParsedModule, call: ast.Call) -> tuple[ast.Call, Edit | None]:
    """The ``Mesh(<this device array>, names)`` call that is the only consumer of ``call``, and the
    edit deleting ``devices = create_device_mesh(...)`` when it went through such a variable."""
    why = "its device array is used other than as the devices of one `Mesh(...)`; create_device_mesh still exists in 0.10"
    parent = module.parent_of(call)
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is call:
        return parent, None
    if isinstance(parent, ast.keyword) and parent.arg == "devices":
        mesh_call = module.parent_of(parent)
        if isinstance(mesh_call, ast.Call):
            return mesh_call, None
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        raise Unprovable(why)
    target = parent.targets[0]
    if len(module.names.bindings(target)) != 1:
        raise Unprovable(f"`{target.id}` is bound more than once, so its uses cannot be traced to this mesh")
    uses = [n for n in module.of_type(ast.Name) if n.id == target.id
            and isinstance(n.ctx, ast.Load) and [id(b) for b in module.names.bindings(n)]
            == [id(b) for b in module.names.bindings(target)]]
    if len(uses) != 1:
        raise Unprovable(why)
    use = uses[0]
    holder = module.parent_of(use)
    if isinstance(holder, ast.keyword) and holder.arg == "devices":
        holder = module.parent_of(holder)
    elif not (isinstance(holder, ast.Call) and holder.args and holder.args[0] is use):
        raise Unprovable(why)
    if not isinstance(holder, ast.Call) or module.has_comment(parent):
        raise Unprovable(why)
    # Delete the whole `devices = ...` line: it must stand alone on its lines.
    start, end = module.span(parent)
    line_start = module.text.rfind("\n", 0, start) + 1
    line_end = module.text.find("\n", end)
    line_end = len(module.text) if line_end < 0 else line_end + 1
    if module.text[line_start:start].strip() or module.text[end:line_end].strip():
        raise Unprovable("the device-array assignment shares its line with other code")
    if module.span(holder)[0] < end:
        raise Unprovable(why)
    return holder, Edit(line_start, line_end, "")


def _make_mesh_call(module: ParsedModule, namer: Namer, cdm: ast.Call, mesh_call: ast.Call) -> str:
    if not resolves(module, mesh_call.func, MESH):
        raise Unprovable("its device array is used other than as the devices of a `jax.sharding.Mesh`; "
                         "create_device_mesh still exists in 0.10")
    if cdm.keywords and any(k.arg != "devices" for k in cdm.keywords) or len(cdm.args) > 2:
        raise Unprovable("create_device_mesh options (contiguous_submeshes, allow_split_physical_axes) "
                         "have no make_mesh equivalent")
    shape = cdm.args[0] if cdm.args else next((k.value for k in cdm.keywords if k.arg == "mesh_shape"), None)
    ints = literal_ints(shape) if shape is not None else None
    if ints is None:
        raise Unprovable("the mesh shape is not a literal, so the axis count is not known")
    devices = cdm.args[1] if len(cdm.args) > 1 else next((k.value for k in cdm.keywords if k.arg == "devices"), None)
    args = dict(zip(("devices", "axis_names"), mesh_call.args))
    for kw in mesh_call.keywords:
        if kw.arg not in ("devices", "axis_names") or kw.arg in args:
            raise Unprovable(f"Mesh(..., {kw.arg}=...) has no make_mesh equivalent here")
        args[kw.arg] = kw.value
    if len(mesh_call.args) > 2 or "axis_names" not in args:
        raise Unprovable("Mesh(...) called with unexpected arguments")
    if module.has_comment(mesh_call):
        raise Unprovable("a comment inside the Mesh(...) call would be lost")
    jax = namer.jax()
    n = len(ints)
    extra = f", devices={module.segment(devices)}" if devices is not None else ""
    types = f"({jax}.sharding.AxisType.Auto,)" + (f" * {n}" if n > 1 else "")
    return (f"{jax}.make_mesh({module.segment(shape)}, {module.segment(args['axis_names'])}, "
            f"axis_types={types}{extra})")




def plan_with_mesh(module: ParsedModule, plan: Plan, sites: Sites) -> list[Site]:
    out: list[Site] = []
    namer = Namer(module, plan)
    pjits = _Pjits(module)
    traced = TracedCode(module)
    for node in module.of_type(ast.With, ast.AsyncWith):
        for item in node.items:
            expr = item.context_expr
            try:
                kind = mesh_kind(module, expr)
            except Unprovable as exc:
                out.append(Site(*module.position(expr), False, str(exc)))
                continue
            if kind is None:
                continue
            pos = module.position(expr)
            try:
                if item.optional_vars is not None:
                    raise Unprovable("`with mesh as m:` would bind None: `jax.set_mesh(...)` enters as None")
                if kind == "explicit":
                    raise Unprovable("the mesh may have Explicit axes (jax.make_mesh's 0.10 default): "
                                     "`jax.set_mesh` would turn on explicit sharding, `with mesh:` did not")
                if (why := traced.around(node)) is not None:
                    raise Unprovable(f"it runs under a JAX trace ({why}), where `jax.set_mesh` raises "
                                     "(ValueError: `set_mesh` can only be used outside of `jax.jit`)")
                pjits.check()
                new = f"{namer.jax()}.set_mesh({module.segment(expr)})"
            except Unprovable as exc:
                out.append(Site(*pos, False, str(exc)))
                continue
            out.append(Site(*pos, True, None, unsafe="; ".join(filter(None, [pjits.unsafe, _ELSEWHERE]))))
            if sites is None or pos in sites:
                plan.edits.append(Edit(*module.span(expr), new))
                pjits.into(plan)
    return sorted(out, key=lambda s: (s.line, s.column))


class _Pjits:
    """The module's pjit applications, rewritten to jit with every ``with mesh:`` rewrite or not at
    all: in 0.10.2 pjit takes bare PartitionSpecs' mesh from ``with mesh:`` only (``get_ctx_mesh(
    use_resource_env=True)`` reads ``thread_resources``) and raises ``RuntimeError: pjit requires a
    non-empty mesh in context`` under ``set_mesh``, while jit reads ``set_mesh`` only. Any body may
    call any of them, so one pjit that cannot become jit keeps every site."""

    def __init__(self, module: ParsedModule) -> None:
        self.module = module
        self.plan = Plan()
        self.block: str | None = None
        self.unsafe: str | None = None
        self._added = False
        refs = [n for n in module.of_type(ast.Name, ast.Attribute)
                if isinstance(n.ctx, ast.Load) and module.names.candidates(n) & PJIT_SPELLINGS]
        if not refs:
            return
        other = next((r for r in refs if not module.names.candidates(r) <= {PJIT}), None)
        if other is not None:
            self.block = (f"`{module.segment(other)}` (line {other.lineno}) is a pjit the pjit rewrite (JM201) "
                          "does not follow, and 0.10's pjit raises under `jax.set_mesh` (it reads `with mesh:`)")
            return
        found = plan_pjit(module, self.plan, None, unsafe=True)
        kept = next((s for s in found if not s.rewritable), None)
        if kept is not None:
            self.block = (f"the pjit at line {kept.line} is not rewritten to jit ({kept.reason}), and 0.10's pjit "
                          "raises under `jax.set_mesh` (it reads `with mesh:`)")
            return
        lines = ", ".join(str(s.line) for s in found)
        assumptions = "; ".join(dict.fromkeys(f"line {s.line} {s.assumption}" for s in found if s.assumption))
        self.unsafe = (f"it also rewrites the module's pjit (line {lines}) to jax.jit (JM201), which 0.10 needs "
                       "under `jax.set_mesh`" + (f"; that rewrite {assumptions}" if assumptions else ""))

    def check(self) -> None:
        if self.block is not None:
            raise Unprovable(self.block)

    def into(self, plan: Plan) -> None:
        if not self._added:
            self._added = True
            plan.edits += self.plan.edits
            plan.add_imports |= self.plan.add_imports
            plan.remove_imports |= self.plan.remove_imports
