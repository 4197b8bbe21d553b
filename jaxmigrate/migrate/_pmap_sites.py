"""Where a module applies ``jax.pmap``, with which options, and whether the exact rewrite applies.

Decisions are made on the ``ast`` with the package's one resolver (never by a name match: a
local ``def pmap`` is not jax's); the LibCST side only splices the replacement texts planned here.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass, field

from jaxmigrate.names import LOCAL, ImportBinding, NameResolver, OpaqueBinding, Target, ValueBinding

PMAP = "jax.pmap"
HELPER = "_shard_map_like_pmap"

# pmap's keyword-only options, and where each goes in the rewrite.
_TO_HELPER = ("axis_name", "in_axes", "out_axes")
_TO_JIT = {"static_broadcasted_argnums": "static_argnums", "donate_argnums": "donate_argnums"}
_REFUSED = {
    "devices": "`devices=` picks a device subset the generated mesh (the first n devices, as pmap "
    "picks them without `devices=`) would not reproduce",
    "backend": "`backend=` selects a platform the generated mesh does not model",
    "axis_size": "`axis_size=` (without `devices=`) is not translated; remove it or migrate by hand",
}

Span = tuple[int, int, int, int]  # start line, start column, end line, end column (0-based characters)


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
    decorators: tuple[str, ...] = ()  # decorator kind: the replacement decorators
    replacement: str = ""  # call kind: the replacement expression
    nested_with: list["Application"] = field(default_factory=list)


class _Source:
    """ast positions (1-based lines, UTF-8 byte columns) to 0-based character columns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True) or [""]

    def column(self, line: int, byte_col: int) -> int:
        text = self.lines[line - 1]
        return byte_col if text.isascii() else len(text.encode("utf-8")[:byte_col].decode("utf-8"))

    def span(self, node: ast.AST) -> Span:
        return (node.lineno, self.column(node.lineno, node.col_offset),
                node.end_lineno, self.column(node.end_lineno, node.end_col_offset))

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def indent(self, line: int) -> str:
        text = self.lines[line - 1]
        return text[: len(text) - len(text.lstrip(" \t"))]


