"""``jax.device_put_replicated`` / ``device_put_sharded`` (JM302) and flax's ``replicate`` /
``unreplicate`` (JM102) as placements with public API, planned on ``ast``.

What each becomes, at its site (no helper is written)::

    jax.device_put_replicated(tree, devices)
    -> jax.device_put(jax.tree.map(lambda x: np.broadcast_to(x, (len(devices), *np.shape(x))), tree),
                      NamedSharding(Mesh(devices, ("devices",)), P("devices")))
    jax.device_put_sharded(shards, devices)
    -> jax.device_put(jax.tree.map(lambda *xs: np.stack(xs), *shards),
                      NamedSharding(Mesh(devices, ("devices",)), P("devices")))
    flax.jax_utils.replicate(tree, devices=None)
    -> the first, with ``devices or jax.local_devices()`` (flax's default, its pmap device order)
    flax.jax_utils.unreplicate(tree)
    -> jax.tree.map(lambda x: x[0], tree)                  (flax's own body)

A device list that is an expression (``jax.local_devices()[:k]``, ``devs or jax.local_devices()``)
is needed twice (the mesh and the leading axis): it is bound once to a new name on a line of its
own above the statement, where the statement evaluates it unconditionally and starts its line;
elsewhere (a lambda's body, a conditional expression) it is written twice, which ``_pure`` allows.

Measured against the real implementations (JAX 0.4.30 and 0.10.2's ``jax/_src/api.py``, 4 CPU
devices, leaf by leaf): the same shape, dtype (x64 canonicalisation included), values, device of
every slice (a subset of devices in any order too), committed; each device gets one copy, from a
host view (``np.broadcast_to`` copies nothing, so no device ever holds ``len(devices)`` copies).
What differs: a weakly typed leaf (a Python scalar such as a TrainState's ``step=0``,
``jnp.asarray(0.1)``) comes out strongly typed, where JAX kept it weak, which changes dtype
promotion later (``weak_f32 * bf16`` is bf16, ``f32 * bf16`` is f32); and a typed PRNG key
(``jax.random.key``) cannot go through numpy (it raises). No public placement keeps weak types:
``make_array_from_single_device_arrays`` and ``make_array_from_callback`` build strong avals,
``jnp.broadcast_to`` / ``jnp.stack`` keep them but hold all copies on one device first, and a
jitted broadcast with ``out_shardings`` compiles per call. So the fix is safe only where every
leaf is provably strong (numpy values), unsafe elsewhere with that reason. Where every leaf is
visibly made by ``jax.random`` (``key``, ``split``, ``fold_in``, ... through names, ``list(...)``,
comprehensions), the stack / broadcast is ``jnp``'s instead: it takes typed keys, which numpy
raises on, and keys are a few bytes, so holding the copies on one device first costs nothing
(checked against 0.4.30 on 8 CPU devices: the same key data, layout and draws).

Several processes: ``devices`` naming only this process's devices (``jax.local_devices()``, a
slice of it, a name bound to one) gives a process-local array, as before. In a module that shows
multi-process use (``Planner.multi_process``), a placement onto devices not provably local is
unsafe: ``jax.device_put`` of a host value onto other processes' devices first checks that every
process passes the same value (a collective: it waits for every process and raises when they
differ), where ``device_put_sharded`` placed, from each process's own list, the shards of its own
devices, and ``device_put_replicated`` copied this process's value onto the others' devices (a
cross-host transfer; CPU backends refuse it). Measured with 2 processes x 2 devices.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

from jaxmigrate.core.flow import statement_of
from jaxmigrate.core.edits import Edit
from jaxmigrate.core.module import ParsedModule, parse_module
from jaxmigrate.migrate._meshes import MAKE_MESH
from jaxmigrate.migrate._pmap_sites import planner_of
from jaxmigrate.migrate._plan import (Namer, Plan, Site, Sites, Unprovable, apply, invented_axis, remove_imports_of,
                                      resolves, selected)
from jaxmigrate.names import ImportBinding, ValueBinding

_REPLICATED, _SHARDED = "jax.device_put_replicated", "jax.device_put_sharded"
_LEGACY = frozenset({_REPLICATED, _SHARDED})
_PARAMS = {_REPLICATED: ("x", "devices"), _SHARDED: ("shards", "devices")}
_DEVICE_LISTS = frozenset({"jax.devices", "jax.local_devices"})
_KEY_MAKERS = frozenset({"jax.random.key", "jax.random.PRNGKey", "jax.random.split", "jax.random.fold_in",
                         "jax.random.wrap_key_data", "jax.random.clone"})
# numpy functions that always return a numpy array or scalar (never a Python scalar, which JAX
# would take as weakly typed): a tree of their results is placed exactly.
_NUMPY_ARRAYS = frozenset({
    "array", "asarray", "ascontiguousarray", "zeros", "ones", "full", "empty", "arange", "linspace", "eye",
    "identity", "stack", "concatenate", "zeros_like", "ones_like", "full_like", "empty_like", "bool_",
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
})
# jax.numpy constructors whose result is never weakly typed, whatever their arguments (measured on
# 0.10.2; `jnp.array(1.0)`, `jnp.asarray(2.0)` and `jnp.full(s, 1.0)` are weak, so not here).
_JNP_STRONG = frozenset({"zeros", "ones", "empty", "eye", "identity", "arange", "linspace"})
# The device count a device list's length is, for the two lists it has a function for.
_COUNTS = {"jax.devices": "device_count", "jax.local_devices": "local_device_count"}

WEAK_TYPES = (
    "weakly typed leaves (Python scalars such as a TrainState's `step=0`, `jnp.asarray(0.1)`) become "
    "strongly typed, which changes later dtype promotion (weak f32 * bf16 is bf16, f32 * bf16 is f32), "
    "and typed PRNG keys (`jax.random.key`) raise"
)


def plan_device_put(module: ParsedModule, plan: Plan, sites: Sites) -> list[Site]:
    return _Placements(module, plan).run(sites, _LEGACY, _device_put_call)


def relayout_replications(text: str) -> str:
    """The replications an earlier fix laid out for kept pmaps, laid out again now that a pmap
    rewrite built a mesh: the pre-commit hook's safe ``--fix`` writes ``jax.device_put(<broadcast>,
    NamedSharding(Mesh(jax.devices(), (axis,)), P(axis)))`` for a value a kept pmap takes (that
    pmap's own mesh, so it is not placed again); once a later ``--fix --unsafe-fixes`` rewrites the
    pmap, the value goes where a replication made in one run goes (``_Placements.replicated``): onto
    the mesh of its function's steps, unless a pmap still kept takes it. The values are the same
    either way; the step compiles once, and no mesh is left named after JAX's internal pmap axis."""
    if "broadcast_to" not in text or "NamedSharding" not in text:
        return text
    module = parse_module(text)
    if module is None:
        return text
    plan = Plan()
    placements = _Placements(module, plan)
    if placements.multi_process:
        return text
    for call in module.of_type(ast.Call):
        if module.names.qualified_name(call.func) != "jax.device_put" or len(call.args) != 2 or call.keywords:
            continue
        value, sharding = call.args
        if not (_replication(module, value) and _own_layout(module, sharding)):
            continue
        if placements.kept_pmap_axis(value) is None and (step := placements.step_mesh(value)) is not None:
            plan.edits.append(Edit(*module.span(sharding), placements.on_mesh(*step)))
    if not plan.edits:
        return text
    remove_imports_of(module, plan, {"jax.sharding.Mesh"})
    del module, placements  # not held while the result is parsed (``apply``)
    return apply(text, plan)


def _replication(module: ParsedModule, node: ast.expr) -> bool:
    """``jax.tree.map(lambda x: np.broadcast_to(x, (n, *np.shape(x))), tree)``: what
    ``_Placements.replicated`` writes."""
    if not (isinstance(node, ast.Call) and module.names.qualified_name(node.func) == "jax.tree.map"
            and len(node.args) == 2 and not node.keywords and isinstance(node.args[0], ast.Lambda)):
        return False
    fn = node.args[0]
    body = fn.body
    return (len(fn.args.args) == 1 and isinstance(body, ast.Call) and len(body.args) == 2
            and module.names.qualified_name(body.func) in ("numpy.broadcast_to", "jax.numpy.broadcast_to")
            and isinstance(body.args[0], ast.Name) and body.args[0].id == fn.args.args[0].arg)


def _own_layout(module: ParsedModule, node: ast.expr) -> bool:
    """``NamedSharding(Mesh(jax.devices(), (axis,)), P(axis))`` (or ``jax.local_devices()``): the
    layout ``_Placements.sharding`` writes over a whole device list."""
    def call_of(expr, *names) -> ast.Call | None:
        if isinstance(expr, ast.Call) and not expr.keywords and module.names.qualified_name(expr.func) in names:
            return expr
        return None

    named = call_of(node, "jax.sharding.NamedSharding", "jax.NamedSharding")
    if named is None or len(named.args) != 2:
        return False
    mesh = call_of(named.args[0], "jax.sharding.Mesh")
    spec = call_of(named.args[1], "jax.sharding.PartitionSpec", "jax.P")
    if mesh is None or spec is None or len(mesh.args) != 2 or len(spec.args) != 1:
        return False
    devices, axes = mesh.args
    return (call_of(devices, *_DEVICE_LISTS) is not None and not devices.args
            and isinstance(axes, ast.Tuple) and len(axes.elts) == 1 and isinstance(axes.elts[0], ast.Constant)
            and isinstance(axes.elts[0].value, str) and isinstance(spec.args[0], ast.Constant)
            and spec.args[0].value == axes.elts[0].value)


# -- flax.jax_utils.replicate / unreplicate ------------------------------------------------------

_FLAX = frozenset({"flax.jax_utils.replicate", "flax.jax_utils.unreplicate"})


def plan_flax_replication(module: ParsedModule, plan: Plan, sites: Sites) -> list[Site]:
    """``replicate(tree, devices=None)`` is ``jax.device_put_replicated(tree, devices or
    jax.local_devices())`` in flax 0.8.5, and is rewritten as that; ``unreplicate(tree)`` becomes
    flax's own body. Flax's default order, XLA's default assignment, is ``jax.local_devices()`` on
    CPU and GPU; elsewhere only where identical replicas sit differs."""
    placements = _Placements(module, plan)
    out = placements.run(sites, _FLAX, _flax_call)
    if placements.used:  # `from flax import jax_utils` / `import flax` reached them; dropped if now unused
        for binding, _scope in module.names.imports():
            alias = binding.node.asname
            if binding.node.name in ("flax", "flax.jax_utils"):  # `import flax.jax_utils [as ju]`
                plan.remove_imports.add((binding.node.name, None, alias))
            elif binding.qualname == "flax.jax_utils":  # `from flax import jax_utils`
                plan.remove_imports.add(("flax", "jax_utils", alias))
    return out


# -- planning ------------------------------------------------------------------------------------


@dataclass
class _Call:
    """What one legacy call is rewritten to, and why the rewrite is unsafe (None: it is safe)."""

    text: str
    unsafe: str | None


class _Placements:
    """Plans the calls of a set of legacy names in one module."""

    def __init__(self, module: ParsedModule, plan: Plan) -> None:
        self.module = module
        self.plan = plan
        self.namer = Namer(module, plan)
        self.used: set[str] = set()
        self.hoisted: set[str] = set()  # names bound above a statement for its device list
        self.pending: list[Edit] = []  # those bindings, for the site being planned

    def run(self, sites: Sites, names: frozenset[str], render) -> list[Site]:
        module = self.module
        out: dict[tuple[int, int], Site] = {}
        for node in module.of_type(ast.Name, ast.Attribute):
            if not isinstance(node.ctx, ast.Load):
                continue
            parent = module.parent_of(node)
            if isinstance(parent, ast.Attribute):
                continue  # only the whole chain is a mention
            try:
                qual = resolves(module, node, names)
            except Unprovable as exc:
                if module.names.candidates(node) & names:
                    pos, _ = selected(module, node, sites)
                    out.setdefault(pos, Site(*pos, False, str(exc)))
                continue
            if qual is None:
                continue
            if isinstance(node, ast.Name) and not all(isinstance(b, ImportBinding) for b in module.names.bindings(node)):
                continue  # a rebinding (`put = jax.device_put_replicated`): planned where the name is spelled
            pos, chosen = selected(module, node, sites)
            # A site this run does not rewrite must not add its imports to the plan.
            self.namer = Namer(module, self.plan if chosen else Plan())
            self.pending = []
            try:
                if not (isinstance(parent, ast.Call) and parent.func is node):
                    raise Unprovable("used as a value, not called: replace it by hand")
                call = render(self, parent, qual)
            except Unprovable as exc:
                if pos not in out:
                    out[pos] = Site(*pos, False, str(exc))
                continue
            previous = out.get(pos)
            unsafe = call.unsafe or (previous.unsafe if previous is not None and previous.rewritable else None)
            out[pos] = Site(*pos, True, None, unsafe=unsafe)
            if chosen:
                self.plan.edits += [*self.pending, Edit(*module.span(parent), call.text)]
                self.used.add(qual)
        remove_imports_of(module, self.plan, self.used)
        return sorted(out.values(), key=lambda s: (s.line, s.column))

    @cached_property
    def multi_process(self) -> str | None:
        """Where the module shows it runs as several processes: the pmap planner's answer."""
        return planner_of(self.module).multi_process

    # -- the texts ---------------------------------------------------------------------------

    def arguments(self, call: ast.Call, params: tuple[str, ...]) -> dict[str, ast.expr]:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise Unprovable("called with *args or **kwargs")
        if self.module.has_comment(call):
            raise Unprovable("a comment inside the call would be lost")
        given = dict(zip(params, call.args))
        for keyword in call.keywords:
            if keyword.arg not in params or keyword.arg in given:
                raise Unprovable(f"unexpected argument `{keyword.arg}=`")
            given[keyword.arg] = keyword.value
        if len(call.args) > len(params):
            raise Unprovable("unexpected arguments")
        return given

    def replicated(self, tree: ast.expr, devices: ast.expr | None, local: bool, or_local: bool = False) -> _Call:
        """``devices`` (None: ``jax.local_devices()``; ``or_local``: ``devices or jax.local_devices()``)
        is named twice: the mesh, and the leading axis of every leaf (the device count where it is a
        whole device list)."""
        module, jax = self.module, self.namer.jax()
        which = "jax.local_devices" if devices is None else _device_list(module, devices)
        if which and not or_local and (devices is None or not (devices.args or devices.keywords)):  # type: ignore[union-attr]
            text = f"{jax}.local_devices()" if devices is None else self.argument(devices)
            count = f"{jax}.{_COUNTS[which]}()"
        elif isinstance(devices, (ast.List, ast.Tuple)) and not or_local and not any(
                isinstance(e, ast.Starred) for e in devices.elts):
            text, count = self.argument(devices), str(len(devices.elts))
        else:
            if any("len" in scope.bindings for scope in module.names.scopes) or module.names.star_imports:
                raise Unprovable("`len` may not be the builtin here")
            text = f"{self.argument(devices)} or {jax}.local_devices()" if or_local else self.argument(devices)
            if not text.isidentifier() and (name := self.hoist(devices, text)) is not None:
                text = name  # written once, above the statement: not once in the mesh and again in len()
            elif or_local:
                text = f"({text})"
            count = f"len({text})"
        keys = _random_keys(module, tree)
        np = self.jnp() if keys else self.namer.numpy()
        names = set() if devices is None else {n.id for n in ast.walk(devices) if isinstance(n, ast.Name)}
        leaf = next(n for n in ("x", "leaf", "value", "a") if n not in names | {np, jax.partition(".")[0]})
        broadcast = f"lambda {leaf}: {np}.broadcast_to({leaf}, ({count}, *{np}.shape({leaf})))"
        # A value a kept pmap takes is laid out on that pmap's own mesh; any other, on the mesh the
        # steps of its function run on, when there is one.
        kept_axis = self.kept_pmap_axis(tree)
        step_mesh = self.step_mesh(tree) if kept_axis is None and (which and devices is None or which and not (
            devices.args or devices.keywords)) else None
        sharding = self.on_mesh(*step_mesh) if step_mesh is not None else self.sharding(text, kept_axis)
        text = self.device_put(tree, f"{jax}.tree.map({broadcast}, {self.argument(tree)})", sharding)
        reasons = [] if keys or _strong(module, tree) else [WEAK_TYPES]
        if not local and self.multi_process:
            reasons.append(self.other_processes("device_put_replicated copied this process's value onto them"))
        return _Call(text, "; ".join(reasons) or None)

    def hoist(self, devices: ast.expr, text: str) -> str | None:
        """Bind ``text`` (the devices) to a new name on a line of its own just above the statement
        that holds ``devices``, and return the name; None where that could change what runs: the
        call is evaluated only conditionally or in a nested scope (a lambda, a comprehension, a
        class body), or the statement does not start its line."""
        module = self.module
        node: ast.AST = devices
        while not isinstance(node, ast.stmt):
            node = module.parent_of(node)
            if node is None or isinstance(node, (ast.Lambda, ast.IfExp, ast.BoolOp, ast.ListComp, ast.SetComp,
                                                  ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.Await)):
                return None
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return, ast.Expr)) or "\n" in text \
                or isinstance(module.parent_of(node), ast.ClassDef):
            return None
        start = module.span(node)[0]
        line_start = module.text.rfind("\n", 0, start) + 1
        indent = module.text[line_start:start]
        if indent.strip():
            return None
        name = next((n for n in ("devices", "replica_devices") if module.free(n) and n not in self.hoisted), None)
        if name is None:
            return None
        self.hoisted.add(name)
        self.pending.append(Edit(line_start, line_start, f"{indent}{name} = {text}\n"))
        return name

    def other_processes(self, before: str) -> str:
        return (f"this module runs as several processes ({self.multi_process}) and the devices may include other "
                f"processes' devices: {before}, while `jax.device_put` of a host value onto them first checks "
                "that every process passes the same value (a collective: it waits for every process, and "
                "raises when the values differ)")

    def sharded(self, shards: ast.expr, devices: ast.expr) -> _Call:
        keys = _random_keys(self.module, shards)
        np, jax = self.jnp() if keys else self.namer.numpy(), self.namer.jax()
        stacked = f"{jax}.tree.map(lambda *xs: {np}.stack(xs), *{self.argument(shards, True)})"
        text = self.device_put(shards, stacked, self.sharding(self.argument(devices)))
        strong = isinstance(shards, (ast.List, ast.Tuple)) and all(_strong(self.module, e) for e in shards.elts) or (
            isinstance(shards, (ast.ListComp, ast.GeneratorExp)) and _strong(self.module, shards.elt))
        reasons = [] if keys or strong else [WEAK_TYPES]
        if self.multi_process and not _local(self.module, devices):
            reasons.append(self.other_processes(
                "device_put_sharded placed, from each process's own list, the shards of its own devices"))
        return _Call(text, "; ".join(reasons) or None)

    def jnp(self) -> str:
        """``jax.numpy`` as the module spells it (typed PRNG keys go through jax.numpy, never numpy)."""
        alias = self.namer.alias("jax.numpy")
        if alias:
            return alias
        if self.module.free("jnp"):
            self.namer.plan.add_imports.add(("jax.numpy", None, "jnp"))
            return "jnp"
        return f"{self.namer.jax()}.numpy"

    def device_put(self, value: ast.expr, tree: str, sharding: str) -> str:
        """``jax.device_put(tree, sharding)``; one argument a line when the user's ``value`` spans
        lines (its own lines kept as they are): a formatter breaks no bracket holding those."""
        jax = self.namer.jax()
        if "\n" not in tree:
            return f"{jax}.device_put({tree}, {sharding})"
        call = self.module.parent_of(value)  # the legacy call (value is one of its arguments)
        while not isinstance(call, ast.Call):
            call = self.module.parent_of(call)
        first = self.module.src.line(call.lineno)
        outer = first[:len(first) - len(first.lstrip())]
        inner = outer + self.module.continuation
        return f"{jax}.device_put(\n{inner}{tree},\n{inner}{sharding},\n{outer})"

    def sharding(self, devices: str, axis: str | None = None) -> str:
        named, mesh = self.namer.sharding("NamedSharding"), self.namer.sharding("Mesh")
        spec = self.namer.sharding("PartitionSpec", "P")
        axis = axis or invented_axis(self.module)
        return f'{named}({mesh}({devices}, ("{axis}",)), {spec}("{axis}"))'

    def kept_pmap_axis(self, node: ast.expr) -> str | None:
        """The axis name of the pmap the replicated value is passed to, when every call in its scope
        passes it to pmaps of one literal axis, directly or through a function of the module that
        passes that parameter on (brax's ``training_epoch_with_timing(training_state, key)``):
        JAX 0.10's pmap lays its inputs out over ``Mesh(devices, (axis,))``, so a value placed on
        that mesh is not placed again, and the step compiles once, as before. The name is all this
        decides: in several processes the devices stay the local ones the value was placed on."""
        from jaxmigrate.migrate._pmap_sites import INTERNAL_AXIS, planner_of

        module = self.module
        call = module.parent_of(node)
        statement = module.parent_of(call)
        steps = {}
        for app in planner_of(module).applications():
            if app.options is None:
                continue
            axis = app.options.axis.value if app.options.axis.expr is not None else INTERNAL_AXIS
            key = app.mapped if app.kind == "decorator" else app.node
            steps[id(key)] = (axis, app.options)
        if not (isinstance(statement, ast.Assign) and statement.value is call and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            return self._returned_axis(call, steps)
        axes = self._pmap_axes(statement.targets[0].id, lambda b: getattr(b, "value", None) is call, steps, depth=2)
        return axes.pop() if axes is not None and len(axes) == 1 else None

    def _returned_axis(self, call: ast.Call, steps: dict) -> str | None:
        """A replication a helper returns (jaxline's ``bcast_local_devices``: ``return
        tree_map(lambda v: device_put_sharded(len(devices) * [v], devices), value)``) is consumed
        where this module cannot see. Where every pmap of the module names one axis, the module's
        programs pmap over that axis: the value is laid out there (values are the same on any
        layout; only whether the consuming pmap places them again depends on the name)."""
        node = statement_of(self.module, call)
        named = {axis for axis, options in steps.values() if options.axis.expr is not None}
        unnamed = any(options.axis.expr is None for _, options in steps.values())
        if isinstance(node, ast.Return) and len(named) == 1 and not unnamed and None not in named:
            return next(iter(named))
        return None

    def _pmap_axes(self, name: str, bound, steps: dict, depth: int) -> set | None:
        """The axes of the pmaps the reads of ``name`` (those bound by ``bound``) are passed to;
        None when one goes to a pmap whose axis or mapping this cannot tell."""
        module = self.module
        axes: set = set()
        # (a value read otherwise is the same on any layout)
        for use, parent in self._calls_given(name, bound):
            bindings = module.names.bindings(parent.func)
            found = [steps.get(id(getattr(b, "node", None) or getattr(b, "value", None))) for b in bindings]
            found = [f for f in found if f is not None]
            if found:
                if len(found) != 1 or found[0][0] is None or found[0][1].in_axes is not None:
                    return None
                axes.add(found[0][0])
                continue
            # A function of the module that takes the value as a plain positional parameter.
            defs = [b.node for b in bindings if isinstance(getattr(b, "node", None), (ast.FunctionDef, ast.AsyncFunctionDef))]
            if depth and len(defs) == 1 and len(bindings) == 1:
                params = defs[0].args
                index = parent.args.index(use)
                if params.posonlyargs or params.vararg or index >= len(params.args):
                    continue
                param = params.args[index]
                inner = self._pmap_axes(param.arg, lambda b, p=param: getattr(b, "node", None) is p, steps, depth - 1)
                if inner is None:
                    return None
                axes |= inner
        return axes

    def _calls_given(self, name: str, bound) -> list[tuple[ast.Name, ast.Call]]:
        """(read, call) for each read of ``name`` (one ``bound`` binds) passed positionally to a
        function called by name, in the order of the text."""
        module = self.module
        found = []
        for _, use in sorted(module.names_at.get(name, ()), key=lambda item: module.span(item[1])):
            if not isinstance(use.ctx, ast.Load) or not any(bound(b) for b in module.names.bindings(use)):
                continue
            parent = module.parent_of(use)
            if isinstance(parent, ast.Call) and use in parent.args and isinstance(parent.func, ast.Name):
                found.append((use, parent))
        return found

    def step_mesh(self, node: ast.expr) -> tuple[str, str] | None:
        """The mesh a pmapped step of this function is built over, when the value is replicated onto
        exactly its devices: a name bound once in the function, before ``node``'s statement, to
        ``jax.make_mesh((jax.device_count(),), (axis,), ...)``, in a module of one process (where
        every device is a local one). The step compiles once for values on its own mesh; on a mesh
        of its own ("devices") the first call would compile it again."""
        if self.multi_process:
            return None
        module = self.module
        function = module.parent_of(node)
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = module.parent_of(function)
        if function is None:
            return None
        start = module.span(node)[0]
        found = {}
        for statement in ast.walk(function):
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)):
                continue
            name = statement.targets[0].id
            found.setdefault(name, []).append(statement)
        meshes = {}
        for name, assigns in found.items():
            value = assigns[0].value
            if len(assigns) != 1 or module.span(assigns[0])[1] > start or module.parent_of(assigns[0]) is not function:
                continue
            if not isinstance(value, ast.Call) or module.names.qualified_name(value.func) not in MAKE_MESH:
                continue
            shape, axes = (value.args + [None, None])[:2]
            if isinstance(shape, ast.Tuple) and len(shape.elts) == 1 and isinstance(shape.elts[0], ast.Call) \
                    and module.names.qualified_name(shape.elts[0].func) == "jax.device_count" \
                    and isinstance(axes, ast.Tuple) and len(axes.elts) == 1 \
                    and isinstance(axes.elts[0], ast.Constant) and isinstance(axes.elts[0].value, str):
                meshes[name] = axes.elts[0].value
        if len(meshes) > 1:  # one mesh per pmap axis name: the one of the step the value goes to first
            name = self._first_consumer_mesh(node, set(meshes))
            if name is not None:
                return name, meshes[name]
        return next(iter(meshes.items()), None)

    def _first_consumer_mesh(self, node: ast.expr, meshes: set[str]) -> str | None:
        """The mesh (of ``meshes``) of the first rewritten step, in the text, given the value that
        ``node``'s statement assigns: a function decorated with, or a name bound to, a
        ``shard_map`` over ``mesh=<name>``. Where the value is given to steps on different meshes
        one of them compiles once more either way; the first is the one it is given to before
        any step made a value on its own mesh."""
        module = self.module
        statement = statement_of(module, node)
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            return None
        for _, parent in self._calls_given(statement.targets[0].id,
                                           lambda b: getattr(b, "value", None) is statement.value):
            for binding in module.names.bindings(parent.func):
                made = getattr(binding, "node", None)
                parts = made.decorator_list if isinstance(made, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
                    [binding.value] if isinstance(binding, ValueBinding) else []
                for part in parts:
                    for keyword in ast.walk(part):
                        if isinstance(keyword, ast.keyword) and keyword.arg == "mesh" \
                                and isinstance(keyword.value, ast.Name) and keyword.value.id in meshes:
                            return keyword.value.id
        return None

    def on_mesh(self, mesh: str, axis: str) -> str:
        named, spec = self.namer.sharding("NamedSharding"), self.namer.sharding("PartitionSpec", "P")
        return f'{named}({mesh}, {spec}("{axis}"))'

    def argument(self, node: ast.expr, starred: bool = False) -> str:
        text = self.module.segment(node)
        simple = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.List, ast.Tuple, ast.Dict, ast.ListComp,
                  ast.DictComp, ast.Constant)
        if (starred and not isinstance(node, simple)) or (
                isinstance(node, ast.GeneratorExp) and not text.startswith("(")):
            return f"({text})"
        return text

    def devices(self, node: ast.expr, site: ast.Call) -> bool:
        """Check that ``node`` can be written twice; whether it is provably this process's devices."""
        if not _pure(self.module, node):
            raise Unprovable("the rewrite names the devices twice and this expression may not give the same "
                             "devices twice; bind it to a name first")
        if any(isinstance(n, ast.Name) for n in ast.walk(node)) and _in_class_body(self.module, site):
            raise Unprovable("in a class body the rewrite's lambda could not see class-level names")
        return _local(self.module, node)


