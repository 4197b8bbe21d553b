"""Whether the exact pmap rewrite is right where the pmap runs, or the reason it is not.

``jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh, ...))`` needs a mesh when the step is built, and
over that mesh it means what pmap meant only in a narrower setting than pmap ran in. JAX 0.10's
pmap (``jax/_src/pmap.py``) still runs, so where the module does not show that setting the code
stays and the finding says why. The rewrite is right when:

* **nothing runs at import**: the pmap is applied inside a function, so the mesh is built there.
  A mesh at module level starts JAX's backend when the module is imported, and a launcher that
  imports it before ``jax.distributed.initialize()`` then fails;
* **the step is built once**: that function is the program's driver (called by the module's
  ``if __name__ == "__main__":`` block or handed to ``app.run``) and the pmap is not inside a loop.
  pmap caches its compiled step by function, so building it again compiled nothing; a new
  ``jax.jit`` object compiles again;
* **over the device count pmap took from the data**: pmap maps over ``jax.devices()[:n]``, n the
  length of the mapped axis; the mesh spans every device. Each call of the step in that function
  passes values whose mapped axis is shown to be the device count (made by ``replicate``,
  ``shard``, a reshape or ``broadcast_to`` (leaf by leaf in a ``jax.tree.map``) to the device count,
  ``device_put_replicated`` to every device, a split of a key into one per device, or the step's
  own outputs; tuples and lists of them);
* **in one process**: with several, pmap takes and returns each process's own slices and makes
  them global itself; ``jax.jit`` takes global arrays.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from jaxmigrate.core.flow import ancestors, child_of, loop_between
from jaxmigrate.core.module import is_main_guard
from jaxmigrate.lint.patterns import BROADCASTS, TREE_MAPS
from jaxmigrate.migrate.global_view.shapes import _head_and_tail, split_count
from jaxmigrate.names import ValueBinding

if TYPE_CHECKING:
    from jaxmigrate.migrate._pmap_sites import Application, Planner

AT_IMPORT = ("the exact rewrite needs a mesh where the step is built, here at import: building one there starts "
             "JAX's backend, and a launcher that imports this module before `jax.distributed.initialize()` "
             "then fails; JAX 0.10 still runs `jax.pmap` (the global view is the migration)")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)
_DEVICE_COUNTS = frozenset({"jax.local_device_count", "jax.device_count"})
_ALL_DEVICES = frozenset({"jax.local_devices", "jax.devices"})
_SIZED_BY_ARGUMENT = frozenset({"flax.jax_utils.replicate", "flax.training.common_utils.shard",
                                "flax.training.common_utils.shard_prng_key"})
_APP_RUN = frozenset({"absl.app.run", "fire.Fire"})
_RESHAPES = frozenset({"jax.numpy.reshape", "numpy.reshape"})
_FILLED = frozenset(f"{module}.{name}" for module in ("jax.numpy", "numpy")
                    for name in ("zeros", "ones", "empty", "full"))


def setting_reason(planner: Planner, app: Application, apps: list[Application]) -> str | None:
    """Why the exact rewrite of ``app`` is not right in the setting the module shows, or None."""
    if planner.multi_process:
        return (f"this module runs as several processes ({planner.multi_process}): pmap takes and returns "
                "each process's own slices and makes them global itself, `jax.jit` over a mesh takes global "
                "arrays; the exact rewrite is right in one process only")
    module = planner.module
    # A decorator is applied where its def stands, so the search starts at the def.
    built_at = app.mapped if app.kind == "decorator" else app.node
    function = _innermost_function(module, built_at)
    if function is None:
        return AT_IMPORT
    # pmap compiles once per function it maps: a function made anew where the step is built (a
    # nested def, a lambda, a partial) was compiled again on every pass by pmap too, so the new
    # step's compiling on every pass costs nothing pmap did not (measured: tests/runtime).
    inside = loop_between(module, app.node, function, _LOOPS)
    if inside is not None and not _made_in(module, app, inside):
        return (f"pmap is applied inside a loop or lambda (line {inside.lineno}): each pass would build and "
                "compile a new `jax.jit` step, where pmap's cache compiled it once")
    if not _made_in(module, app, function):
        driver = _enclosing_function(module, built_at)
        if driver is None:
            # A method, or a function nested in one: what calls it, and how often, is not in sight.
            return (f"the step is built in `{function.name}` (line {function.lineno}), a method or nested "
                    "function, not a module-level driver shown to run once (a call from `if __name__ == "
                    "\"__main__\":` or `app.run`): each call would compile the step again, where pmap's cache "
                    "compiled it once")
        if not _driven_once(planner, driver):
            return (f"the step is built in `{driver.name}`, which is not shown to run once (only a call from "
                    "`if __name__ == \"__main__\":` or `app.run` shows it): each call would compile the step "
                    "again, where pmap's cache compiled it once")
    axis = _DeviceAxis(planner, function, apps)
    reason = axis.reason(app)
    app.mesh_devices = axis.named_count(app) if reason is None else None
    return reason


def _made_in(module, app: Application, scope: ast.AST) -> bool:
    """Whether the function ``app`` maps is made anew each time ``scope`` runs: a def or lambda
    inside it, or a call (``partial(f, ...)``) at the pmap itself."""
    mapped = app.mapped
    if mapped is None and app.kind == "call" and isinstance(app.node, ast.Call):
        first = app.node.args[0] if app.node.args else next(
            (k.value for k in app.node.keywords if k.arg == "fun"), None)
        mapped = first if isinstance(first, ast.Call) else None
    return mapped is not None and mapped is not scope and _within(module, mapped, scope)


def _within(module, node: ast.AST, scope: ast.AST) -> bool:
    return any(around is scope for around in ancestors(module, node))


def users_jit(module, node: ast.expr) -> ast.Call | None:
    """The ``jax.jit(node)`` (no other argument) that compiles ``node``, or None."""
    parent = module.parent_of(node)
    if isinstance(parent, ast.Call) and parent.args == [node] and not parent.keywords \
            and module.names.qualified_name(parent.func) == "jax.jit":
        return parent
    return None


def _enclosing_function(module, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The module-level function ``node`` is directly in (not in a class or a nested function)."""
    scope = next((a for a in ancestors(module, node) if isinstance(a, (*_FUNCTIONS, ast.ClassDef, ast.Module))), None)
    return scope if isinstance(scope, _FUNCTIONS) and isinstance(module.parent_of(scope), ast.Module) else None