def _has_comment(code: str) -> bool:
    try:
        return any(tok.type == tokenize.COMMENT for tok in tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return True


def _axes_literal(node: ast.expr) -> bool:
    """An int >= 0, None, or a tuple / list / dict (constant keys) of them: what pmap accepts."""
    if isinstance(node, ast.Constant):
        return node.value is None or (type(node.value) is int and node.value >= 0)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_axes_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(isinstance(k, ast.Constant) for k in node.keys) and all(map(_axes_literal, node.values))
    return False


def _argnums_literal(node: ast.expr) -> tuple[int, ...] | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    values = (value,) if type(value) is int else value
    if isinstance(values, (tuple, list)) and all(type(v) is int and v >= 0 for v in values):
        return tuple(values)
    return None


class Planner:
    """Finds every pmap application of one module and plans its rewrite (or says why not)."""

    def __init__(self, text: str, tree: ast.Module) -> None:
        self.source = _Source(text)
        self.tree = tree
        self.resolver = NameResolver(tree)
        self.parents: dict[int, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent
        self.module_alias, self.needs_jax_import = self._module_jax_alias()
        self.functools_alias = self._module_alias_of("functools")
        self.helper_state = self._helper_state()

    # -- discovery ----------------------------------------------------------------------

    def applications(self) -> list[Application]:
        apps = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
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
        return apps

    def _app(self, ref: ast.expr) -> Application:
        line, column, _, _ = self.source.span(ref)
        return Application(ref, line, column + 1)

    def _classify(self, ref: ast.expr, targets: tuple[Target, ...]) -> Application | None:
        parent = self.parents.get(id(ref))
        app = self._app(ref)
        if len(targets) > 1 or targets[0].name == LOCAL:
            names = ", ".join(sorted("a local binding" if t.name == LOCAL else t.name for t in targets))
            app.reason = f"`{self.source.segment(ref)}` may be {names}; not rewritten on a guess"
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
        app.kind, app.node, app.span = "call", call, self.source.span(call)
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
        options = self._options(app, keywords, axis_name=extra[0] if extra else None)
        if options is None:
            return app
        helper, jit = self._render_options(options)
        helper_call = f"{HELPER}({', '.join([self.source.segment(fun), *helper])})"
        jit_alias = self._jit_alias(app)
        if app.reason is not None or jit_alias is None:
            return app
        args = [helper_call, *jit]
        if call.lineno != call.end_lineno:
            indent = self.source.indent(call.lineno)
            inner = "".join(f"{indent}    {a},\n" for a in args)
            app.replacement = f"{jit_alias}.jit(\n{inner}{indent})"
        else:
            app.replacement = f"{jit_alias}.jit({', '.join(args)})"
        return self._check_comments(app, call)

    def _plan_decorator(self, app, decorator: ast.expr, func, partial: ast.Call | None) -> Application:
        app.kind, app.node, app.span = "decorator", decorator, self.source.span(decorator)
        app.mapped = func
        if partial is not None and len(partial.args) > 1:
            return self._refuse(app, "`partial(jax.pmap, ...)` binds positional arguments")
        options = self._options(app, partial.keywords if partial is not None else [], axis_name=None)
        if options is None:
            return app
        helper, jit = self._render_options(options)
        jit_alias = self._jit_alias(app)
        if app.reason is not None or jit_alias is None:
            return app
        wrap = self.source.segment(partial.func) if partial is not None else None
        first = f"{wrap}({jit_alias}.jit, {', '.join(jit)})" if jit else f"{jit_alias}.jit"
        second = f"{wrap}({HELPER}, {', '.join(helper)})" if helper else HELPER
        app.decorators = (first, second)
        return self._check_comments(app, decorator)

    def _options(self, app: Application, keywords: list[ast.keyword], axis_name: ast.expr | None):
        options: dict[str, ast.expr] = {}
        if axis_name is not None:
            options["axis_name"] = axis_name
        for kw in keywords:
            if kw.arg is None:
                return self._no_options(app, "pmap called with `**kwargs`; its options cannot be read statically")
            if kw.arg in _REFUSED:
                return self._no_options(app, _REFUSED[kw.arg])
            if kw.arg not in (*_TO_HELPER, *_TO_JIT):
                return self._no_options(app, f"unknown pmap argument `{kw.arg}=`")
            options[kw.arg] = kw.value
        for name in ("in_axes", "out_axes"):
            if name in options and not _axes_literal(options[name]):
                return self._no_options(app, f"`{name}=` is not a literal (ints >= 0, None, tuples, lists, "
                                         "dicts of them); its specs cannot be derived statically")
        argnums = {}
        for name in _TO_JIT:
            if name in options:
                argnums[name] = _argnums_literal(options[name])
                if argnums[name] is None:
                    return self._no_options(app, f"`{name}=` is not a literal int or tuple of ints >= 0")
        if set(argnums.get("static_broadcasted_argnums", ())) & set(argnums.get("donate_argnums", ())):
            return self._no_options(app, "an argument is both static and donated")
        options["_static"] = argnums.get("static_broadcasted_argnums", ())  # type: ignore[assignment]
        return options

    def _render_options(self, options) -> tuple[list[str], list[str]]:
        helper = [f"{name}={self.source.segment(options[name])}" for name in _TO_HELPER if name in options]
        static = options["_static"]
        if static:
            helper.append(f"static_argnums=({', '.join(map(str, static))},)" if len(static) == 1
                          else f"static_argnums=({', '.join(map(str, static))})")
        jit = [f"{new}={self.source.segment(options[old])}" for old, new in _TO_JIT.items() if old in options]
        return helper, jit

    def _refuse(self, app: Application, reason: str) -> Application:
        app.reason = app.reason or reason
        return app

    def _no_options(self, app: Application, reason: str) -> None:
        self._refuse(app, reason)
        return None

    def _check_comments(self, app: Application, node: ast.AST) -> Application:
        if app.reason is None and _has_comment(self.source.segment(node)):
            app.reason = "comments inside the pmap call would be lost; migrate by hand"
        return app

    # -- aliases, helper, nesting ---------------------------------------------------------

    def _jit_alias(self, app: Application) -> str | None:
        if self.helper_state is not None:
            app.reason = app.reason or self.helper_state
            return None
        ref = app.ref
        if isinstance(ref, ast.Attribute) and self.resolver.qualified_name(ref.value) == "jax":
            return self.source.segment(ref.value)  # the alias the user wrote at this very place
        alias = self.module_alias
        shadowed = any(alias in scope.bindings for scope in self.resolver.scopes if scope is not self.resolver.module_scope)
        if alias is None or shadowed:
            app.reason = app.reason or f"no unambiguous module-level name for jax (`{alias}` is rebound in a function)"
            return None
        return alias

    def _module_alias_of(self, module: str) -> str | None:
        """A module-level name bound only to ``module`` (its own name preferred), if any."""
        bindings = self.resolver.module_scope.bindings
        aliases = [name for name, bound in bindings.items()
                   if all(isinstance(b, ImportBinding) and b.qualname == module for b in bound)]
        return module if module in aliases else next(iter(aliases), None)

    def _module_jax_alias(self) -> tuple[str | None, bool]:
        """The module's name for jax; else ``jax``, to be imported, unless ``jax`` names something
        else here (then None: no rewrite)."""
        alias = self._module_alias_of("jax")
        if alias is not None:
            return alias, False
        if "jax" in self.resolver.module_scope.bindings:
            return None, False
        return "jax", True

    def _helper_state(self) -> str | None:
        """None when the helper can be added or reused; else why the rewrite cannot use it."""
        if self.module_alias is None:
            return "`jax` is bound to something other than the jax module here"
        bound = self.resolver.module_scope.bindings.get(HELPER)
        if not bound:
            return None
        from jaxmigrate.migrate._pmap_helper import helper_source  # imports this module

        for binding in bound:
            node = binding.node if isinstance(binding, OpaqueBinding) else None
            if not isinstance(node, ast.FunctionDef):
                return f"`{HELPER}` is already bound here, and not to the generated helper"
            lines = self.source.segment(node).splitlines()
            indent = self.source.indent(node.lineno + 1) if len(lines) > 1 else "    "
            expected = helper_source(self.module_alias, self.functools_alias or "functools", "\n", indent)
            if lines != expected.strip().splitlines():
                return f"`{HELPER}` is already defined here, and not as the generated helper"
        return None

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
            if app.mapped is None:
                continue
            for node in ast.walk(app.mapped):
                inner = refs.get(id(node))
                if inner is None and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    for binding in self.resolver.bindings(node.func):
                        key = id(binding.node) if isinstance(binding, OpaqueBinding) else (
                            id(binding.value) if isinstance(binding, ValueBinding) else None)
                        inner = holders.get(key) or inner
                if inner is not None and inner is not app:
                    app.nested_with.append(inner)
                    inner.nested_with.append(app)
