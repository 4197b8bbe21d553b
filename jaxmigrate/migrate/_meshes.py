"""What the module's meshes are: which expressions make a mesh, with which axis types, and which
mesh a ``with`` around a node enters or the scopes around it see. Shared by the pjit planner, the
mesh-API rewrites and the pmap rewrites, so they agree on what a mesh is."""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import SCOPES, enclosing_scope
from jaxmigrate.core.module import ParsedModule
from jaxmigrate.migrate._plan import Unprovable, resolves
from jaxmigrate.names import ValueBinding

MESH = frozenset({"jax.sharding.Mesh"})
MAKE_MESH = frozenset({"jax.make_mesh", "jax.sharding.make_mesh"})
AXIS_TYPE = frozenset({"jax.sharding.AxisType"})
_ANY_MESH = MESH | MAKE_MESH
LEGACY_MESH = frozenset({"jax.experimental.maps.Mesh", "jax.interpreters.pxla.Mesh"})  # no axis types yet


def mesh_kind(module: ParsedModule, expr: ast.expr) -> str | None:
    """'auto' / 'explicit' for a mesh constructor call (or a name bound only to such calls)."""
    if isinstance(expr, ast.Call):
        # A legacy Mesh is the same class (JM303 moves it), from before axis types: Auto.
        if resolves(module, expr.func, MESH | LEGACY_MESH):
            if any(k.arg == "axis_types" for k in expr.keywords) or len(expr.args) > 2:
                return "auto" if all_auto(module, axis_types(expr, 2)) else "explicit"
            return "auto"
        if resolves(module, expr.func, MAKE_MESH):
            return "auto" if all_auto(module, axis_types(expr, 2)) else "explicit"
        return None
    if isinstance(expr, ast.Name):
        bindings = module.names.bindings(expr)
        if not bindings or not all(isinstance(b, ValueBinding) and isinstance(b.value, ast.Call) for b in bindings):
            return None
        kinds = set()
        for b in bindings:
            kinds.add(mesh_kind(module, b.value))  # type: ignore[union-attr]
        if kinds == {"auto"}:
            return "auto"
        if kinds <= {"auto", "explicit"}:
            return "explicit"
        if kinds & {"auto", "explicit"}:
            raise Unprovable(f"`{expr.id}` may be a mesh or something else here")
    return None


def axis_types(call: ast.Call, position: int) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == "axis_types"), None)


def all_auto(module: ParsedModule, types: ast.expr | None) -> bool:
    """``(AxisType.Auto,) * n`` or a tuple of ``AxisType.Auto``."""
    if types is None:
        return False
    if isinstance(types, ast.BinOp) and isinstance(types.op, ast.Mult):
        types = types.left if isinstance(types.left, ast.Tuple) else types.right
    if not isinstance(types, ast.Tuple) or not types.elts:
        return False
    return all(
        isinstance(e, ast.Attribute) and e.attr == "Auto" and module.names.qualified_name(e.value) in AXIS_TYPE
        for e in types.elts
    )


def is_mesh(module: ParsedModule, bindings: list) -> bool:
    """Whether any of these bindings makes a mesh."""
    calls = [b.value for b in bindings if isinstance(b, ValueBinding) and isinstance(b.value, ast.Call)]
    return any(module.names.qualified_name(c.func) in LEGACY_MESH or mesh_kind(module, c) for c in calls)


def check_auto_mesh(module: ParsedModule, name: str, bindings: list) -> None:
    """Refuse a mesh name bound more than once, or to a mesh that may have Explicit axes."""
    if len(bindings) != 1 or not isinstance(bindings[0], ValueBinding):
        raise Unprovable(f"`{name}` is bound more than once, so its mesh is not known")
    call = bindings[0].value
    if module.names.qualified_name(call.func) not in LEGACY_MESH and mesh_kind(module, call) != "auto":
        raise Unprovable(f"the mesh `{name}` may have Explicit axes (jax.make_mesh's default since JAX 0.9): "
                         "pjit would also trace the function with sharding in types")


def with_mesh(module: ParsedModule, node: ast.AST) -> tuple[str, ValueBinding, ast.With] | None:
    """The mesh (name, binding) the nearest ``with`` of the same scope enters around ``node``.
    Context managers entered after it (or in a ``with`` without a mesh) may enter a mesh of their
    own, so they make the site unprovable."""
    child, parent = node, module.parent_of(node)
    while parent is not None and not isinstance(parent, SCOPES):
        if isinstance(parent, (ast.With, ast.AsyncWith)) and any(s is child for s in parent.body):
            for item in reversed(parent.items):  # the last mesh entered is the one pjit sees
                expr = item.context_expr
                bindings = module.names.bindings(expr) if isinstance(expr, ast.Name) else []
                if isinstance(expr, ast.Name) and is_mesh(module, bindings):
                    check_auto_mesh(module, expr.id, bindings)
                    return expr.id, bindings[0], parent
                if isinstance(expr, ast.Call) and module.names.qualified_name(expr.func) in _ANY_MESH | LEGACY_MESH:
                    raise Unprovable("the mesh of this `with` has no name to bind the PartitionSpecs to; "
                                     "assign it to a variable first")
                raise Unprovable(f"inside `with {module.segment(expr)}:`, which may enter a mesh of its own")
        child, parent = parent, module.parent_of(parent)
    return None


