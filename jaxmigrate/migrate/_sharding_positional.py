"""``PositionalSharding`` chains -> ``NamedSharding`` over a ``Mesh`` of the same devices, same order.

The model (JAX 0.4.30, ``jax/_src/sharding_impls.py``): ``PositionalSharding(devices)`` keeps the
flat device order and an id grid shaped like ``devices``; ``.reshape`` reshapes the grid,
``.replicate(axis, keepdims=True)`` unions it along ``axis`` (numpy ``sum``), ``.T`` / ``.transpose``
permute it. An array dim is split over its grid dim; a cell holding k devices is replicated k ways.

The translation keeps one invariant: every mesh written is the flat device list reshaped, so
``<sharding>.mesh.devices`` is always the PositionalSharding's device order. Then

* a grid in flat order (after ``PositionalSharding(d)`` or ``.reshape(s)``) is
  ``Mesh(flat.reshape(s), ("x", "y", ...))`` with ``P`` naming the axis of every grid dim
  (``None`` for a dim of size 1: no split);
* ``.replicate(a)`` turns grid dim ``a``'s entry into ``None`` (replicated over that mesh axis),
  ``keepdims=False`` drops it; ``.T`` / ``.transpose`` permute the entries.

A variable holding a PositionalSharding becomes a variable holding the equivalent NamedSharding, so
direct uses stay as they are and derived uses read its mesh: ``s.reshape(4, 2)`` becomes
``NamedSharding(Mesh(s.mesh.devices.reshape(4, 2), ("x", "y")), P("x", "y"))``. Variables derived
from one another are rewritten together or not at all.

Kept, with a reason: shapes or axes that are not literals; a reshape of a grid that is no longer in
flat order (after ``replicate``/``transpose``); a device array of unknown rank; attribute uses other
than the Sharding interface; ``memory_kind=``; rebinding by anything but such a chain; a use whose
reaching definition is ambiguous (assigned differently in branches or later in a loop); comments
inside the rewritten expression.

Caveat (documented, loud): PositionalSharding applied a grid of higher rank than the value by
dropping leading grid dims ("rank promotion", only when those dims are 1). NamedSharding rejects a
``P`` longer than the value's rank with a ValueError at the ``device_put``; it never lays the value
out differently.
"""

from __future__ import annotations

import ast
import math

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.flow import reaching_assignment
from jaxmigrate.core.module import ParsedModule
from jaxmigrate.migrate._plan import Namer, Plan, Site, Unprovable, literal_ints
from jaxmigrate.migrate._positional_grid import Axes, Chain, State, mesh_axes
from jaxmigrate.names import ImportBinding, ValueBinding

PS_NAMES = frozenset({"jax.sharding.PositionalSharding", "jax.experimental.PositionalSharding"})
DEVICE_LISTS = frozenset({"jax.devices", "jax.local_devices"})
CREATE_DEVICE_MESH = frozenset({"jax.experimental.mesh_utils.create_device_mesh"})
OPS = frozenset({"reshape", "replicate", "transpose", "T"})
# Sharding-interface attributes that mean the same on a NamedSharding of the same devices.
SAME_ATTRS = frozenset({"device_set", "memory_kind", "is_fully_addressable", "addressable_devices"})


