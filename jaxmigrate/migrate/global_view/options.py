"""How a pmap is applied, read for the global view: its options, the function it maps.

Read here rather than taken from the exact path's reading (``_pmap_sites``), whose refusals (a
``devices=`` the exact rewrite cannot place, a ``fun=`` keyword) need not bar the global view.
Each failure is a ``Blocked`` with the line.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import ancestors, enclosing_scope, loop_between, reads_of
from jaxmigrate.core.module import is_main_guard
from jaxmigrate.migrate._pmap_sites import PMAP, Application, planner_of
from jaxmigrate.migrate.global_view.commented_call import LOST
from jaxmigrate.migrate.global_view.kinds import Blocked
from jaxmigrate.migrate.global_view.one_mesh import initializes_jax
from jaxmigrate.lint.patterns import single_value
from jaxmigrate.names import OpaqueBinding, ValueBinding


def read_options(module, app: Application) -> tuple[dict[str, ast.expr], ast.expr | None]:
    """pmap's options by name, and (call form) the function it maps, however they are passed:
    by keyword, ``axis_name`` second positionally, ``fun=``, through ``partial(jax.pmap, ...)``."""
    if app.kind == "value" or app.node is None:
        raise Blocked(app.line, app.reason or "jax.pmap used as a value; only calls and decorators are followed")
    targets = module.names.resolve(app.ref)
    if len(targets) != 1 or targets[0].name != PMAP or targets[0].partials:
        raise Blocked(app.line, app.reason or f"`{module.segment(app.ref)}` may not be jax.pmap")
    if app.nested_with:
        raise Blocked(app.line, f"nested pmap (with the pmap at line {app.nested_with[0].line})")
    node = app.node
    if module.has_comment(node) and not commented_call_kept(node):
        raise Blocked(app.line, LOST)
    if app.kind == "decorator":  # @jax.pmap or @partial(jax.pmap, ...)
        partial = node if isinstance(node, ast.Call) else None
    else:  # jax.pmap(f, ...) or partial(jax.pmap, ...)(f)
        partial = node.func if isinstance(node.func, ast.Call) else None
    keywords, positional = [], []
    if partial is not None:
        if len(partial.args) != 1 or partial.args[0] is not app.ref:
            raise Blocked(app.line, "`partial(jax.pmap, ...)` binds positional arguments")
        keywords += partial.keywords
    if app.kind == "call":
        keywords += node.keywords
        positional = list(node.args)
    options: dict[str, ast.expr] = {}
    for kw in keywords:
        if kw.arg is None:
            raise Blocked(app.line, "pmap called with `**kwargs`; its options cannot be read")
        if kw.arg in options:
            raise Blocked(app.line, f"pmap's `{kw.arg}=` is given twice")
        options[kw.arg] = kw.value
    if any(isinstance(a, ast.Starred) for a in positional):
        raise Blocked(app.line, "pmap called with `*args`; its options cannot be read")
    if len(positional) > 2:
        raise Blocked(app.line, "pmap called with more than two positional arguments")
    fun = options.pop("fun", None)
    for option, value in zip(("fun", "axis_name"), positional):
        if option == "fun" and fun is None:
            fun = value
        elif option == "axis_name" and option not in options:
            options[option] = value
        else:
            raise Blocked(app.line, f"pmap's `{option}` is given twice")
    if app.kind == "call" and fun is None:
        raise Blocked(app.line, "pmap called without the function to map")
    return options, fun


def commented_call_kept(node: ast.AST) -> bool:
    """``jax.pmap(f, ...)`` with the function first: with comments inside, it is edited in place
    (the callee, the options jit does not take), and its comments stay where they are."""
    return isinstance(node, ast.Call) and not isinstance(node.func, ast.Call) and bool(node.args) \
        and not any(k.arg == "fun" for k in node.keywords)


def every_device(module, value: ast.expr, line: int) -> bool:
    """``devices=jax.devices()``, or ``jax.local_devices()`` in a module run as one process:
    every device pmap maps over anyway, as the mesh does. (With several processes pmap wants
    the same list in each; each process's own devices would map over those alone.) Either may be
    bound once to a name first (``global_devices = jax.devices()``: ``_device_list``)."""
    if isinstance(value, ast.Name):
        value = _device_list(module, value)
    if not (isinstance(value, ast.Call) and not value.args and not value.keywords):
        return False
    qualified = module.names.qualified_name(value.func)
    if qualified == "jax.devices":
        return True
    if qualified != "jax.local_devices":
        return False
    multi = planner_of(module).multi_process
    if multi:
        raise Blocked(line, f"`devices=jax.local_devices()` in a module run as several processes ({multi}): "
                      "pmap maps over this process's devices alone, the global view over all")
    return True


def _device_list(module, name: ast.Name) -> ast.expr | None:
    """What a name given as pmap's ``devices=`` is bound to, once, in a function or a script's
    ``__main__`` block (never at import, which may come before a launcher's
    ``jax.distributed.initialize()``): the list as it was there. In a module run as several
    processes, only below that scope's own ``jax.distributed.initialize()``: above it, it is this
    process's devices alone."""
    value = single_value(module.names, name)
    scope = enclosing_scope(module, value) if value is not None else None
    if isinstance(scope, ast.Module):
        scope = module.top_level(value)
        if not is_main_guard(scope):
            return None
    elif not isinstance(scope, ast.FunctionDef):
        return None
    if planner_of(module).multi_process and not initializes_jax(module, scope, before=value.lineno):
        return None
    return value


def def_of(module, name: ast.Name, call: ast.Call) -> ast.FunctionDef | None:
    """The def ``name`` (pmap's function) is: its one binding, or, for ``f = jax.pmap(f, ...)``
    (the step rebinding its own def's name, as brax's trainers write it), the def bound above --
    which a binding in the other branch of an ``if`` around the pmap does not change
    (``if is_replicated: f = jax.pmap(f, ...)`` / ``else: f = jax.jit(f)``)."""
    bindings = module.names.bindings(name)
    defs = [b.node for b in bindings if isinstance(b, OpaqueBinding) and isinstance(b.node, ast.FunctionDef)]
    rebinding = [b for b in bindings if isinstance(b, ValueBinding) and b.value is call]
    elsewhere = [b for b in bindings if isinstance(b, ValueBinding) and branches_apart(module, b.value, call)]
    if len(defs) == 1 and len(bindings) == len(defs) + len(rebinding) + len(elsewhere) \
            and defs[0].lineno < call.lineno:
        return defs[0]
    return None


def branches_apart(module, node: ast.AST, other: ast.AST) -> ast.If | None:
    """The ``if``, run once (no loop around it in its function), whose two branches hold ``node``
    and ``other``: where one runs, the other does not. None where there is none."""
    around_other = ancestors(module, other)
    child = node
    for around in ancestors(module, node):
        if isinstance(around, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
            return None
        if isinstance(around, ast.If) and around in around_other:
            other_child = next(c for c in [other, *around_other] if module.parent_of(c) is around)
            apart = (child in around.body) != (other_child in around.body) and child is not around.test \
                and other_child is not around.test
            return around if apart and loop_between(module, around, enclosing_scope(module, around)) is None else None
        child = around
    return None


def made_def_of(module, name: ast.Name | ast.Call, line: int) -> tuple[ast.FunctionDef, ast.FunctionDef] | None:
    """The def a function of the module makes and returns, when pmap's function is that call
    (``jax.pmap(make_train_step(optimizer), ...)``) or the name bound to it (research code's
    ``train_step = make_train_step(optimizer)`` before ``jax.pmap(train_step, ...)``): that def,
    nested in its maker and returned by name from the maker's one ``return``, and the maker. The
    def's collectives are rewritten where it is, so the maker must make it for this pmap alone:
    called once, its result read by this pmap only."""
    if isinstance(name, ast.Call):
        made = name
    else:
        bindings = module.names.bindings(name)
        if len(bindings) != 1 or not isinstance(bindings[0], ValueBinding):
            return None
        made = bindings[0].value
    if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Name)):
        return None
    makers = module.names.bindings(made.func)
    if len(makers) != 1 or not isinstance(makers[0], OpaqueBinding) or not isinstance(makers[0].node, ast.FunctionDef):
        return None
    maker = makers[0].node
    last = maker.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)):
        return None
    returned = module.names.bindings(last.value)
    if not (len(returned) == 1 and isinstance(returned[0], OpaqueBinding)
            and isinstance(returned[0].node, ast.FunctionDef) and module.parent_of(returned[0].node) is maker):
        return None
    func = returned[0].node
    if factory_of(module, last.value) is None:  # (one `return`: it blocks, naming the others)
        return None
    if func.decorator_list:
        raise Blocked(func.lineno, f"`{func.name}`, which `{maker.name}` makes for the pmap at line {line}, "
                      "is decorated: what the pmap runs is not its body")
    calls = reads_of(module, maker.name, maker)
    if calls != [made.func]:
        other = next(node for node in calls if node is not made.func)
        raise Blocked(other.lineno, f"`{maker.name}` makes the step pmapped at line {line} and is used here too, "
                      "where the step would lose its collectives")
    uses = reads_of(module, name.id, made) if isinstance(name, ast.Name) else [name]
    if uses != [name]:
        other = next(node for node in uses if node is not name)
        raise Blocked(other.lineno, f"`{name.id}`, the step `{maker.name}` makes for the pmap at line {line}, is "
                      "used here too, where it would lose its collectives")
    return func, maker