def scope_bindings(module: ParsedModule, node: ast.AST, name: str) -> list:
    """The bindings of ``name`` in the scope ``node`` sits in."""
    owner = enclosing_scope(module, node)
    for scope in module.names.scopes:
        if scope.node is owner:
            return list(scope.bindings.get(name, []))
    return []


def inside(module: ParsedModule, node: ast.AST, with_node: ast.AST) -> bool:
    while node is not None and node is not with_node:
        if isinstance(node, SCOPES):
            return False
        node = module.parent_of(node)
    return node is with_node


def visible_meshes(module: ParsedModule, node: ast.AST) -> dict[str, list]:
    """The mesh names (and their bindings) the scopes around ``node`` see, bound before it in its
    own scope; a name that may or may not be a mesh counts too."""
    ancestors = []
    current = module.parent_of(node)
    while current is not None:
        if isinstance(current, SCOPES):
            ancestors.append(current)
        current = module.parent_of(current)
    by_node = {id(s.node): s for s in module.names.scopes}
    found: dict[str, list] = {}
    seen: set[str] = set()
    for depth, scope_node in enumerate(ancestors):
        scope = by_node.get(id(scope_node))
        if scope is None or (scope.is_class and depth):
            continue
        for name, bindings in scope.bindings.items():
            if name in seen:
                continue
            seen.add(name)
            try:
                if not is_mesh(module, bindings):
                    continue
            except Unprovable:
                pass
            if depth == 0 and all(getattr(b, "value", node).lineno > node.lineno for b in bindings):
                continue  # bound only after the application, in its own scope
            found[name] = bindings
    return found


def entered(module: ParsedModule, name: str, bindings: list) -> bool:
    """Whether some ``with`` of the module enters the mesh ``name`` (these bindings of it)."""
    ids = {id(b) for b in bindings}
    for node in module.of_type(ast.With, ast.AsyncWith):
        for item in node.items:
            expr = item.context_expr
            if isinstance(expr, ast.Name) and expr.id == name and {id(b) for b in module.names.bindings(expr)} & ids:
                return True
    return False


def mesh_axes(module: ParsedModule, bindings: list) -> set[str] | None:
    """The axis names of the mesh these bindings make, where every one is a literal; else None."""
    found: set[str] = set()
    for b in bindings:
        call = b.value if isinstance(b, ValueBinding) else None
        if not isinstance(call, ast.Call):
            return None
        position = 1
        names = call.args[position] if len(call.args) > position else next(
            (k.value for k in call.keywords if k.arg == "axis_names"), None)
        axes = _strings(names)
        if axes is None:
            return None
        found |= axes
    return found or None


def spec_axes(call: ast.Call) -> set[str] | None:
    """The axis names a ``PartitionSpec(...)`` call names (None: not all literal)."""
    found: set[str] = set()
    for arg in call.args:
        if isinstance(arg, ast.Constant) and arg.value is None:
            continue
        axes = _strings(arg)
        if axes is None:
            return None
        found |= axes
    return found


def _strings(node: ast.AST | None) -> set[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = [_strings(e) for e in node.elts]
        return None if any(p is None for p in parts) else set().union(*parts)
    return None


def every_device_mesh_axis(module: ParsedModule, call: ast.Call) -> ast.expr | None:
    """The axis-name expression of ``call`` when it makes the 1-D Auto mesh of every device that
    the pmap rewrites build (``jax.make_mesh((jax.device_count(),), (axis,), axis_types=(AxisType.Auto,))``
    or ``jax.sharding.Mesh(jax.devices(), (axis,))``); None for any other call. A mesh the program
    builds so already is used rather than built again."""
    names = module.names
    made_by = names.qualified_name(call.func)
    args = dict(enumerate(call.args))
    keywords = {kw.arg: kw.value for kw in call.keywords}
    if made_by in MAKE_MESH:
        shape, axes, types = (args.get(i, keywords.get(k)) for i, k in
                              enumerate(("axis_shapes", "axis_names", "axis_types")))
        if set(keywords) - {"axis_shapes", "axis_names", "axis_types"} or len(call.args) > 3:
            return None
        if not (isinstance(shape, ast.Tuple) and len(shape.elts) == 1 and _calls(module, shape.elts[0], "jax.device_count")):
            return None
        # make_mesh's own default is Explicit axes since JAX 0.9: only an explicit Auto is this mesh.
        if not (isinstance(types, ast.Tuple) and len(types.elts) == 1
                and names.qualified_name(types.elts[0]) == "jax.sharding.AxisType.Auto"):
            return None
    elif made_by == "jax.sharding.Mesh":
        devices, axes = args.get(0, keywords.get("devices")), args.get(1, keywords.get("axis_names"))
        if set(keywords) - {"devices", "axis_names"} or len(call.args) > 2:
            return None
        if not _calls(module, devices, "jax.devices"):
            return None
    else:
        return None
    if not (isinstance(axes, (ast.Tuple, ast.List)) and len(axes.elts) == 1):
        return None
    return axes.elts[0]


def _calls(module: ParsedModule, node: ast.expr | None, qualname: str) -> bool:
    return isinstance(node, ast.Call) and not node.args and not node.keywords \
        and module.names.qualified_name(node.func) == qualname

