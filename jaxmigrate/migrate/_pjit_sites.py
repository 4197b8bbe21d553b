"""Where a module applies ``jax.experimental.pjit.pjit``, and whether ``jax.jit`` is the same program there.

JAX 0.10.2's ``pjit`` is ``make_jit(..., use_resource_env=True)``, ``jax.jit`` the same with
``False`` (``jax/_src/pjit.py``). The flag only changes ``get_ctx_mesh``: pjit takes the mesh of
``with mesh:`` (``thread_resources``), binds each bare ``PartitionSpec`` leaf of its in/out
shardings to it, turns a ``None`` leaf into ``NamedSharding(mesh, P())``, traces the function under
it and compiles with it as the context mesh. Hence the plan, per application:

* no shardings, or only ``Sharding`` objects and no ``None`` leaf: ``jax.jit`` (safe);
* ``PartitionSpec`` / ``None`` leaves where every call of the jitted function runs under ``with M:``
  (``M`` a name bound once to a mesh with Auto axes; the application inside it, or a local name
  called only inside it): each leaf bound to ``M``, ``NamedSharding(M, leaf)`` /
  ``NamedSharding(M, P())`` (safe);
* the same leaves where exactly one mesh is in scope, entered by some ``with`` of the module, but
  the calls are not all seen under it: the same binding, as an unsafe fix that says what it
  assumes (a mesh no ``with`` enters, say one made for a placement, is no evidence);
* never a binding whose spec names an axis the mesh lacks ("Resource axis: x not found in mesh");
* anything else is kept, with the reason.

A bare ``jax.jit(...)`` around the pjit, or as its function, is dropped rather than nested
(``jax.jit(jax.jit(f))``): a jit with no options inside another is the same program.

Three more things were seen to matter on 8 CPU devices with 0.10.2, and are handled: with no
shardings at all, pjit under a mesh runs on all of its devices (the context mesh is the device
assignment) where jit runs where the arguments are, so that rename is unsafe where a call is seen
under a mesh; under a mesh with Explicit axes pjit also traces with sharding in types (other
layouts), so such meshes are kept; and the function's own body (a lambda or a def of this module;
what it calls is not followed) must not read the context mesh (``shard_map`` without ``mesh=``,
``get_abstract_mesh``, ``reshard``, a bare ``PartitionSpec`` given to anything but
``NamedSharding`` / ``with_sharding_constraint`` / pjit), which jit does not set until ``with mesh:``
has become ``jax.set_mesh`` (JM308).

Planning is ``ast`` only (through the one resolver) and imports no LibCST: JM201 runs it on the
check path to say, per finding, what ``--fix`` will do.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.flow import enclosing_scope
from jaxmigrate.core.module import ParsedModule
from jaxmigrate.migrate._plan import Namer, Plan, Site, Unprovable
from jaxmigrate.migrate._meshes import (
    check_auto_mesh, entered, mesh_axes, scope_bindings, spec_axes, visible_meshes, with_mesh,
)
from jaxmigrate.names import LOCAL, ImportBinding, OpaqueBinding, ValueBinding

PJIT = "jax.experimental.pjit.pjit"
RENAMED = {"in_axis_resources": "in_shardings", "out_axis_resources": "out_shardings"}
# pjit's parameters after `fun`, in order (jit takes them as keywords only).
_PARAMS = ("in_shardings", "out_shardings", "static_argnums", "static_argnames", "donate_argnums",
           "donate_argnames", "keep_unused", "device", "backend", "inline", "compiler_options")
_SPEC = frozenset({"jax.sharding.PartitionSpec", "jax.P", "jax.experimental.PartitionSpec",
                   "jax.experimental.pjit.PartitionSpec", "jax.interpreters.pxla.PartitionSpec"})
_SHARDING = frozenset({"jax.sharding.NamedSharding", "jax.NamedSharding", "jax.sharding.SingleDeviceSharding",
                       "jax.sharding.GSPMDSharding", "jax.sharding.PositionalSharding"})
_SHARD_MAP = frozenset({"jax.shard_map", "jax.experimental.shard_map.shard_map"})
_MESH_READERS = frozenset({"jax.sharding.get_abstract_mesh", "jax.sharding.get_mesh", "jax.sharding.reshard",
                           "jax.sharding.use_abstract_mesh"})
_SPEC_TAKERS = frozenset({*_SPEC, *_SHARDING, PJIT, "jax.lax.with_sharding_constraint",
                          "jax.experimental.pjit.with_sharding_constraint"})

Sites = frozenset[tuple[int, int]] | None


@dataclass(frozen=True)
class PjitSite(Site):
    """A pjit application. ``assumption`` is set when the rewrite is offered only as an unsafe fix
    (what it assumes); ``mentions`` are where the lint rule reports the pjit name it stands for."""

    assumption: str | None = None
    mentions: frozenset[tuple[int, int]] = frozenset()

    @property
    def safe(self) -> bool:
        return self.rewritable and self.assumption is None


@dataclass
class _App:
    ref: ast.expr  # the expression naming pjit
    node: ast.AST  # the call applying it, or the def it decorates
    partial: ast.Call | None = None


def plan_pjit(module: ParsedModule, plan: Plan, sites: Sites = None, unsafe: bool = False) -> list[PjitSite]:
    """Plan every pjit application (into ``plan`` those selected: at ``sites``, safe or ``unsafe``)."""
    out = []
    for ref in _refs(module):
        mentions = module.mention_positions(ref)
        pos = module.position(ref)
        scratch = Plan()
        try:
            app = _application(module, ref)
            if app is None:
                continue
            assumption = _plan(module, Namer(module, scratch), app)
        except Unprovable as exc:
            out.append(PjitSite(*pos, False, str(exc), mentions=mentions))
            continue
        out.append(PjitSite(*pos, True, None, assumption, mentions))
        if (sites is None or mentions & sites) and (assumption is None or unsafe):
            plan.edits += scratch.edits
            plan.add_imports |= scratch.add_imports
            plan.remove_imports |= _import_of(module, ref)
    return sorted(out, key=lambda s: (s.line, s.column))


# -- discovery -------------------------------------------------------------------------------


def _refs(module: ParsedModule) -> Iterator[ast.expr]:
    for node in module.of_type(ast.Name, ast.Attribute):
        if isinstance(node.ctx, ast.Load):
            if any(t.name == PJIT for t in module.names.resolve(node)):
                yield node


def _application(module: ParsedModule, ref: ast.expr) -> _App | None:
    """How ``ref`` is applied; None where it is no site of its own (an alias, a stored partial)."""
    targets = module.names.resolve(ref)
    parent = module.parent_of(ref)
    applied = _applied(module, ref)
    if any(t.partials for t in targets):
        if applied is None:
            return None
        raise Unprovable("pjit options bound by a `partial(...)` stored in a variable; apply the partial "
                         "where it is used to migrate it")
    if isinstance(ref, ast.Name) and any(isinstance(b, ValueBinding) for b in module.names.bindings(ref)):
        if applied is None:
            return None
        raise Unprovable(f"pjit reached through the variable `{ref.id}`; write `jax.jit` where it is assigned")
    names = {t.name for t in targets}
    if len(names) > 1:
        shown = ", ".join(sorted("a local binding" if n == LOCAL else n for n in names))
        raise Unprovable(f"`{module.segment(ref)}` may be {shown}; not rewritten on a guess")
    if applied is not None:
        return _App(ref, applied)
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is ref \
            and module.names.candidates(parent.func) == {"functools.partial"}:
        holder = _applied(module, parent)
        if holder is not None:
            return _App(ref, holder, parent)
        if isinstance(module.parent_of(parent), (ast.Assign, ast.AnnAssign)):
            return None  # reported where the stored partial is applied
        raise Unprovable("`partial(pjit, ...)` used as a value, not applied")
    if isinstance(parent, ast.Assign) and parent.value is ref:
        return None  # `p = pjit`: an alias, its applications are the sites
    raise Unprovable("pjit used as a value; only calls and decorators are rewritten")


def _applied(module: ParsedModule, node: ast.expr) -> ast.Call | ast.FunctionDef | ast.AsyncFunctionDef | None:
    parent = module.parent_of(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        return parent
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(d is node for d in parent.decorator_list):
        return parent
    return None


# -- planning --------------------------------------------------------------------------------


def _plan(module: ParsedModule, namer: Namer, app: _App) -> str | None:
    """Put the rewrite's edits into ``namer.plan``; return its assumption (None: none, safe)."""
    edits = namer.plan.edits
    options: dict[str, ast.expr] = {}
    if app.partial is not None and len(app.partial.args) > 1:
        raise Unprovable("`partial(pjit, ...)` binds positional arguments")
    keywords = list(app.partial.keywords) if app.partial else []
    fun: ast.AST | None = app.node
    if isinstance(app.node, ast.Call):
        keywords += app.node.keywords
        fun, extra = _positional(app.node)
        if len(extra) > len(_PARAMS):
            raise Unprovable("pjit called with more positional arguments than it takes")
        for name, arg in zip(_PARAMS, extra):
            options[name] = arg
            start = module.span(arg)[0]
            edits.append(Edit(start, start, f"{name}="))
    for kw in keywords:
        name = RENAMED.get(kw.arg or "", kw.arg)
        if name is None:
            raise Unprovable("pjit called with `**kwargs`; its options cannot be read statically")
        if name in ("device", "backend"):
            raise Unprovable(f"`{name}=` pins a device or backend (deprecated on jit too); migrate by hand")
        if name not in _PARAMS:
            raise Unprovable(f"`{kw.arg}=` is not a pjit argument jit takes")
        if name in options:
            raise Unprovable(f"`{name}` is given twice")
        options[name] = kw.value
        if kw.arg in RENAMED:
            start = module.src.offset(kw.lineno, kw.col_offset)
            edits.append(Edit(start, start + len(kw.arg), name))
    leaves = [leaf for name in ("in_shardings", "out_shardings") if name in options
              for leaf in _leaves(module, options[name])]
    _check_body(module, fun)
    mesh, assumption = None, None
    if any(kind != "sharding" for _, kind in leaves):
        mesh, assumption = _mesh(module, app)
        _check_axes(module, mesh, app.node, [leaf for leaf, kind in leaves if kind == "spec"])
    elif "in_shardings" not in options and "out_shardings" not in options and (under := _called_under(module, app)):
        assumption = (f"assumes its arguments are already on the devices of `{under}`: with no shardings at all, "
                      f"pjit called under `with {under}:` runs on all of them, jit where the arguments are")
    edits.append(Edit(*module.span(app.ref), f"{_jax(module, namer, app.ref)}.jit"))
    edits += _unnested(module, fun, app)
    for leaf, kind in leaves:
        if kind == "spec":
            edits.append(Edit(*module.span(leaf), f"{namer.sharding('NamedSharding')}({mesh}, {module.segment(leaf)})"))
        elif kind == "none":
            spec = namer.sharding("PartitionSpec", "P")
            edits.append(Edit(*module.span(leaf), f"{namer.sharding('NamedSharding')}({mesh}, {spec}())"))
    return assumption


