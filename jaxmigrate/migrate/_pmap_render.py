"""The text of the exact pmap rewrite, in the module's own names, as edits of a shared ``Plan``.

One application becomes one expression over public APIs, and its axis gets one mesh in the
function that builds the step (``_pmap_setting``: never at import), just above that statement::

    mesh = jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))
    step = jax.jit(jax.shard_map(jax.vmap(f, in_axes=(0, None)), mesh=mesh,
                                 in_specs=(P("batch"), P()), out_specs=P("batch"), check_vma=False))

pmap's ``in_axes`` / ``out_axes`` go to ``jax.vmap`` unchanged (it maps the per-device slice of
size 1 exactly as pmap maps the device axis); the specs say the same thing to ``jax.shard_map``:
axis ``k`` is ``P(None, ..., name)`` (``k`` Nones), an unmapped argument ``P()``, a static one
``None`` (shard_map passes it through untraced, as ``jax.jit``'s ``static_argnums`` hands it over).

``check_vma=False`` is pmap's own setting (``jax/_src/pmap.py``), and not noise: with the default
``True``, ``jax.grad`` inside the body transposes the implicit ``pvary`` of a replicated (``P()``)
input into a ``psum``, so the gradient of a broadcast parameter comes out summed over devices,
where pmap returns each device's own (measured on 8 CPU devices: 8x).

Nothing here decides whether a rewrite is right; ``_pmap_sites`` and ``_pmap_setting`` do, and calls ``render`` on
a scratch plan to learn whether the names can be spelled.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.module import ParsedModule
from jaxmigrate.migrate._meshes import every_device_mesh_axis
from jaxmigrate.migrate._plan import Namer, Plan, Unprovable
from jaxmigrate.migrate._pmap_setting import users_jit
from jaxmigrate.names import ImportBinding, ValueBinding

if TYPE_CHECKING:
    from jaxmigrate.migrate._pmap_sites import Application, Axis, PmapOptions


@dataclass
class _Mesh:
    name: str
    statement: str  # the assignment that makes it, indented ("" when the module has it already)
    before: ast.AST  # the statement of the driving function it is inserted before
    key: tuple[int, str, str | None]  # the function, the axis, and the device count when not every device


class Rewriter:
    """Renders applications of one module into ``plan``; ``finish`` adds the meshes they use."""

    def __init__(self, module: ParsedModule, plan: Plan) -> None:
        self.module = module
        self.plan = plan
        self.meshes: dict[tuple[int, str, str | None], _Mesh] = {}  # by function, Axis.key and count
        names = module.names
        # Asked per site, computed once: a scan per site is quadratic in pmap-dense files.
        self._inner_names = {name for s in names.scopes if s is not names.module_scope for name in s.bindings}
        self._pmap_imports = {("jax", "pmap", b.node.asname) for b, scope in names.imports()
                              if scope is names.module_scope and b.qualname == "jax.pmap" and b.node.name != "*"}
        bound = names.module_scope.bindings
        self._jax_aliases = [name for name, bindings in bound.items() if bindings and all(
            isinstance(b, ImportBinding) and b.qualname == "jax" for b in bindings)]

    # -- one application ----------------------------------------------------------------------

    def render(self, app: Application) -> None:
        """Add the edits of one application; raises ``Unprovable`` (and adds nothing) when the
        module does not let its names be spelled."""
        module, options = self.module, app.options
        scratch = Plan()
        namer = Namer(module, scratch)
        # A decorator's mesh goes above the def it decorates, not between its decorators.
        mesh = self._mesh(options.axis, app.mapped if app.kind == "decorator" else app.node, namer, app.mesh_devices)
        jax = self._jax_at(app.ref, namer)
        spec = namer.sharding("PartitionSpec", "P")
        axis = module.segment(options.axis.expr) if options.axis.expr is not None else json.dumps(options.axis.key)
        vmap_kw, in_specs = self._inputs(options, spec, axis)
        out_specs = self._specs(options.out_axes, spec, axis, top=False) if options.out_axes is not None \
            else f"{spec}({axis})"
        if options.out_axes is not None:
            vmap_kw.append(f"out_axes={module.segment(options.out_axes)}")
        jit_kw = []
        if options.static:
            jit_kw.append(f"static_argnums={module.segment(options.static_expr)}")
        if options.donate is not None:
            jit_kw.append(f"donate_argnums={module.segment(options.donate)}")
        shard_kw = [f"mesh={mesh.name}", f"in_specs={in_specs}", f"out_specs={out_specs}", "check_vma=False"]
        multiline = app.node.lineno != app.node.end_lineno
        layout = _Layout(self._indent_of(app.node.lineno), self._continuation(app.node), module.src.newline)
        if app.kind == "decorator":
            text = self._decorators(app, jax, self._partial(options, namer), vmap_kw, shard_kw, jit_kw,
                                    multiline and layout)
        else:
            vmap = _call(f"{jax}.vmap", [module.segment(options.fun), *vmap_kw])
            if not jit_kw and users_jit(module, app.node) is not None:  # `jax.jit(jax.pmap(f))`: the user's jit is the jit
                text = _call(f"{jax}.shard_map", [vmap, *shard_kw], multiline and layout)
            else:
                inner = _call(f"{jax}.shard_map", [vmap, *shard_kw], multiline and layout.deeper())
                text = _call(f"{jax}.jit", [inner, *jit_kw], multiline and layout)
        self._remove_pmap_imports(scratch)
        # Committed only now that nothing raised: a refused site leaves no import or mesh behind.
        self.meshes.setdefault(mesh.key, mesh)
        self.plan.edits.append(Edit(*module.span(app.node), text))
        self.plan.add_imports |= scratch.add_imports
        self.plan.remove_imports |= scratch.remove_imports

    def _decorators(self, app, jax, partial, vmap_kw, shard_kw, jit_kw, layout) -> str:
        indent, newline = self._indent_of(app.node.lineno), self.module.src.newline
        jit = _call(partial, [f"{jax}.jit", *jit_kw]) if jit_kw else f"{jax}.jit"
        shard = _call(partial, [f"{jax}.shard_map", *shard_kw], layout)
        vmap = _call(partial, [f"{jax}.vmap", *vmap_kw]) if vmap_kw else f"{jax}.vmap"
        return f"{jit}{newline}{indent}@{shard}{newline}{indent}@{vmap}"

    def _inputs(self, options: PmapOptions, spec: str, axis: str) -> tuple[list[str], str]:
        """vmap's in_axes keyword (if any) and shard_map's in_specs."""
        in_axes = options.in_axes
        if not options.static:
            if in_axes is None:
                return [], f"{spec}({axis})"
            return [f"in_axes={self.module.segment(in_axes)}"], self._specs(in_axes, spec, axis, top=True)
        # Static arguments: None in both, at their positions (so the arity must be known).
        elements = in_axes.elts if isinstance(in_axes, (ast.Tuple, ast.List)) else [in_axes] * options.arity
        axes, specs = [], []
        for position, element in enumerate(elements):
            if position in options.static:
                axes.append("None")
                specs.append("None")
            elif element is None:
                axes.append("0")
                specs.append(_spec(0, spec, axis))
            else:
                axes.append(self.module.segment(element))
                specs.append(self._specs(element, spec, axis, top=False))
        return [f"in_axes={_tuple(axes)}"], _tuple(specs)

    def _specs(self, node: ast.expr, spec: str, axis: str, top: bool) -> str:
        """The pytree of PartitionSpecs for a literal pytree of axes (one spec when all agree)."""
        leaves = _leaves(node)
        if leaves and all(type(v) is int for v in leaves) and len(set(leaves)) == 1:
            return _spec(leaves[0], spec, axis)
        if isinstance(node, ast.Constant):
            return _spec(node.value, spec, axis)
        if isinstance(node, ast.Dict):
            items = [f"{self.module.segment(k)}: {self._specs(v, spec, axis, False)}" for k, v in zip(node.keys, node.values)]
            return "{" + ", ".join(items) + "}"
        parts = [self._specs(e, spec, axis, False) for e in node.elts]
        # At the top, in_specs must be a tuple like the arguments (vmap takes a list there as one).
        if isinstance(node, ast.List) and not top:
            return "[" + ", ".join(parts) + "]"
        return _tuple(parts)

    # -- names ------------------------------------------------------------------------------------

    def _jax_at(self, ref: ast.expr, namer: Namer) -> str:
        """jax as the site spells it (``J.pmap`` -> ``J``), else the module's name for it."""
        names = self.module.names
        if isinstance(ref, ast.Attribute) and names.qualified_name(ref.value) == "jax":
            return self.module.segment(ref.value)
        alias = self._module_jax(namer)
        if alias in self._inner_names:
            raise Unprovable(f"`{alias}` is rebound in a function here, so jax cannot be named at this site")
        return alias

    def _module_jax(self, namer: Namer) -> str:
        """The module-level name of jax (shadowing in functions does not matter at module level)."""
        aliases = self._jax_aliases
        if aliases:
            return "jax" if "jax" in aliases else aliases[0]
        names = self.module.names
        if "jax" in names.module_scope.bindings:
            raise Unprovable("the name `jax` is bound to something other than the jax module here")
        inner = [b for scope in names.scopes for b in scope.bindings.get("jax", ())]
        if inner and not names.star_imports and all(isinstance(b, ImportBinding) and b.qualname == "jax" for b in inner):
            namer.plan.add_imports.add(("jax", None, None))  # imported in functions only: same module
            return "jax"
        return namer.jax()

    def _partial(self, options: PmapOptions, namer: Namer) -> str:
        """functools.partial as the module spells it (the pmap's own partial when it had one)."""
        module = self.module
        if options.partial is not None:
            return module.segment(options.partial.func)
        alias = namer.alias("functools.partial")
        if alias:
            return alias
        alias = namer.alias("functools")
        if alias:
            return f"{alias}.partial"
        if module.free("partial"):
            namer.plan.add_imports.add(("functools", "partial", None))
            return "partial"
        if module.free("functools"):
            namer.plan.add_imports.add(("functools", None, None))
            return "functools.partial"
        raise Unprovable("neither `partial` nor `functools` is free here to spell functools.partial")

    def _remove_pmap_imports(self, plan: Plan) -> None:
        # Removed by LibCST only if nothing uses the name after the rewrite.
        plan.remove_imports |= self._pmap_imports

    def _continuation(self, node: ast.AST) -> str:
        """The extra indentation of the call's own continuation lines (Google style uses 4 in a
        2-space file), else the file's indentation unit."""
        base = self._indent_of(node.lineno)
        for line in range(node.lineno + 1, node.end_lineno + 1):
            text = self.module.src.line(line)
            if text.strip():
                indent = self._indent_of(line)
                return indent[len(base):] if indent.startswith(base) and len(indent) > len(base) else self.module.indent
        return self.module.indent

    def _indent_of(self, line: int) -> str:
        text = self.module.src.line(line)
        return text[: len(text) - len(text.lstrip(" \t"))]

    # -- the mesh, in the function that builds the step ------------------------------------------

    def _mesh(self, axis: Axis, node: ast.AST, namer: Namer, count: str | None = None) -> _Mesh:
        """The mesh of ``axis`` in the function that builds the step (``_pmap_setting``: never at
        import): planned already, one the module builds at import anyway, or new, just before the
        statement of the function's body that applies pmap. Over every device, or over the first
        ``count`` local devices where the step maps that many (pmap ran on as many devices as the
        mapped axis is long)."""
        function = self._function_of(node)
        key = (id(function), axis.key, count)
        known = self.meshes.get(key)
        if known is not None:
            return known
        statement = node
        while self.module.parent_of(statement) is not function:
            statement = self.module.parent_of(statement)
        if count is None:
            existing = self._existing_mesh(axis, self.module.top_level(node)) or self._local_mesh(axis, function, statement)
            if existing is not None:
                return _Mesh(existing, "", function, key)
        jax = self._module_jax(namer)
        text = self.module.segment(axis.expr) if axis.expr is not None else json.dumps(axis.key)
        stem = axis.value if axis.value is not None else axis.key.strip("<>").rpartition(".")[2].lower()
        name = self._mesh_name(stem)
        indent = self._indent_of(statement.lineno)
        shape = f"{jax}.device_count()" if count is None else count
        devices = "" if count is None else f"devices={jax}.local_devices()[:{count}], "
        return _Mesh(name, f"{indent}{name} = {jax}.make_mesh(({shape},), ({text},), {devices}"
                           f"axis_types=({jax}.sharding.AxisType.Auto,))", statement, key)

    def _function_of(self, node: ast.AST) -> ast.AST:
        parent = self.module.parent_of(node)
        while not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if parent is None or isinstance(parent, (ast.Module, ast.ClassDef)):
                raise Unprovable("pmap is applied at import; the exact rewrite builds its mesh in a function")
            parent = self.module.parent_of(parent)
        return parent

    def _mesh_name(self, axis: str) -> str:
        if self.module.names.star_imports:
            raise Unprovable("a `from ... import *` hides which names are free for the mesh")
        taken = {mesh.name for mesh in self.meshes.values()}
        stem = re.sub(r"\W", "_", axis).strip("_") or "pmap"
        for name in ("mesh", f"{stem}_mesh", *(f"{stem}_mesh_{i}" for i in range(2, 100))):
            if name.isidentifier() and name not in taken and self.module.free(name):
                return name
        raise Unprovable("no free name for the module-level mesh")  # pragma: no cover

    def _defined_before(self, name: str, statement: ast.stmt) -> bool:
        bindings = self.module.names.module_scope.bindings.get(name, [])
        start = self.module.insertion_point(statement)
        for binding in bindings:
            node = binding.node if isinstance(binding, ImportBinding) else getattr(binding, "value", None)
            if node is None or self.module.span(node)[0] >= start:
                return False
        return bool(bindings)

    def _existing_mesh(self, axis: Axis, statement: ast.stmt) -> str | None:
        """A module-level name bound once, before ``statement``, to exactly this mesh: the 1-D
        Auto mesh of every device over ``axis`` (as this rewrite writes it, or ``Mesh(jax.devices(),
        (axis,))``), and bound nowhere else."""
        names = self.module.names
        for name, bindings in names.module_scope.bindings.items():
            if len(bindings) != 1 or not isinstance(bindings[0], ValueBinding):
                continue
            value = bindings[0].value
            if not isinstance(value, ast.Call) or not isinstance(self.module.parent_of(value), ast.Assign):
                continue
            if not isinstance(self.module.parent_of(self.module.parent_of(value)), ast.Module):
                continue
            if name in self._inner_names:
                continue
            if self._is_mesh_of(value, axis) and self._defined_before(name, statement):
                return name
        return None

    def _local_mesh(self, axis: Axis, function: ast.AST, statement: ast.stmt) -> str | None:
        """A name bound once in ``function``, by a statement of its body before ``statement``, to
        exactly this mesh (an earlier pass of this rewrite made it there)."""
        scope = self.module.names.scope_opened_by(function)
        for name, bindings in (scope.bindings.items() if scope is not None else ()):
            value = bindings[0].value if len(bindings) == 1 and isinstance(bindings[0], ValueBinding) else None
            assign = self.module.parent_of(value) if isinstance(value, ast.Call) else None
            if isinstance(assign, ast.Assign) and self.module.parent_of(assign) is function \
                    and assign.end_lineno < statement.lineno and self._is_mesh_of(value, axis):
                return name
        return None

    def _is_mesh_of(self, call: ast.Call, axis: Axis) -> bool:
        named = every_device_mesh_axis(self.module, call)
        if named is None:
            return False
        if isinstance(named, ast.Constant):
            return named.value == axis.value
        return self._axis_key(named) == axis.key

    def _axis_key(self, node: ast.expr) -> str | None:
        """What identifies the axis a mesh statement names (as ``Axis.key``)."""
        names = self.module.names
        if isinstance(node, ast.Name):
            bindings = names.module_scope.bindings.get(node.id, [])
            if len(bindings) == 1 and isinstance(bindings[0], ValueBinding):
                value = bindings[0].value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return value.value
        qualname = names.qualified_name(node)
        return None if qualname is None else f"<{qualname}>"

    # -- the meshes, once every application is rendered ---------------------------------------

    def finish(self) -> None:
        """Insert each new mesh on its own line just before the statement that builds the step:
        above its decorators and the comment lines directly over it, which stay with it."""
        newline = self.module.src.newline
        at: dict[int, list[str]] = {}
        for mesh in self.meshes.values():
            if mesh.statement:
                gap = newline if isinstance(mesh.before, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
                offset = self.module.src.line_starts[self._first_line(mesh.before) - 1]
                at.setdefault(offset, []).append(mesh.statement + newline + gap)
        for offset, texts in at.items():
            self.plan.edits.append(Edit(offset, offset, "".join(texts)))

    def _first_line(self, statement: ast.stmt) -> int:
        """The first line of ``statement``, a statement of a function's body, with its decorators
        and the comment lines directly above it (below the statement before it)."""
        line = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
        body = self.module.parent_of(statement).body  # the function's: the mesh goes in it
        index = next(i for i, s in enumerate(body) if s is statement)
        floor = body[index - 1].end_lineno if index else line - 1
        while line - 1 > floor and self.module.src.line(line - 1).lstrip().startswith("#"):
            line -= 1
        return line


def _spec(axis: int | None, spec: str, name: str) -> str:
    return f"{spec}()" if axis is None else f"{spec}({'None, ' * axis}{name})"


def _leaves(node: ast.expr) -> list:
    if isinstance(node, ast.Constant):
        return [node.value]
    children = node.values if isinstance(node, ast.Dict) else node.elts
    return [leaf for child in children for leaf in _leaves(child)]


def _tuple(parts: list[str]) -> str:
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


@dataclass(frozen=True)
class _Layout:
    """Where the lines of a call laid out one argument a line go."""

    indent: str  # of the line the call starts on (and of its closing parenthesis)
    unit: str  # added for each argument line
    newline: str

    def deeper(self) -> _Layout:
        return _Layout(self.indent + self.unit, self.unit, self.newline)


def _call(func: str, args: list[str], layout: _Layout | bool = False) -> str:
    """``func(args)``, on one line, or with a layout one argument a line (a call that spanned lines)."""
    if not layout:
        return f"{func}({', '.join(args)})"
    inner, newline = layout.indent + layout.unit, layout.newline
    return f"{func}({newline}" + "".join(f"{inner}{a},{newline}" for a in args) + f"{layout.indent})"