def _device_put_call(placements: _Placements, call: ast.Call, qual: str) -> _Call:
    given = placements.arguments(call, _PARAMS[qual])
    if "devices" not in given or len(given) != 2:
        raise Unprovable("missing arguments")
    first = given[_PARAMS[qual][0]]
    if qual == _SHARDED and (value := _copies(placements.module, first, given["devices"])) is not None:
        # `device_put_sharded(len(devices) * [v], devices)` is a replication: placed as one, from
        # a zero-copy broadcast, not a host stack of len(devices) copies.
        return placements.replicated(value, given["devices"], placements.devices(given["devices"], call))
    if qual == _SHARDED:
        return placements.sharded(first, given["devices"])
    return placements.replicated(first, given["devices"], placements.devices(given["devices"], call))


def _flax_call(placements: _Placements, call: ast.Call, qual: str) -> _Call:
    module = placements.module
    params = ("tree", "devices") if qual.endswith(".replicate") else ("tree",)
    given = placements.arguments(call, params)
    if "tree" not in given:
        raise Unprovable("unexpected arguments")
    if qual.endswith(".unreplicate"):
        jax = placements.namer.jax()
        return _Call(f"{jax}.tree.map(lambda x: x[0], {placements.argument(given['tree'])})", None)
    devices = given.get("devices")
    if devices is None or (isinstance(devices, ast.Constant) and devices.value is None):
        return placements.replicated(given["tree"], None, True)
    local = placements.devices(devices, call)
    # flax's `devices or _pmap_device_order()`, where `devices` may be empty
    return placements.replicated(given["tree"], devices, local, or_local=not _non_empty(module, devices))