class PositionalPlanner:
    def __init__(self, module: ParsedModule, plan: Plan) -> None:
        self.module = module
        self.plan = plan
        self.namer = Namer(module, plan)
        self.ctors: list[ast.Call] = []
        self.bad_mentions: list[tuple[ast.AST, str]] = []
        self.var_of_assign: dict[int, tuple] = {}  # id(Assign) -> var key
        self.assigns: dict[tuple, list[ast.Assign]] = {}
        self.ps_vars: set[tuple] = set()
        self._state_stack: set[int] = set()

    # -- discovery ---------------------------------------------------------------------------

    def _is_ps(self, expr: ast.expr) -> str | None:
        """'yes' / 'ambiguous' / None."""
        names = self.module.names.candidates(expr)
        if not names & PS_NAMES:
            return None
        return "yes" if names <= PS_NAMES else "ambiguous"

    def var_key(self, name: ast.Name) -> tuple:
        return tuple(id(b) for b in self.module.names.bindings(name))

    def discover(self) -> None:
        ctor_funcs = set()
        for node in self.module.of_type(ast.Call):
            if self._is_ps(node.func):
                self.ctors.append(node)
                ctor_funcs.add(id(node.func))
        for node in self.module.nodes:
            if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in ctor_funcs:
                if isinstance(node.ctx, ast.Load) and self._is_ps(node):
                    parent = self.module.parent_of(node)
                    if isinstance(parent, ast.Attribute) and self._is_ps(parent):
                        continue  # the inner link of a chain that names it
                    if isinstance(node, ast.Name) and self.module.names.bindings(node):
                        bindings = self.module.names.bindings(node)
                        if not all(isinstance(b, ImportBinding) for b in bindings):
                            continue
                    self.bad_mentions.append((node, "`PositionalSharding` used other than by calling it"))
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                key = self.var_key(node.targets[0])
                self.var_of_assign[id(node)] = key
                self.assigns.setdefault(key, []).append(node)
        changed = True
        while changed:
            changed = False
            for key, assigns in self.assigns.items():
                if key in self.ps_vars:
                    continue
                for assign in assigns:
                    chain = self.chain(assign.value)
                    if chain is not None:
                        self.ps_vars.add(key)
                        changed = True
                        break

    def chain(self, expr: ast.expr) -> Chain | None:
        ops: list[ast.expr] = []
        node = expr
        while True:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in OPS:
                ops.append(node)
                node = node.func.value
            elif isinstance(node, ast.Attribute) and node.attr == "T":
                ops.append(node)
                node = node.value
            else:
                break
        if isinstance(node, ast.Call) and self._is_ps(node.func):
            return Chain(expr, node, ops[::-1])
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and self.var_key(node) in self.ps_vars:
            return Chain(expr, node, ops[::-1])
        return None

    def maximal_chains(self) -> list[Chain]:
        found = []
        for node in self.module.nodes:
            if not isinstance(node, ast.expr):
                continue
            chain = self.chain(node)
            if chain is None:
                continue
            parent = self.module.parent_of(node)
            if isinstance(parent, ast.Attribute) and parent.attr == "T":
                continue
            if isinstance(parent, ast.Attribute) and parent.attr in OPS:
                grand = self.module.parent_of(parent)
                if isinstance(grand, ast.Call) and grand.func is parent:
                    continue
            found.append(chain)
        return found

    # -- evaluation --------------------------------------------------------------------------

    def device_shape(self, d: ast.expr, seen=frozenset()) -> tuple[tuple[int | None, ...], bool]:
        """(shape, is_ndarray) of a device collection, or Unprovable."""
        if isinstance(d, ast.Call):
            name = self.module.names.qualified_name(d.func)
            if name in DEVICE_LISTS:
                return (None,), False
            if name in CREATE_DEVICE_MESH and d.args:
                shape = literal_ints(d.args[0])
                if shape is not None and all(n > 0 for n in shape):
                    return shape, True
        if isinstance(d, ast.Subscript) and isinstance(d.slice, ast.Slice):
            if isinstance(d.value, ast.Call) and self.module.names.qualified_name(d.value.func) in DEVICE_LISTS:
                return (None,), False
        if isinstance(d, (ast.List, ast.ListComp)):
            elts = [d.elt] if isinstance(d, ast.ListComp) else d.elts
            if elts and all(self._is_one_device(e, seen) for e in elts):
                if isinstance(d, ast.ListComp) and len(d.generators) != 1:
                    raise Unprovable("a nested comprehension of devices")
                return ((len(elts),) if isinstance(d, ast.List) else (None,)), False
        if isinstance(d, ast.Name) and id(d) not in seen:
            bindings = self.module.names.bindings(d)
            results = set()
            for b in bindings:
                if not isinstance(b, ValueBinding):
                    break
                results.add(self.device_shape(b.value, seen | {id(d)}))
            else:
                if len(results) == 1:
                    return results.pop()
        raise Unprovable("the devices' shape is not known statically (use jax.devices(), "
                         "jax.local_devices() or mesh_utils.create_device_mesh(<literal shape>))")

    def _is_one_device(self, e: ast.expr, seen: frozenset) -> bool:
        """``devices[i]`` where ``devices`` is a 1-D device list: one device, not a row."""
        if not (isinstance(e, ast.Subscript) and not isinstance(e.slice, (ast.Slice, ast.Tuple))):
            return False
        try:
            shape, _ = self.device_shape(e.value, seen)
        except Unprovable:
            return False
        return len(shape) == 1

    def fresh_var(self, key: tuple, seen: frozenset = frozenset()) -> bool:
        if key in seen:
            return False
        for assign in self.assigns.get(key, []):
            chain = self.chain(assign.value)
            if chain is None:
                return False
            if not self.fresh_chain(chain, seen | {key}):
                return False
        return True

    def fresh_chain(self, chain: Chain, seen: frozenset) -> bool:
        if chain.ops:
            last = chain.ops[-1]
            return isinstance(last, ast.Call) and last.func.attr == "reshape"  # type: ignore[union-attr]
        if isinstance(chain.base, ast.Name):
            return self.fresh_var(self.var_key(chain.base), seen)
        return True

    def shapes(self, chain: Chain, total: int | None) -> list[tuple[int | None, ...]]:
        """The grid shapes this chain puts its device list in (for the component's mesh); with
        ``total`` None, reshapes with -1 are left out (they need the device count)."""
        out = []
        if isinstance(chain.base, ast.Call) and len(chain.base.args) == 1:
            out.append(self.device_shape(chain.base.args[0])[0])
        for op in chain.ops:
            if not (isinstance(op, ast.Call) and op.func.attr == "reshape"):  # type: ignore[union-attr]
                break  # later reshapes reshape a grid of device sets, not the device list
            try:
                out.append(self._reshape(op, total))
            except Unprovable:
                if total is not None:
                    raise
        return out

    def mesh_code(self, ctor: ast.Call, axes: Axes) -> str:
        if ctor.keywords or len(ctor.args) != 1 or isinstance(ctor.args[0], ast.Starred):
            raise Unprovable("PositionalSharding(...) with memory_kind= or unusual arguments")
        d = ctor.args[0]
        shape, is_array = self.device_shape(d)
        dev = self.module.segment(d)
        mesh = self.namer.sharding("Mesh")
        if shape == axes.sizes or axes.sizes == (None,):
            return f"{mesh}({dev}, {_tuple(axes.names)})"
        flat = dev if is_array else f"{self.namer.numpy()}.array({dev})"
        return f"{mesh}({flat}.reshape({', '.join(map(str, axes.sizes))}), {_tuple(axes.names)})"

    def evaluate(self, chain: Chain, axes: Axes) -> State:
        base = chain.base
        ops = list(chain.ops)
        state: State | None
        if isinstance(base, ast.Call):
            state = axes.fresh(self.device_shape(base.args[0])[0])
        else:
            first = ops[0] if ops else None
            if isinstance(first, ast.Call) and first.func.attr == "reshape":  # type: ignore[union-attr]
                if not self.fresh_var(self.var_key(base)):
                    raise Unprovable(f"`{base.id}` may hold a replicated or transposed sharding here, "
                                     "and reshaping that is not a mesh")
                state = None
            elif first is None or _replicates_all(first):
                state = None  # the result does not depend on the grid's shape
            else:
                state = self.reaching_state(base, axes)
        for op in ops:
            if isinstance(op, ast.Attribute) or op.func.attr == "transpose":  # type: ignore[union-attr]
                perm = self._perm(op, state)
                if perm != tuple(range(len(state.shape))):  # type: ignore[union-attr]
                    state = State(tuple(state.shape[i] for i in perm), tuple(state.spec[i] for i in perm), False)  # type: ignore[union-attr]
            elif op.func.attr == "reshape":  # type: ignore[union-attr]
                if state is not None and not state.fresh:
                    raise Unprovable("reshape of a replicated or transposed PositionalSharding is not a mesh")
                total = None if axes.sizes == (None,) else math.prod(axes.sizes)  # type: ignore[arg-type]
                state = axes.fresh(self._reshape(op, total))
            else:
                state = self._replicate(op, state)
        if state is None:
            raise AssertionError("unreachable: a chain with ops has a state")
        return state

    def _args(self, call: ast.Call) -> str:
        start = self.module.span(call.args[0])[0]
        end = self.module.span(call.args[-1])[1]
        return self.module.text[start:end]

    def _reshape(self, call: ast.Call, total: int | None) -> tuple[int, ...]:
        if call.keywords or not call.args:
            raise Unprovable("reshape with keywords or no shape")
        if len(call.args) == 1:
            shape = literal_ints(call.args[0])
        else:
            ints = [literal_ints(a) for a in call.args]
            shape = None if any(i is None or len(i) != 1 for i in ints) else tuple(i[0] for i in ints)  # type: ignore[index]
        if shape is None:
            raise Unprovable("reshape to a shape that is not a literal")
        if -1 in shape:
            rest = math.prod(n for n in shape if n != -1)
            if total is None or shape.count(-1) != 1 or rest == 0 or total % rest:
                raise Unprovable("reshape with -1 where the device count is not known statically")
            shape = tuple(total // rest if n == -1 else n for n in shape)
        if any(n <= 0 for n in shape) or (total is not None and math.prod(shape) != total):
            raise Unprovable("reshape to a shape that does not match the device count")
        return shape

    def _replicate(self, call: ast.Call, state: State | None) -> State:
        params = dict(zip(("axis", "keepdims"), call.args))
        for kw in call.keywords:
            if kw.arg not in ("axis", "keepdims") or kw.arg in params:
                raise Unprovable("replicate with unexpected arguments")
            params[kw.arg] = kw.value
        keep = params.get("keepdims")
        if keep is not None and not (isinstance(keep, ast.Constant) and isinstance(keep.value, bool)):
            raise Unprovable("replicate(keepdims=...) that is not a literal bool")
        keepdims = True if keep is None else keep.value
        axis = params.get("axis")
        if axis is None or isinstance(axis, ast.Constant) and axis.value is None:
            if state is None:  # every dim replicated: the same whatever the grid
                return State((), (), False) if not keepdims else State((1,), ((),), False)
            axes = tuple(range(len(state.shape)))
        else:
            if state is None:
                raise AssertionError("unreachable")
            values = literal_ints(axis)
            if values is None:
                raise Unprovable("replicate(axis) that is not a literal")
            ndim = len(state.shape)
            if any(not -ndim <= a < ndim for a in values):
                raise Unprovable("replicate(axis) out of range for the grid")
            axes = tuple(sorted({a % ndim for a in values}))
        shape = list(state.shape)
        spec = list(state.spec)
        for a in axes:
            shape[a], spec[a] = 1, ()
        if not keepdims:
            shape = [n for i, n in enumerate(shape) if i not in axes]
            spec = [s for i, s in enumerate(spec) if i not in axes]
        fresh = state.fresh and all(state.shape[a] == 1 for a in axes) and keepdims
        return State(tuple(shape), tuple(spec), fresh)

    def _perm(self, op: ast.expr, state: State | None) -> tuple[int, ...]:
        if state is None:
            raise AssertionError("unreachable")
        ndim = len(state.shape)
        if isinstance(op, ast.Attribute) or not op.args:  # .T / .transpose()
            if isinstance(op, ast.Call) and op.keywords:
                raise Unprovable("transpose with keywords")
            return tuple(reversed(range(ndim)))
        if len(op.args) == 1:
            perm = literal_ints(op.args[0])
        else:
            ints = [literal_ints(a) for a in op.args]
            perm = None if any(i is None or len(i) != 1 for i in ints) else tuple(i[0] for i in ints)  # type: ignore[index]
        if perm is None or sorted(p % ndim for p in perm) != list(range(ndim)):
            raise Unprovable("transpose axes that are not a literal permutation")
        return tuple(p % ndim for p in perm)

    def reaching_state(self, name: ast.Name, axes: Axes) -> State:
        key = self.var_key(name)
        assigns = self.assigns.get(key, [])
        if id(name) in self._state_stack:
            raise Unprovable(f"`{name.id}` is defined in terms of itself")
        self._state_stack.add(id(name))
        try:
            states = {self.evaluate(self.chain(a.value), axes) for a in assigns}  # type: ignore[arg-type]
            shapes = {(s.shape, s.spec) for s in states}
            if len(shapes) == 1:
                return states.pop()
            reaching = reaching_assignment(self.module, name, assigns)
            if reaching is None:
                raise Unprovable(f"`{name.id}` holds differently shaped shardings and which one reaches "
                                 "this use is unclear")
            return self.evaluate(self.chain(reaching.value), axes)  # type: ignore[arg-type]
        finally:
            self._state_stack.discard(id(name))



def _edit(planner: PositionalPlanner, chain: Chain, axes: Axes) -> list[Edit]:
    module = planner.module
    if isinstance(chain.base, ast.Call) and planner._is_ps(chain.base.func) == "ambiguous":
        raise Unprovable("the name may also refer to a local definition")
    parent_node = module.parent_of(chain.node)
    if isinstance(parent_node, ast.Attribute) and parent_node.attr not in SAME_ATTRS:
        raise Unprovable(f"`.{parent_node.attr}` means something else on a NamedSharding")
    if isinstance(chain.base, ast.Name) and not chain.ops:
        return []  # the variable itself: its value is rewritten where it is bound
    if module.has_comment(chain.node):
        raise Unprovable("a comment inside the expression would be lost")
    state = planner.evaluate(chain, axes)
    if isinstance(chain.base, ast.Call):
        mesh = planner.mesh_code(chain.base, axes)
    else:
        mesh = f"{chain.base.id}.mesh"
    ns = planner.namer.sharding("NamedSharding")
    p = planner.namer.sharding("PartitionSpec", "P")
    return [Edit(*module.span(chain.node), f"{ns}({mesh}, {p}({_spec(state.spec)}))")]


def _replicates_all(op: ast.expr) -> bool:
    if not (isinstance(op, ast.Call) and isinstance(op.func, ast.Attribute) and op.func.attr == "replicate"):
        return False
    axis = op.args[0] if op.args else next((k.value for k in op.keywords if k.arg == "axis"), None)
    return axis is None or isinstance(axis, ast.Constant) and axis.value is None


def _tuple(names: tuple[str, ...]) -> str:
    inner = ", ".join(f'"{n}"' for n in names)
    return f"({inner},)" if len(names) == 1 else f"({inner})"


def _spec(spec: tuple[tuple[str, ...], ...]) -> str:
    if not any(spec):
        return ""
    return ", ".join("None" if not s else f'"{s[0]}"' if len(s) == 1 else _tuple(s) for s in spec)


def plan_positional(module: ParsedModule, plan: Plan, sites: frozenset[tuple[int, int]] | None) -> list[Site]:
    planner = PositionalPlanner(module, plan)
    planner.discover()
    if not planner.ctors:
        return [Site(*module.position(n), False, why) for n, why in planner.bad_mentions]
    chains = planner.maximal_chains()

    # Components: a variable, the chains that bind it and the chains that read it move together.
    parent: dict[object, object] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def union(a, b):
        parent[find(a)] = find(b)

    def base_key(chain: Chain):
        return ("ctor", id(chain.base)) if isinstance(chain.base, ast.Call) else ("var", planner.var_key(chain.base))

    for chain in chains:
        find(base_key(chain))
        assign = planner.module.parent_of(chain.node)
        if isinstance(assign, ast.Assign) and assign.value is chain.node and id(assign) in planner.var_of_assign:
            union(base_key(chain), ("var", planner.var_of_assign[id(assign)]))
    reasons: dict[object, str] = {}
    edits: dict[object, list[Edit]] = {}
    for key in planner.ps_vars:
        for assign in planner.assigns[key]:
            if planner.chain(assign.value) is None:
                reasons.setdefault(find(("var", key)), "the variable is also bound to something that is not a PositionalSharding")
        probe = planner.assigns[key][0].targets[0]
        for b in module.names.bindings(probe):  # type: ignore[arg-type]
            if not isinstance(b, ValueBinding):
                reasons.setdefault(find(("var", key)), "the variable is also bound by a loop, parameter or import")
    by_comp: dict[object, list[Chain]] = {}
    for chain in chains:
        by_comp.setdefault(find(base_key(chain)), []).append(chain)
    for comp, members in by_comp.items():
        try:
            shapes = [shape for chain in members for shape in planner.shapes(chain, None)]
            total = mesh_axes(shapes).sizes
            if total != (None,):
                shapes = [shape for chain in members for shape in planner.shapes(chain, math.prod(total))]  # type: ignore[arg-type]
            axes = mesh_axes(shapes)
        except Unprovable as exc:
            reasons.setdefault(comp, str(exc))
            continue
        for chain in members:
            try:
                edits.setdefault(comp, []).extend(_edit(planner, chain, axes))
            except Unprovable as exc:
                reasons.setdefault(comp, str(exc))

    out: list[Site] = []
    seen: dict[tuple[int, int], Site] = {}
    for ctor in sorted(planner.ctors, key=lambda c: (c.lineno, c.col_offset)):
        comp = find(("ctor", id(ctor)))
        reason = reasons.get(comp)
        positions = module.mention_positions(ctor.func)
        selected = sites is None or bool(positions & sites)
        if reason is None and selected and comp in edits:
            plan.edits.extend(edits.pop(comp))
        for pos in sorted(positions):
            previous = seen.get(pos)
            if previous is not None and (not previous.rewritable or reason is None):
                continue
            why = reason  # per position: prefixing `reason` itself piled one prefix on per alias
            if reason is not None and pos != module.position(ctor.func):
                # An import alias stands for every call through it: say which one is kept.
                why = f"the use on line {ctor.lineno} is kept: {reason}"
            seen[pos] = Site(*pos, reason is None, why)
    for name, qual in ((n, q) for q in PS_NAMES for n in [q.rpartition(".")[2]]):
        plan.remove_imports.add((qual.rpartition(".")[0], name, None))
        for binding, _scope in module.names.imports():
            if binding.qualname == qual and binding.node.asname:
                plan.remove_imports.add((qual.rpartition(".")[0], name, binding.node.asname))
    out.extend(seen.values())
    out.extend(Site(*module.position(n), False, why) for n, why in planner.bad_mentions)
    return sorted(set(out), key=lambda s: (s.line, s.column))