def partial_of(module, node: ast.expr, line: int):
    """``functools.partial(f, value, ..., name=value, ...)``: f's def, the names of the parameters
    bound and how many of them lead, bound by position (``partial(train_step, optimizer)``); also
    through a name bound once to such a partial (``f = partial(is_replicated, axis_name="i")``).
    Pmap and jit alike close over what a partial binds: the same value on every device."""
    if isinstance(node, ast.Name):
        bindings = module.names.bindings(node)
        if len(bindings) == 1 and isinstance(bindings[0], ValueBinding) and isinstance(bindings[0].value, ast.Call):
            return partial_of(module, bindings[0].value, line)
    if not (isinstance(node, ast.Call) and module.names.qualified_name(node.func) == "functools.partial"
            and node.args and isinstance(node.args[0], ast.Name)
            and not any(isinstance(a, ast.Starred) for a in node.args) and all(kw.arg for kw in node.keywords)):
        what = ""
        if isinstance(node, ast.Attribute):  # `jax.pmap(env.reset)`, `jax.pmap(self._update)`
            what = f" (`{module.segment(node)}`, a method or attribute: the body run is not known here)"
        elif isinstance(node, ast.Name):
            what = f" (`{node.id}` is not bound once, to a `def`, above the pmap)"
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Attribute):
            what = (f" (a `partial` of `{module.segment(node.args[0])}`, a function of another module or object: "
                    "its collectives cannot be rewritten here)")
        raise Blocked(line, f"the pmapped function is not a `def` or a `partial` of one, of this module{what}")
    defs = [b.node for b in module.names.bindings(node.args[0]) if isinstance(b, OpaqueBinding)]
    if len(defs) != 1 or len(module.names.bindings(node.args[0])) != 1:
        raise Blocked(line, "the pmapped function is not a `def` of this module")
    func, leading = defs[0], node.args[1:]
    if leading and (func.args.posonlyargs or len(leading) > len(func.args.args)):
        raise Blocked(line, f"`partial(...)` binds {len(leading)} arguments of `{func.name}` by position, "
                      "not its leading parameters")
    bound = {a.arg: value for a, value in zip(func.args.args, leading)}
    for keyword in node.keywords:
        if keyword.arg in bound:
            raise Blocked(line, f"`partial(...)` binds `{keyword.arg}` twice")
        bound[keyword.arg] = keyword.value
    return func, bound, len(leading)