def _unnested(module: ParsedModule, fun: ast.AST | None, app: _App) -> list[Edit]:
    """Edits that drop a bare ``jax.jit(...)`` the rewrite would nest in another: ``pjit(jax.jit(g),
    ...)`` and ``jax.jit(pjit(g, ...))`` both become ``jax.jit(g, ...)``, not ``jax.jit(jax.jit(...))``
    (a jit with no options inside another is inlined: the same program)."""
    out = []
    for inner, outer in ((fun, None), (None, module.parent_of(app.node))):
        call = inner if inner is not None else outer
        if not (isinstance(call, ast.Call) and len(call.args) == 1 and not call.keywords
                and module.names.candidates(call.func) == {"jax.jit"} and not module.has_comment(call)):
            continue
        if outer is not None and call.args[0] is not app.node:
            continue
        start, end = module.span(call)
        arg_start, arg_end = module.span(call.args[0])
        out += [Edit(start, arg_start, ""), Edit(arg_end, end, "")]
    return out


def _positional(call: ast.Call) -> tuple[ast.expr | None, list[ast.expr]]:
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise Unprovable("pjit called with `*args`; its options cannot be read statically")
    if not call.args:
        raise Unprovable("pjit called without the function as its first argument")
    return call.args[0], call.args[1:]