# -- what an expression provably is --------------------------------------------------------------


def _device_list(module: ParsedModule, node: ast.expr) -> str | None:
    """``jax.devices()`` / ``jax.local_devices()`` called with constant arguments: which one."""
    if not isinstance(node, ast.Call) or not all(
            isinstance(a, ast.Constant) for a in [*node.args, *(k.value for k in node.keywords)]):
        return None
    name = module.names.qualified_name(node.func)
    return name if name in _DEVICE_LISTS else None


def _pure(module: ParsedModule, node: ast.expr) -> bool:
    """Evaluating ``node`` twice gives equal device lists: a name, a constant, ``jax.devices()`` /
    ``jax.local_devices()``, or a slice of those with such bounds."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_pure(module, e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Subscript):
        index = node.slice
        bounds = [index.lower, index.upper, index.step] if isinstance(index, ast.Slice) else [index]
        return _pure(module, node.value) and all(b is None or _pure(module, b) for b in bounds)
    return _device_list(module, node) is not None


def _local(module: ParsedModule, node: ast.expr) -> bool:
    """Provably only this process's devices: ``jax.local_devices()`` (without ``process_index=``),
    a slice of it, a name bound only to one, or a list of their elements."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(_local(module, e) for e in node.elts)
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        bindings = module.names.bindings(node)
        return bool(bindings) and all(
            isinstance(b, ValueBinding) and not isinstance(b.value, ast.Name) and _local(module, b.value)
            for b in bindings)
    return (_device_list(module, node) == "jax.local_devices" and not node.args  # type: ignore[union-attr]
            and all(k.arg == "backend" for k in node.keywords))  # type: ignore[union-attr]