def factory_of(module, made: ast.AST) -> ast.FunctionDef | None:
    """The function that builds the step and returns it, when ``made`` (the pmap call, or the name
    of a pmapped def nested in that function) is what its one ``return`` returns::

        def make_update(lr):
            def update(params, batch): ...
            return jax.pmap(update, axis_name="batch")

    Its callers bind the step to a name (``p_update = make_update(0.1)``) and call that."""
    ret = module.parent_of(made)
    function = module.parent_of(ret) if isinstance(ret, ast.Return) else None
    if not isinstance(function, ast.FunctionDef) or not function.body or function.body[-1] is not ret:
        return None
    pending, returns = list(function.body), []
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            returns.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    if returns != [ret]:
        raise Blocked(returns[0].lineno if returns[0] is not ret else returns[-1].lineno,
                      f"`{function.name}` returns the pmapped step at line {ret.lineno} and something else here")
    if function.decorator_list or function.args.vararg or function.args.kwarg:
        raise Blocked(function.lineno, f"`{function.name}`, which returns the pmapped step, is decorated or "
                      "takes *args / **kwargs")
    return function


def returned_def(module, func: ast.FunctionDef) -> tuple[ast.FunctionDef, ast.Name] | None:
    """A pmapped def nested in a function whose one ``return`` returns it by name: that function
    (``factory_of``) and the returned name."""
    function = module.parent_of(func)
    if not isinstance(function, ast.FunctionDef) or not function.body:
        return None
    last = function.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == func.name):
        return None
    bindings = module.names.bindings(last.value)
    if not (len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) and bindings[0].node is func):
        return None
    factory = factory_of(module, last.value)
    return (factory, last.value) if factory is not None else None
