"""Where a module applies ``jax.pmap``, with which options, and whether the exact rewrite applies.

Decisions are made on the ``ast`` with the package's one resolver (never by a name match: a
local ``def pmap`` is not jax's). Every application is classified (call, decorator, or a mention
used as a value), its options are read, and it is either given ``options`` (what
``_pmap_render`` needs to write ``jax.jit(jax.shard_map(jax.vmap(f), ...))``) or a ``reason``.
The texts are rendered once here too, into a scratch plan, so a naming problem is a reason on
the check path and not a surprise when fixing.
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass, field
from functools import cached_property

from jaxmigrate.core.ast_fields import walk
from jaxmigrate.core.flow import ancestors, enclosing_scope
from jaxmigrate.core.module import ParsedModule
from jaxmigrate.migrate._plan import Plan, Unprovable, declined_edits, invented_axis
from jaxmigrate.names import LOCAL, NameResolver, OpaqueBinding, Target, ValueBinding

PMAP = "jax.pmap"
# pmap names an unnamed axis so; collectives written against it must keep working.
INTERNAL_AXIS = "_internal_pmap_axis_name"
READABLE_AXIS = "devices"  # what an unnamed pmap's axis is called otherwise
_LAYOUTS = frozenset({"jax.sharding.Mesh", "jax.sharding.PartitionSpec", "jax.P"})

_OPTIONS = ("axis_name", "in_axes", "out_axes", "static_broadcasted_argnums", "donate_argnums")
_REFUSED = {
    "devices": "`devices=` picks a device subset the rewrite's mesh of every device would not reproduce",
    "backend": "`backend=` selects a platform the rewrite's mesh does not model",
    "axis_size": "`axis_size=` (without `devices=`) is not translated; remove it or migrate by hand",
}
_MIRRORED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.NotEq: ast.NotEq, ast.Eq: ast.Eq}
_MULTI_PROCESS_WORDS = frozenset({"process_index", "process_count", "distributed", "initialize",
                                  "host_local_array_to_global_array", "multihost_utils"})

Span = tuple[int, int, int, int]  # start line, start column, end line, end column (0-based characters)


@dataclass(frozen=True)
class Axis:
    """The pmap's axis name: what identifies it (its value, or the qualified name of the constant
    it is read from), its value when known, and the expression that spells it (None: unnamed)."""

    key: str
    value: str | None = None
    expr: ast.expr | None = None


@dataclass
class PmapOptions:
    """What a rewritable application maps and how: the parts of the replacement."""

    axis: Axis
    fun: ast.expr | None = None  # the mapped function (call form); the decorated def otherwise
    in_axes: ast.expr | None = None
    out_axes: ast.expr | None = None
    static: tuple[int, ...] = ()
    static_expr: ast.expr | None = None
    donate: ast.expr | None = None
    partial: ast.Call | None = None  # the partial(jax.pmap, ...) the options came from
    arity: int | None = None  # positional parameters, known when static arguments need it


@dataclass
class Application:
    """One place ``jax.pmap`` is applied (or mentioned), with the plan for it."""

    ref: ast.expr  # the expression naming jax.pmap; its position is the site's position
    line: int
    column: int  # 1-based, in characters
    kind: str = "value"  # call | decorator | value
    node: ast.expr | None = None  # the expression that is replaced (a Call or a decorator)
    span: Span | None = None
    mapped: ast.AST | None = None  # the function pmap maps, when it can be found
    reason: str | None = None
    options: PmapOptions | None = None  # set when the site's options can be read and spelled
    nested_with: list[Application] = field(default_factory=list)
    # Why the exact rewrite is not right where the module runs it (``_pmap_setting``); unlike
    # ``reason``, it does not bar the global view, which builds no mesh at the step.
    setting: str | None = None
    # The driver's name of the count the step maps over when it is not every device (brax's
    # `local_devices_to_use`): the rewrite's mesh holds the first that many local devices.
    mesh_devices: str | None = None

    @property
    def exact_reason(self) -> str | None:
        """Why the exact rewrite is not offered here, or None when it is."""
        return self.reason or self.setting


def _axes_literal(node: ast.expr) -> bool:
    """An int >= 0, None, or a tuple / list / dict (constant keys) of them: what pmap accepts."""
    if isinstance(node, ast.Constant):
        return node.value is None or (type(node.value) is int and node.value >= 0)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_axes_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(isinstance(k, ast.Constant) for k in node.keys) and all(map(_axes_literal, node.values))
    return False


def _has_none(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Constant) and n.value is None for n in ast.walk(node))


def _argnums_literal(node: ast.expr, names) -> tuple[int, ...] | None:
    if isinstance(node, ast.Call) and names.builtin(node.func) in ("tuple", "list") and not node.keywords \
            and len(node.args) <= 1:  # `tuple()`, `tuple([0, 1])`
        return _argnums_literal(node.args[0], names) if node.args else ()
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    values = (value,) if type(value) is int else value
    if isinstance(values, (tuple, list)) and all(type(v) is int and v >= 0 for v in values):
        return tuple(values)
    return None


def planner_of(module: ParsedModule) -> Planner:
    """The module's one planner: the rule, the global view and the codemods of one text ask the
    same one (each of its scans reads the whole module; two planners did every scan twice)."""
    planner = module.shared.get("pmap_planner")
    if planner is None:
        planner = module.shared["pmap_planner"] = Planner(module.text, module.tree, module=module)
    return planner


class Planner:
    """Finds every pmap application of one module and plans its rewrite (or says why not)."""

    def __init__(self, text: str, tree: ast.Module, names: NameResolver | None = None,
                 module: ParsedModule | None = None) -> None:
        # A module's planner is kept in its ``shared``: a strong reference back would be a cycle,
        # holding the whole tree until the cyclic GC traverses it (``planner_of``).
        self._own = ParsedModule(text, tree, names) if module is None else None
        self._module = weakref.ref(self._own or module)
        self.source = self.module.src
        self.tree = self.module.tree
        self.resolver = self.module.names
        self.parents = self.module.parent
        self._apps: list[Application] | None = None

    @property
    def module(self) -> ParsedModule:
        return self._module()

    # -- discovery ----------------------------------------------------------------------

    def applications(self) -> list[Application]:
        if self._apps is not None:
            return self._apps
        apps = []
        for node in self.module.of_type(ast.Name, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                targets = self.resolver.resolve(node)
                if any(t.name == PMAP for t in targets):
                    app = self._classify(node, targets)
                    if app is not None:
                        apps.append(app)
        apps.sort(key=lambda a: (a.line, a.column))
        self._mark_nested(apps)
        for app in apps:
            if app.reason is None and app.nested_with:
                other = app.nested_with[0]
                app.reason = (f"nested pmap (with the pmap at line {other.line}): a shard_map inside "
                              "a shard_map needs a 2-D mesh; migrate by hand")
            if app.reason is None and app.options is not None:
                self._check_keyword_calls(app)
        self._check_setting(apps)
        self._check_rendering(apps)
        for app in apps:
            if app.reason is not None:
                app.options = None
        self._apps = apps
        return apps

    def _app(self, ref: ast.expr) -> Application:
        line, column = self.source.position(self.source.span(ref)[0])
        return Application(ref, line, column)

    def _span(self, node: ast.AST) -> Span:
        start, end = self.source.span(node)
        (line, column), (end_line, end_column) = self.source.position(start), self.source.position(end)
        return (line, column - 1, end_line, end_column - 1)

    def _classify(self, ref: ast.expr, targets: tuple[Target, ...]) -> Application | None:
        parent = self.parents.get(id(ref))
        app = self._app(ref)
        if len(targets) > 1 or targets[0].name == LOCAL:
            names = ", ".join(sorted("a local binding" if t.name == LOCAL else t.name for t in targets))
            app.reason = f"`{self.module.segment(ref)}` may be {names}; not rewritten on a guess"
        target = targets[0]
        if target.partials:
            # A name bound to partial(jax.pmap, ...): the options live where the partial is made.
            if self._applied(ref) is None:
                return None
            app.reason = app.reason or ("pmap options bound by a `partial(...)` stored in a variable; "
                                        "apply the partial where it is used to migrate it")
            return app
        if isinstance(parent, ast.Call) and parent.func is ref:
            return self._plan_call(app, parent, partial=None)
        if isinstance(parent, ast.Call) and parent.args and parent.args[0] is ref and self._is_partial(parent):
            applied = self._applied(parent)
            if applied is None:
                grand = self.parents.get(id(parent))
                if isinstance(grand, (ast.Assign, ast.AnnAssign)):
                    return None  # reported where the stored partial is applied
                app.reason = app.reason or "`partial(jax.pmap, ...)` used as a value, not applied"
                return app
            if isinstance(applied, ast.Call):
                return self._plan_call(app, applied, partial=parent)
            return self._plan_decorator(app, parent, applied, partial=parent)
        if self._decorated(ref) is not None:
            return self._plan_decorator(app, ref, self._decorated(ref), partial=None)
        if isinstance(parent, ast.Assign) and parent.value is ref and all(
            isinstance(t, ast.Name) for t in parent.targets
        ):
            return None  # `pm = jax.pmap`: an alias; its applications are the sites
        app.reason = app.reason or "jax.pmap used as a value; only calls and decorators are rewritten"
        return app

    def _is_partial(self, call: ast.Call) -> bool:
        return self.resolver.candidates(call.func) == {"functools.partial"}

    def _decorated(self, node: ast.expr) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        parent = self.parents.get(id(node))
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(d is node for d in parent.decorator_list):
            return parent
        return None

    def _applied(self, node: ast.expr) -> ast.Call | ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The call applying ``node`` to a function, or the def it decorates."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            return parent
        return self._decorated(node)

    # -- planning -----------------------------------------------------------------------

    def _plan_call(self, app: Application, call: ast.Call, partial: ast.Call | None) -> Application:
        app.kind, app.node, app.span = "call", call, self._span(call)
        positional = list(call.args)
        keywords = list(partial.keywords if partial is not None else []) + list(call.keywords)
        if partial is not None and len(partial.args) > 1:
            return self._refuse(app, "`partial(jax.pmap, ...)` binds positional arguments")
        if any(isinstance(a, ast.Starred) for a in positional):
            return self._refuse(app, "pmap called with `*args`; its options cannot be read statically")
        if not positional:
            return self._refuse(app, "pmap called without the function to map")
        fun, *extra = positional
        if isinstance(fun, ast.Lambda):
            app.mapped = fun
        elif isinstance(fun, ast.Name):
            defs = [b.node for b in self.resolver.bindings(fun) if isinstance(b, OpaqueBinding)]
            app.mapped = next((d for d in defs if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if len(extra) > 1:
            return self._refuse(app, "pmap called with more than two positional arguments")
        options = self._options(app, keywords, extra[0] if extra else None, partial)
        if options is not None:
            options.fun = fun
        return self._check_comments(app, call, options)

    def _plan_decorator(self, app, decorator: ast.expr, func, partial: ast.Call | None) -> Application:
        app.kind, app.node, app.span = "decorator", decorator, self._span(decorator)
        app.mapped = func
        if partial is not None and len(partial.args) > 1:
            return self._refuse(app, "`partial(jax.pmap, ...)` binds positional arguments")
        options = self._options(app, partial.keywords if partial is not None else [], None, partial)
        return self._check_comments(app, decorator, options)

    def _options(self, app: Application, keywords: list[ast.keyword], axis_name: ast.expr | None,
                 partial: ast.Call | None) -> PmapOptions | None:
        given: dict[str, ast.expr] = {}
        if axis_name is not None:
            given["axis_name"] = axis_name
        for kw in keywords:
            if kw.arg is None:
                return self._no(app, "pmap called with `**kwargs`; its options cannot be read statically")
            if kw.arg in _REFUSED:
                return self._no(app, _REFUSED[kw.arg])
            if kw.arg not in _OPTIONS:
                return self._no(app, f"unknown pmap argument `{kw.arg}=`")
            given[kw.arg] = kw.value
        for name in ("in_axes", "out_axes"):
            if name in given and not _axes_literal(given[name]):
                return self._no(app, f"`{name}=` is not a literal (ints >= 0, None, tuples, lists, "
                                     "dicts of them); its specs cannot be derived statically")
        in_axes, out_axes = given.get("in_axes"), given.get("out_axes")
        if out_axes is not None and _has_none(out_axes):
            return self._no(app, "`out_axes=` has a None (pmap then returns one device's value as is); "
                                 "`jax.vmap` would have to prove that value unbatched; migrate by hand")
        if isinstance(in_axes, ast.Constant) and in_axes.value is None:
            return self._no(app, "`in_axes=None` maps no argument (pmap raises on it)")
        if isinstance(in_axes, ast.Dict):
            return self._no(app, "`in_axes=` is a dict, not a prefix of the positional arguments")
        argnums = {}
        for name in ("static_broadcasted_argnums", "donate_argnums"):
            if name in given:
                argnums[name] = _argnums_literal(given[name], self.resolver)
                if argnums[name] is None:
                    return self._no(app, f"`{name}=` is not a literal int or tuple of ints >= 0")
        static = argnums.get("static_broadcasted_argnums", ())
        if set(static) & set(argnums.get("donate_argnums", ())):
            return self._no(app, "an argument is both static and donated")
        axis = self._axis(app, given.get("axis_name"))
        if axis is None:
            return None
        options = PmapOptions(axis, None, in_axes, out_axes, tuple(sorted(set(static))),
                              given.get("static_broadcasted_argnums"), given.get("donate_argnums"), partial)
        if static:
            options.arity = self._arity(in_axes, app.mapped)
            if options.arity is None:
                return self._no(app, "static arguments need the mapped function's positional parameters "
                                     "(a def or lambda of this module without defaults or `*args`), or "
                                     "`in_axes=` as a tuple, to place them; migrate by hand")
            if max(static) >= options.arity:
                return self._no(app, "a static argument number is past the positional parameters")
        return options

    def _arity(self, in_axes: ast.expr | None, mapped: ast.AST | None) -> int | None:
        if isinstance(in_axes, (ast.Tuple, ast.List)):
            return len(in_axes.elts)
        if isinstance(mapped, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = mapped.args
            if args.vararg is None and not args.defaults:
                return len(args.posonlyargs) + len(args.args)
        return None

    def _axis(self, app: Application, node: ast.expr | None) -> Axis | None:
        if node is None or isinstance(node, ast.Constant) and node.value is None:
            name = INTERNAL_AXIS if self._names_internal_axis else invented_axis(self.module, READABLE_AXIS)
            return Axis(name, name)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Axis(node.value, node.value, node)
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        # A name bound once, at module level, and nowhere else: the module-level mesh and the site
        # read the same object. Its value may live in another module (`base_layer.AXIS`).
        if isinstance(root, ast.Name) and root.id not in self._inner_names:
            bindings = self.resolver.bindings(root)
            module_level = self.resolver.module_scope.bindings.get(root.id, [])
            if len(bindings) == 1 and bindings[0] in module_level:
                value = bindings[0].value if isinstance(bindings[0], ValueBinding) else None
                if node is root and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return Axis(value.value, value.value, node)
                qualname = self.resolver.qualified_name(node)
                if qualname is not None:
                    return Axis(f"<{qualname}>", None, node)
        return self._no(app, "`axis_name=` is not a string, or a constant bound once at module level; "
                             "the mesh axis cannot be named where the step is built")

    @cached_property
    def _inner_names(self) -> set[str]:
        module_scope = self.resolver.module_scope
        return {name for scope in self.resolver.scopes if scope is not module_scope for name in scope.bindings}

    @cached_property
    def _names_internal_axis(self) -> bool:
        """Whether code may name pmap's internal axis in a collective. The layout a fix wrote for a
        kept pmap (``Mesh(devices, ("_internal_pmap_axis_name",))``, ``P(...)`` of it) does not
        count: it follows the axis, and must not rename it when the pmap is rewritten later."""
        return INTERNAL_AXIS in self.module.text and any(
            n.value == INTERNAL_AXIS and not self._in_layout(n) for n in self.module.of_type(ast.Constant))

    def _in_layout(self, node: ast.AST) -> bool:
        parent = self.module.parent_of(node)
        while parent is not None and not isinstance(parent, ast.Call):
            parent = self.module.parent_of(parent)
        return parent is not None and bool(self.resolver.candidates(parent.func) & _LAYOUTS)

    def _refuse(self, app: Application, reason: str) -> Application:
        app.reason = app.reason or reason
        return app

    def _no(self, app: Application, reason: str) -> None:
        """Refuse, and give the caller its None to return."""
        self._refuse(app, reason)

    def _check_comments(self, app: Application, node: ast.AST, options: PmapOptions | None) -> Application:
        if app.reason is None and self.module.has_comment(node):
            app.reason = "comments inside the pmap call would be lost; migrate by hand"
        if app.reason is None:
            app.options = options
        return app

    # -- calls of the pmapped function ----------------------------------------------------------

    @cached_property
    def _keyword_calls(self) -> dict[str, list[ast.Call]]:
        """Calls that pass keyword arguments, by the called name or attribute."""
        found: dict[str, list[ast.Call]] = {}
        for node in self.module.of_type(ast.Call):
            if node.keywords:
                func = node.func
                key = func.id if isinstance(func, ast.Name) else f".{func.attr}" if isinstance(func, ast.Attribute) else None
                if key:
                    found.setdefault(key, []).append(node)
        return found

    def _check_keyword_calls(self, app: Application) -> None:
        """shard_map takes positional arguments only (pmap maps keyword ones over axis 0)."""
        call = self._keyword_call(app)
        if call is not None:
            app.reason = (f"the pmapped function is called with keyword arguments (line {call.lineno}), "
                          "which `jax.shard_map` does not accept (pmap maps them over axis 0); pass them "
                          "positionally first")

    def _keyword_call(self, app: Application) -> ast.Call | None:
        if app.kind == "decorator":
            func = app.mapped
            for call in self._keyword_calls.get(func.name, ()):
                if any(isinstance(b, OpaqueBinding) and b.node is func for b in self.resolver.bindings(call.func)):
                    return call
            if isinstance(self.parents.get(id(func)), ast.ClassDef):
                return next(iter(self._keyword_calls.get(f".{func.name}", ())), None)
            return None
        parent = self.parents.get(id(app.node))
        if isinstance(parent, ast.Call) and parent.func is app.node:
            return parent if parent.keywords else None
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target] if isinstance(
            parent, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name):
                for call in self._keyword_calls.get(target.id, ()):
                    if any(isinstance(b, ValueBinding) and b.value is app.node
                           for b in self.resolver.bindings(call.func)):
                        return call
            elif isinstance(target, ast.Attribute):  # self.step = jax.pmap(...): any `.step(k=...)`
                found = self._keyword_calls.get(f".{target.attr}")
                if found:
                    return found[0]
        return None

    # -- the module around the applications ------------------------------------------------

    @cached_property
    def multi_process(self) -> str | None:
        """Where the module shows it runs as several processes (the first such name), or None."""
        for node in self.module.of_type(ast.Attribute, ast.Name, ast.alias):
            if isinstance(node, ast.Attribute):
                word = node.attr
            elif isinstance(node, ast.Name):
                word = node.id
            elif isinstance(node, ast.alias):
                word = (node.asname or node.name).rpartition(".")[2]
            else:
                continue
            if word not in _MULTI_PROCESS_WORDS:
                continue
            names = {self._imported(node)} if isinstance(node, ast.alias) else self.resolver.candidates(node)
            for name in sorted(names):
                if name == "jax.process_count" and id(node) in self._refusals:
                    continue
                if name in ("jax.process_index", "jax.process_count") or name.startswith("jax.distributed") \
                        or "multihost_utils" in name or name.endswith("host_local_array_to_global_array"):
                    return f"`{name}` at line {node.lineno}"
        return None

    @cached_property
    def _refusals(self) -> dict[int, ast.AST]:
        """The reads of ``jax.process_count`` that only refuse several processes (``_refuses_processes``),
        by id, each with the function (or the module) it guards."""
        found = {}
        for node in self.module.of_type(ast.Attribute, ast.Name):
            word = node.attr if isinstance(node, ast.Attribute) else node.id
            if word == "process_count" and "jax.process_count" in self.resolver.candidates(node) \
                    and self._refuses_processes(node):
                found[id(node)] = enclosing_scope(self.module, node)
        return found

    def refuses_processes_at(self, node: ast.AST) -> bool:
        """The code around ``node`` runs as one process: its function, one around it, or the
        module's top level refuses several (``if process_count > 1: raise``, brax's ES and ARS)."""
        if not self._refusals:
            return False
        around = ancestors(self.module, node)
        return any(scope in around for scope in self._refusals.values())

    def _refuses_processes(self, node: ast.AST) -> bool:
        """``jax.process_count()`` read only to refuse more than one process (brax's ES and ARS:
        ``if process_count > 1: raise ValueError(...)``, or ``assert jax.process_count() == 1``):
        the module shows it runs as one."""
        call = self.parents.get(id(node))
        if not isinstance(call, ast.Call) or call.func is not node or call.args or call.keywords:
            return False
        holder = self.parents.get(id(call))
        if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
            name = holder.targets[0]
            reads = [n for _, n in self.module.names_at.get(name.id, ()) if isinstance(n.ctx, ast.Load)
                     and any(getattr(b, "value", None) is call for b in self.resolver.bindings(n))]
            if len(self.resolver.bindings(reads[0]) if reads else ()) != 1:
                return False
            return bool(reads) and all(self._guard(read) for read in reads)
        return self._guard(call)

    def _guard(self, count: ast.expr) -> bool:
        """``count > 1`` / ``count != 1`` testing an ``if`` whose body raises, or ``assert count == 1``."""
        compare = self.parents.get(id(count))
        if not isinstance(compare, ast.Compare) or len(compare.ops) != 1:
            return False
        other = compare.comparators[0] if compare.left is count else compare.left
        if not (isinstance(other, ast.Constant) and other.value == 1 and type(other.value) is int):
            return False
        op = compare.ops[0] if compare.left is count else _MIRRORED.get(type(compare.ops[0]), ast.Eq)()
        statement = self.parents.get(id(compare))
        if isinstance(statement, ast.If) and statement.test is compare:
            return isinstance(op, (ast.Gt, ast.NotEq)) and isinstance(statement.body[-1], ast.Raise)
        if isinstance(statement, ast.Assert) and statement.test is compare:
            return isinstance(op, (ast.Eq, ast.LtE))
        return False

    def _imported(self, alias: ast.alias) -> str:
        statement = self.parents.get(id(alias))
        if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            return f"{statement.module}.{alias.name}"
        return alias.name

    def _check_setting(self, apps: list[Application]) -> None:
        """Each rewrite must be right where the module runs it (``_pmap_setting``). A step's outputs
        count as sized by the device count only while that step is rewritten too, so this settles."""
        from jaxmigrate.migrate._pmap_setting import setting_reason

        changed = True
        while changed:
            offered = [a for a in apps if a.exact_reason is None and a.options is not None]
            changed = False
            for app in offered:
                app.setting = setting_reason(self, app, offered)
                changed = changed or app.setting is not None

    def _check_rendering(self, apps: list[Application]) -> None:
        """Render every offered rewrite into a scratch plan: what cannot be spelled here is a reason."""
        from jaxmigrate.migrate._pmap_render import Rewriter

        plan = Plan()
        rewriter = Rewriter(self.module, plan)
        owned = []
        for app in apps:
            if app.exact_reason is None and app.options is not None:
                made = len(plan.edits)
                try:
                    rewriter.render(app)
                except Unprovable as why:
                    app.reason = str(why)
                else:
                    owned.append((id(app), plan.edits[made:]))
        declined = declined_edits(self.module, owned)
        for app in apps:
            app.reason = declined.get(id(app), app.reason)

    def _mark_nested(self, apps: list[Application]) -> None:
        refs = {id(a.ref): a for a in apps}
        # The defs / assignments that hold pmap'd functions, to find calls to them inside a mapped body.
        holders: dict[int, Application] = {}
        for app in apps:
            if app.kind == "decorator" and app.mapped is not None:
                holders[id(app.mapped)] = app
            elif app.kind == "call":
                holders[id(app.node)] = app
        for app in apps:
            # What pmap maps: the def or lambda, and the expression passed (`jax.pmap(jax.pmap(f))`).
            mapped = [app.mapped] if app.mapped is not None else []
            if app.kind == "call" and isinstance(app.node, ast.Call) and app.node.args \
                    and app.node.args[0] is not app.mapped:
                mapped.append(app.node.args[0])
            for node in (n for root in mapped for n in walk(root)):
                inner = refs.get(id(node))
                if inner is None and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    for binding in self.resolver.bindings(node.func):
                        key = id(binding.node) if isinstance(binding, OpaqueBinding) else (
                            id(binding.value) if isinstance(binding, ValueBinding) else None)
                        inner = holders.get(key) or inner
                if inner is not None and inner is not app:
                    app.nested_with.append(inner)
                    inner.nested_with.append(app)