def _leaves(module: ParsedModule, expr: ast.expr) -> list[tuple[ast.expr, str]]:
    """The sharding leaves of a literal pytree: (node, "spec" | "sharding" | "none")."""
    if isinstance(expr, ast.Constant) and expr.value is None:
        return [(expr, "none")]
    if isinstance(expr, (ast.Tuple, ast.List)):
        return [leaf for e in expr.elts for leaf in _leaves(module, e)]
    if isinstance(expr, ast.Dict) and all(isinstance(k, ast.Constant) for k in expr.keys):
        return [leaf for v in expr.values for leaf in _leaves(module, v)]
    value = expr
    if isinstance(expr, ast.Name):
        bindings = module.names.bindings(expr)
        value = bindings[0].value if len(bindings) == 1 and isinstance(bindings[0], ValueBinding) else None
    if isinstance(value, ast.Call):
        callee = module.names.qualified_name(value.func)
        if callee in _SPEC:
            return [(expr, "spec")]
        if callee in _SHARDING:
            return [(expr, "sharding")]
    raise Unprovable(f"the sharding `{module.segment(expr)}` is computed at run time; only `PartitionSpec(...)`, "
                     "`NamedSharding(...)` and `None` leaves (or names bound once to them) are read")


def _check_body(module: ParsedModule, fun: ast.AST | None) -> None:
    """Refuse a function whose own body reads the mesh context pjit would trace it under."""
    bodies: list[ast.AST] = []
    if isinstance(fun, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
        bodies.append(fun)
    elif isinstance(fun, ast.Name):
        bodies += [b.node for b in module.names.bindings(fun)
                   if isinstance(b, OpaqueBinding) and isinstance(b.node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for body in bodies:
        parts = body.body if isinstance(body.body, list) else [body.body]
        for node in (n for part in parts for n in ast.walk(part)):
            if not isinstance(node, ast.Call):
                continue
            callee = module.names.qualified_name(node.func)
            reads = callee in _MESH_READERS or callee in _SHARD_MAP and len(node.args) < 2 and not any(
                k.arg == "mesh" for k in node.keywords)
            if not reads and callee not in _SPEC_TAKERS and not (callee in _SHARD_MAP):
                args = [*node.args, *(k.value for k in node.keywords)]
                args += [e for a in args if isinstance(a, (ast.Tuple, ast.List)) for e in a.elts]
                reads = any(isinstance(a, ast.Call) and module.names.qualified_name(a.func) in _SPEC for a in args)
            if reads:
                raise Unprovable(f"the function's body calls `{module.segment(node.func)}`, which reads the mesh "
                                 "context that pjit traces it under and jit does not")


def _mesh(module: ParsedModule, app: _App) -> tuple[str, str | None]:
    """The mesh the PartitionSpec / None leaves are bound to, and the rewrite's assumption. pjit
    reads the mesh when the jitted function is called, so what counts is the ``with`` around each
    call: the application's own when it is called at once, else that of every call of the name it
    is bound to (a module-level name only when the application is in a ``with`` itself: importers
    may call it too)."""
    label, uses = _uses(module, app)
    here = with_mesh(module, app.node)
    visible = visible_meshes(module, app.node)
    if uses == [] and here is not None:
        return here[0], None
    if uses and (here is not None or not isinstance(enclosing_scope(module, app.node), ast.Module)):
        try:
            around = {found[:2] if (found := with_mesh(module, use)) else None for use in uses}
        except Unprovable:
            around = {None}
        if len(around) == 1 and (only := around.pop()) is not None:
            name, binding = only
            if binding is (here[1] if here else visible.get(name, [None])[0]):
                return name, None
    if here is not None:
        name = here[0]
        return name, f"assumes {label} is called only under `with {name}:` (not all its uses are)"
    if not visible:
        raise Unprovable("its PartitionSpec/None shardings take their mesh from a `with mesh:` around the call, "
                         "and no mesh is in sight here")
    if len(visible) > 1:
        raise Unprovable(f"several meshes are in scope ({', '.join(f'`{m}`' for m in visible)}); which one a "
                         "`with` around the call enters is only known at run time")
    ((name, bindings),) = visible.items()
    check_auto_mesh(module, name, bindings)
    if not entered(module, name, bindings):
        # A mesh no `with` of the module enters (one made for other code, a fix's own mesh for a
        # replicated placement) is no evidence of the mesh pjit runs under.
        raise Unprovable(f"its PartitionSpec/None shardings take their mesh from a `with mesh:` around the call; "
                         f"the one mesh in scope, `{name}`, is entered by no `with` of this module")
    return name, f"assumes {label} is called under `with {name}:` (the one mesh in scope)"


def _check_axes(module: ParsedModule, mesh: str, node: ast.AST, specs: list[ast.expr]) -> None:
    """Refuse a binding that names an axis the mesh does not have ("Resource axis: x not found")."""
    bindings = [b for b in scope_bindings(module, node, mesh) or visible_meshes(module, node).get(mesh, [])]
    axes = mesh_axes(module, bindings)
    if axes is None:
        return
    for spec in specs:
        value = spec
        if isinstance(spec, ast.Name):
            found = module.names.bindings(spec)
            value = found[0].value if len(found) == 1 and isinstance(found[0], ValueBinding) else None
        named = spec_axes(value) if isinstance(value, ast.Call) else None
        if named and not named <= axes:
            missing = ", ".join(f"'{a}'" for a in sorted(named - axes))
            raise Unprovable(f"`{module.segment(spec)}` names the axis {missing}, which the mesh `{mesh}` it would be "
                             f"bound to does not have (axes {', '.join(repr(a) for a in sorted(axes))})")


def _called_under(module: ParsedModule, app: _App) -> str | None:
    """A mesh the jitted function is seen to be called under (at once, or through its name)."""
    for node in [app.node, *(_uses(module, app)[1] or ())]:
        try:
            found = with_mesh(module, node)
        except Unprovable:
            continue
        if found is not None:
            return found[0]
    return None


def _uses(module: ParsedModule, app: _App) -> tuple[str, list[ast.Name] | None]:
    """How the jitted function is named in messages, and the calls of it: [] when the application
    is called at once, None when it may be used other than by calling it by its one name."""
    holder = module.parent_of(app.node)
    if isinstance(app.node, ast.Call):
        if isinstance(holder, ast.Call) and holder.func is app.node:
            return "the function", []
        if not (isinstance(holder, ast.Assign) and len(holder.targets) == 1
                and isinstance(holder.targets[0], ast.Name)):
            return "the function", None
        name, anchor = holder.targets[0].id, holder
    else:
        name, anchor = app.node.name, app.node
    bound = scope_bindings(module, anchor, name)
    if len(bound) != 1:
        return f"`{name}`", None
    uses = []
    for use in module.of_type(ast.Name):
        if use.id == name and isinstance(use.ctx, ast.Load) \
                and any(b is bound[0] for b in module.names.bindings(use)):
            parent = module.parent_of(use)
            if not (isinstance(parent, ast.Call) and parent.func is use):
                return f"`{name}`", None
            uses.append(use)
    return f"`{name}`", uses


def _jax(module: ParsedModule, namer: Namer, ref: ast.expr) -> str:
    root = ref
    while isinstance(root, ast.Attribute):
        root = root.value
    if root is not ref and module.names.qualified_name(root) == "jax":
        return module.segment(root)  # the alias written at this very place
    if module.names.star_imports and module.module_alias("jax") is None:
        raise Unprovable("a star import may bind `jax` itself, so `import jax` cannot be added safely")
    return namer.jax()


def _import_of(module: ParsedModule, ref: ast.expr) -> set[tuple[str, str | None, str | None]]:
    """The import ``ref`` reaches pjit through, to remove once nothing uses it. A plain
    ``import jax.experimental.pjit`` also binds ``jax``, so it stays."""
    root = ref
    while isinstance(root, ast.Attribute):
        root = root.value
    out: set[tuple[str, str | None, str | None]] = set()
    for binding in module.names.bindings(root) if isinstance(root, ast.Name) else []:
        if not isinstance(binding, ImportBinding) or binding.qualname not in (PJIT, "jax.experimental.pjit"):
            continue
        stmt = module.parent_of(binding.node)
        if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            out.add((stmt.module, binding.node.name, binding.node.asname))
        elif isinstance(stmt, ast.Import) and binding.node.asname:
            out.add((binding.node.name, None, binding.node.asname))
    return out