def _innermost_function(module, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next((a for a in ancestors(module, node) if isinstance(a, _FUNCTIONS)), None)


def _driven_once(planner: Planner, driver: ast.FunctionDef) -> bool:
    """The one use of the driver's name is a call (or ``app.run(driver)``) in the module's
    ``if __name__ == "__main__":`` block, outside any loop. (Run twice, the driver would build and
    compile a new `jax.jit` step each time, where pmap's cache compiled it once.)"""
    module = planner.module
    uses = [n for _, n in module.names_at.get(driver.name, ()) if isinstance(n.ctx, ast.Load)
            and any(getattr(b, "node", None) is driver for b in module.names.bindings(n))]
    if len(uses) != 1:
        return False
    for use in uses:
        block = _main_block(module, use)
        if block is None or loop_between(module, use, block, _LOOPS) is not None:
            return False
        parent = module.parent_of(use)
        called = isinstance(parent, ast.Call) and parent.func is use
        run = isinstance(parent, ast.Call) and use in parent.args and \
            module.names.candidates(parent.func) <= _APP_RUN and module.names.candidates(parent.func)
        if not (called or run):
            return False
    return True


def _main_block(module, node: ast.AST) -> ast.If | None:
    top = module.top_level(node)
    return top if is_main_guard(top) else None


class _DeviceAxis:
    """Which values of the driver (and of the functions nested in it, which call the step as a
    closure) are shown to have the device count as their leading axis.

    The count is every local device (``jax.local_device_count()``), or one name of the driver bound
    before the step is built and never after (brax's ``local_devices_to_use``, at most the device
    count): pmap then ran on that many devices, and the rewrite's mesh holds the first that many
    (``named_count``). Every mapped value of every call must show the same count."""

    def __init__(self, planner: Planner, driver: ast.FunctionDef, apps: list[Application]) -> None:
        self.apps = apps
        self.module = planner.module
        self.names = planner.module.names
        self.driver = driver
        self._count: tuple | None = None  # the count the mapped values showed so far

    def named_count(self, app: Application) -> str | None:
        """The driver's name of the count the step maps over, when it is not every device."""
        if self._count is None or self._count[0] != "name":
            return None
        return self._count[1]

    def reason(self, app: Application) -> str | None:
        self._count = None
        self._built_at = self._statement_index(app.mapped if app.kind == "decorator" else app.node, self.driver)
        calls = self._calls(app)
        if isinstance(calls, str):
            return calls
        axis_of = _mapped_positions(app)
        for call in calls:
            if any(isinstance(a, ast.Starred) for a in call.args) or call.keywords:
                return f"the step is called with `*args` or keywords (line {call.lineno}); its mapped sizes cannot be read"
            for position, arg in enumerate(call.args):
                axis = axis_of(position)
                if axis == -1:
                    return (f"argument {position + 1} of the call at line {call.lineno} is mapped on an axis "
                            "other than its first, or by a tree of axes; its size is not followed")
                if axis == 0 and not self.sized(arg, set()):
                    return (f"argument {position + 1} of the call at line {call.lineno} "
                            f"(`{self.module.segment(arg)}`) is not shown to have the device count as its "
                            "mapped axis: pmap maps over as many devices as that axis is long, the rewrite "
                            "over every device")
        return None

    def _calls(self, app: Application) -> list[ast.Call] | str:
        """The calls of the step ``app`` makes, all in the driver; a reason when it escapes."""
        step = app.node
        if app.kind == "call" and (jit := users_jit(self.module, step)) is not None:
            step = jit  # `jax.jit(jax.pmap(f))`: the jit is the step
        parent = self.module.parent_of(step)
        if app.kind == "call" and isinstance(parent, ast.Call) and parent.func is step:
            return [parent]
        if app.kind == "call" and isinstance(parent, ast.Assign) and len(parent.targets) == 1 \
                and isinstance(parent.targets[0], ast.Name):
            name, bound = parent.targets[0].id, lambda b: isinstance(b, ValueBinding) and b.value is step
        elif app.kind == "decorator" and isinstance(app.mapped, _FUNCTIONS):
            name, bound = app.mapped.name, lambda b: getattr(b, "node", None) is app.mapped
        else:
            return "the step is used other than by direct calls in the function that builds it"
        calls = []
        for _, use in self.module.names_at.get(name, ()):
            if not isinstance(use.ctx, ast.Load) or not any(bound(b) for b in self.names.bindings(use)):
                continue
            parent = self.module.parent_of(use)
            if not (isinstance(parent, ast.Call) and parent.func is use):
                return (f"the step is used other than by a direct call (line {use.lineno}); the sizes it is "
                        "called with cannot be followed")
            calls.append(parent)
        return calls or "the step is never called where it is built"

    def sized(self, node: ast.expr, seen: set[int]) -> bool:
        """``node`` has the device count as its leading axis."""
        if isinstance(node, ast.Name):
            bindings = self._reaching(node)
            if id(node) in seen or not bindings:
                return False
            seen.add(id(node))
            return all(self._binding_sized(binding, seen) for binding in bindings)
        if isinstance(node, (ast.Tuple, ast.List)):  # a tree mapped on axis 0: each of its leaves
            return bool(node.elts) and all(self.sized(element, seen) for element in node.elts)
        if not isinstance(node, ast.Call):
            return False
        if self._is_step_call(node):
            return True
        qualified = self.names.qualified_name(node.func)
        if qualified in _SIZED_BY_ARGUMENT and len(node.args) == 1 and not node.keywords:
            return True
        if qualified == "jax.device_put_replicated" and len(node.args) == 2 and not node.keywords:
            return self._all_devices(node.args[1])
        if qualified == "jax.random.split" and split_count(node) is not None:
            return self.device_count(split_count(node))
        if qualified == "jax.device_put" and node.args:  # placed as it is (the tool's own replicate): the axis stays
            return self.sized(node.args[0], seen)
        if qualified in _RESHAPES and len(node.args) == 2:  # jnp.reshape(x, (n, -1) + x.shape[1:])
            return self._leading_device_count(node.args[1])
        if isinstance(node.func, ast.Attribute) and node.func.attr == "reshape" and node.args:
            shape = node.args[0] if len(node.args) == 1 else ast.Tuple(elts=list(node.args), ctx=ast.Load())
            return self._leading_device_count(shape)
        if qualified in BROADCASTS and len(node.args) == 2 and not node.keywords:
            return self._leading_device_count(node.args[1])  # jnp.broadcast_to(p, (n, *p.shape))
        if qualified in _FILLED and node.args:  # jnp.zeros((n, batch)), jnp.full((n,), 0.5)
            return self._leading_device_count(node.args[0])
        # jax.tree.map(lambda p: jnp.broadcast_to(p, (n, *p.shape)), params): every leaf made so.
        if qualified in TREE_MAPS and len(node.args) >= 2 and not node.keywords \
                and isinstance(node.args[0], ast.Lambda):
            return self.sized(node.args[0].body, seen)
        return False

    def _leading_device_count(self, shape: ast.expr) -> bool:
        head = _head_and_tail(shape)
        first = head[0][:1] if head is not None else shape.elts[:1] if isinstance(shape, (ast.Tuple, ast.List)) else []
        return bool(first) and self.device_count(first[0])

    def _reaching(self, use: ast.Name) -> list:
        """The bindings of ``use`` that may reach it: a binding is left out when an assignment of
        the name in a statement of the body of the use's function, run unconditionally, comes
        between it and the statement of the use (``params = replicate(params)`` hides the
        unreplicated ``params``). A name of an enclosing function (a closure) may hold any of its
        values when the nested function runs."""
        bindings = self.names.bindings(use)
        function = _innermost_function(self.module, use)
        if any(_innermost_function(self.module, self._anchor(b)) is not function for b in bindings):
            return bindings
        at = self._statement_index(use, function)
        kills = [self._statement_index(b, function) for b in bindings if self._assigned_unconditionally(b, function)]
        return [b for b in bindings if not any(self._statement_index(b, function) < k < at for k in kills)]

    def _anchor(self, binding) -> ast.AST | None:
        return binding.value if isinstance(binding, ValueBinding) else getattr(binding, "node", None)

    def _statement_index(self, node, function: ast.AST) -> int:
        """The index in ``function``'s body of the statement holding ``node`` (a node or a
        binding); -1 for its parameters and anything outside it."""
        node = node if isinstance(node, ast.AST) else self._anchor(node)
        node = child_of(self.module, node, function) if node is not None else None
        return next((i for i, statement in enumerate(function.body) if statement is node), -1)

    def _assigned_unconditionally(self, binding, function: ast.AST) -> bool:
        """``binding`` is made by an assignment (``x = ...``, ``x, y = ...``) that is itself a
        statement of ``function``'s body."""
        anchor = self._anchor(binding)
        parent = self.module.parent_of(anchor) if anchor is not None else None
        if isinstance(binding, ValueBinding):
            statement = parent
        elif isinstance(anchor, ast.Name) and isinstance(parent, (ast.Tuple, ast.List)):
            statement = self.module.parent_of(parent)
            if not (isinstance(statement, ast.Assign) and parent in statement.targets):
                return False
        else:
            return False
        return isinstance(statement, (ast.Assign, ast.AnnAssign)) and self.module.parent_of(statement) is function

    def _binding_sized(self, binding, seen: set[int]) -> bool:
        if isinstance(binding, ValueBinding):
            return self._in_driver(binding.value) and self.sized(binding.value, seen)
        # `state, metrics = step(state, batch)`: an element of the step's outputs keeps the device axis.
        target = getattr(binding, "node", None)
        unpacked = self.module.parent_of(target) if isinstance(target, ast.Name) else None
        statement = self.module.parent_of(unpacked) if isinstance(unpacked, (ast.Tuple, ast.List)) else None
        return isinstance(statement, ast.Assign) and unpacked in statement.targets and self._in_driver(statement) \
            and isinstance(statement.value, ast.Call) and self._is_step_call(statement.value)

    def _is_step_call(self, call: ast.Call) -> bool:
        """A call of one of the module's pmapped steps whose outputs all have the device axis first."""
        if not isinstance(call.func, ast.Name):
            return False
        bindings = self.names.bindings(call.func)
        for other in self.apps:
            if other.options.out_axes is not None:
                continue
            if other.kind == "call" and any(isinstance(b, ValueBinding) and b.value is other.node for b in bindings):
                return True
            if other.kind == "decorator" and any(getattr(b, "node", None) is other.mapped for b in bindings):
                return True
        return False

    def device_count(self, node: ast.expr) -> bool:
        """``node`` is the count the step maps over: every local device, or the driver's one named
        count; the first count a mapped value shows is the one every other must show."""
        count = self._count_of(node)
        if count is None:
            return False
        if self._count is None:
            self._count = count
        return self._count == count

    def _count_of(self, node: ast.expr) -> tuple | None:
        if self._every_device(node):
            return ("every",)
        if isinstance(node, ast.Name) and self._named_count(node):
            return ("name", node.id)
        return None

    def _every_device(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Call):
            return not node.args and not node.keywords and self.names.qualified_name(node.func) in _DEVICE_COUNTS
        if isinstance(node, ast.Name):
            bindings = self.names.bindings(node)
            return len(bindings) == 1 and isinstance(bindings[0], ValueBinding) and self._every_device(bindings[0].value)
        return False

    def _named_count(self, name: ast.Name) -> bool:
        """A name every binding of which is an assignment in the driver (not in a function nested
        in it) before the statement that builds the step (so the mesh built there sees the value every call sees),
        of an int the module computes: the device count, ``min(...)`` of counts, or such a name.
        Declared ``global`` or ``nonlocal`` anywhere, it could change behind the step's back."""
        bindings = self.names.bindings(name)
        if not bindings or self.names.declared_shared(name.id):
            return False
        for binding in bindings:
            # Under an `if` too (brax: `if max_devices_per_host: n = min(n, max_devices_per_host)`).
            if not isinstance(binding, ValueBinding) or _innermost_function(self.module, binding.value) is not self.driver:
                return False
            if not 0 <= self._statement_index(binding, self.driver) < self._built_at:
                return False
            if not self._count_value(binding.value, {id(name)}):
                return False
        return True

    def _count_value(self, node: ast.expr, seen: set[int]) -> bool:
        if self._every_device(node):
            return True
        if isinstance(node, ast.Call) and self.names.builtin(node.func) == "min":
            return bool(node.args) and not node.keywords and any(self._count_value(a, seen) for a in node.args)
        if isinstance(node, ast.Name):
            if id(node) in seen:  # `n = min(n, k)`: no larger than the n it was
                return True
            bindings = self.names.bindings(node)
            return bool(bindings) and all(isinstance(b, ValueBinding) and self._count_value(b.value, seen | {id(node)})
                                          for b in bindings)
        return False

    def _all_devices(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and not node.args and not node.keywords \
            and self.names.qualified_name(node.func) in _ALL_DEVICES

    def _in_driver(self, node: ast.AST) -> bool:
        """In the driver, or in a function nested in it (a closure that calls the step)."""
        return _within(self.module, node, self.driver)


def _mapped_positions(app: Application):
    """The axis argument k is mapped on: 0, None (broadcast or static), or -1 (another axis, or a
    tree of axes: its size is not followed)."""
    options = app.options
    in_axes = options.in_axes
    static = set(options.static)

    def axis(position: int) -> int | None:
        if position in static:
            return None
        element = in_axes
        if isinstance(in_axes, (ast.Tuple, ast.List)):
            element = in_axes.elts[position] if position < len(in_axes.elts) else None
        if element is None:
            return 0
        if isinstance(element, ast.Constant) and element.value in (None, 0) and type(element.value) is not bool:
            return element.value
        return -1
    return axis