def _non_empty(module: ParsedModule, node: ast.expr) -> bool:
    """A device list that cannot be empty: every list of devices, or ``[:k]`` of one, k >= 1."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        index = node.slice
        start = index.lower is None or (isinstance(index.lower, ast.Constant) and index.lower.value == 0)
        stop = index.upper
        return (start and index.step is None and isinstance(stop, ast.Constant) and type(stop.value) is int
                and stop.value >= 1 and _non_empty(module, node.value))
    return _device_list(module, node) is not None


def _strong(module: ParsedModule, node: ast.expr) -> bool:
    """Every leaf is provably a numpy value (never weakly typed, never a PRNG key array)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_strong(module, e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return None not in node.keys and all(_strong(module, v) for v in node.values)
    if isinstance(node, ast.Call):
        name = module.names.qualified_name(node.func) or ""
        module_name, _, function = name.rpartition(".")
        return (module_name == "numpy" and function in _NUMPY_ARRAYS) or (
            module_name == "jax.numpy" and function in _JNP_STRONG)
    return False


def _copies(module: ParsedModule, shards: ast.expr, devices: ast.expr) -> ast.expr | None:
    """``v`` where ``shards`` is ``len(devices) * [v]`` (or ``[v] * len(devices)``), the very
    ``devices`` expression (written without calls other than device lists: ``_pure``)."""
    if not (isinstance(shards, ast.BinOp) and isinstance(shards.op, ast.Mult)):
        return None
    for listed, count in ((shards.left, shards.right), (shards.right, shards.left)):
        if isinstance(listed, ast.List) and len(listed.elts) == 1 and not isinstance(listed.elts[0], ast.Starred) \
                and isinstance(count, ast.Call) and module.names.builtin(count.func) == "len" \
                and len(count.args) == 1 and not count.keywords \
                and ast.dump(count.args[0]) == ast.dump(devices) and _pure(module, devices):
            return listed.elts[0]
    return None


def _random_keys(module: ParsedModule, node: ast.expr, depth: int = 0) -> bool:
    """Every leaf is visibly made by ``jax.random`` (``key``, ``PRNGKey``, ``split``, ...): maybe a
    typed PRNG key, which numpy cannot take (``TypeError: JAX array with PRNGKey dtype cannot be
    converted to a NumPy array``). Followed through ``list(...)``, indexing, literals,
    comprehensions, ``n * [v]`` and names bound only to such values."""
    if depth > 4:
        return False
    if isinstance(node, ast.Call):
        name = module.names.qualified_name(node.func)
        if name in _KEY_MAKERS:
            return True
        return module.names.builtin(node.func) in ("list", "tuple") and len(node.args) == 1 and _random_keys(module, node.args[0], depth + 1)
    if isinstance(node, ast.Subscript):
        return _random_keys(module, node.value, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(_random_keys(module, e, depth + 1) for e in node.elts)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        gen = node.generators[0]
        from_iter = isinstance(node.elt, ast.Name) and isinstance(gen.target, ast.Name) and \
            node.elt.id == gen.target.id and _random_keys(module, gen.iter, depth + 1)
        return from_iter or _random_keys(module, node.elt, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return any(isinstance(side, ast.List) and _random_keys(module, side, depth + 1)
                   for side in (node.left, node.right))
    if isinstance(node, ast.Name):
        bindings = module.names.bindings(node)
        return bool(bindings) and all(isinstance(b, ValueBinding) and _random_keys(module, b.value, depth + 1)
                                      for b in bindings)
    return False


def _in_class_body(module: ParsedModule, node: ast.AST) -> bool:
    while (node := module.parent_of(node)) is not None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
                             ast.DictComp, ast.GeneratorExp)):
            return False
        if isinstance(node, ast.ClassDef):
            return True
    return False
