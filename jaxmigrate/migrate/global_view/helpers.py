"""The program's own helpers that add or read pmap's leading device axis, known by their bodies.

Training programs replicate and unreplicate with two-line helpers of their own more often than with
flax's::

    def replicate(tree):
        n = jax.local_device_count()
        return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)

    unreplicate = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)

A helper is summarised by what its body does to its one parameter, never by its name: a ``def``
or a lambda bound to a name, taking one positional parameter, whose body (after assignments that do
not read the parameter, and leaf functions) returns either a tree map over the parameter (of a
lambda or of a leaf function defined beside it) of a per-leaf expression the
driving code recognises (``shapes.DeviceAxisShapes.leaf_action``: a broadcast, stack or array
of ``[x] * n`` onto a leading device-count axis, maybe laid out one copy per local device with
``jax.device_put`` on a mesh, a device-count reshape, ``x[0]``), or that
expression applied to the parameter itself. The summary is that action: ``replicate``, ``shard`` or
``index``; a call of the helper is then rewritten like the call it stands for. A replicate may take
a second parameter, read as the device list (``device_put_replicated(x, devices)``, as the programs
that replaced JAX's removed function with one of their own write it): a call of it is the
helper's only where it passes every local device there; it may stack the copies in one tree map
and lay them out one per device in a second.

A helper may live in another module of the program (``from utils import replicate``,
``common.unreplicate(state)``): that module is found from the file being checked as Python's import
finds it (``program_modules``), parsed once per content, and its module-level helper summarised
the same way, with its own imports. The helper itself stays where it is (other modules may call it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from jaxmigrate import program_modules
from jaxmigrate.core.flow import enclosing_scope
from jaxmigrate.lint.patterns import TREE_MAPS
from jaxmigrate.migrate.global_view.shapes import DeviceAxisShapes, is_name
from jaxmigrate.names import ImportBinding, OpaqueBinding, ValueBinding

_REPLICATE = "flax.jax_utils.replicate"
_AS_ARRAY = frozenset({"jax.numpy.asarray", "numpy.asarray"})
_SHARD_PRNG_KEY = "flax.training.common_utils.shard_prng_key"

@dataclass(frozen=True, eq=False)
class Helper:
    """A function of the module that adds or reads the device axis of its one argument."""

    name: str
    fn: ast.FunctionDef | ast.Lambda | None  # None: a helper of another module
    statement: ast.stmt | None  # the def, or the assignment binding the lambda (None: another module's)
    action: str  # replicate | shard | index
    defined_in: str | None = None  # the file of another module that defines it
    # What its second parameter is, if it takes one: "devices", the device list
    # (`device_put_replicated(x, devices)`), or "count", the device count (`shard(x, n)`). A call
    # is the helper's only where it passes every local device, or their count, there.
    takes: str | None = None
    # Whether it acts on each leaf of a tree map (`tree_map(lambda x: x[0], tree)`), or on its
    # argument itself (`return x[0]`: device 0's copy only of one array, of a tuple its first part).
    per_leaf: bool = True


class HelperSummaries:
    """The helper (if any) each call calls; one summary per function, computed when first asked."""

    def __init__(self, module) -> None:
        self.module = module
        self.shapes = DeviceAxisShapes(module)
        self.leaf_action = self.shapes.leaf_action
        self._summaries: dict[int, tuple[str, str | None] | None] = {}  # (``_summarise``)

    def of_call(self, call: ast.Call) -> Helper | None:
        if len(call.args) + len(call.keywords) not in (1, 2) or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        helper = self.of_function(call.func)
        given = arguments(helper, call) if helper is not None else None
        if given is None or (helper.takes is None) != (len(given) == 1):
            return None
        if helper.takes == "devices" and not self.shapes.is_every_local_device(given[1]) \
                or helper.takes == "count" and not self.shapes.is_device_count(given[1]):
            return None
        return helper

    def of_function(self, func: ast.expr) -> Helper | None:
        """The helper ``func`` names (called, or given to ``map``)."""
        if isinstance(func, ast.Attribute):
            return self._imported(func, self.module.names.qualified_name(func))
        if not isinstance(func, ast.Name):
            return None
        bindings = self.module.names.bindings(func)
        if len(bindings) != 1:
            return None  # rebound, or not bound here: which function runs is not known
        if isinstance(bindings[0], ImportBinding):
            return self._imported(func, bindings[0].qualname)
        return self._own(func.id, bindings[0])

    def of_leaf_function(self, func: ast.Name) -> Helper | None:
        """The function a tree map is given by name, when it adds or reads the device axis of the
        one leaf it takes (``replicate_array = lambda x: np.broadcast_to(x, (n,) + x.shape)``)."""
        bindings = self.module.names.bindings(func)
        if len(bindings) != 1:
            return None
        binding = bindings[0]
        if isinstance(binding, OpaqueBinding) and isinstance(binding.node, ast.FunctionDef):
            fn, statement = binding.node, binding.node
        elif isinstance(binding, ValueBinding) and isinstance(binding.value, ast.Lambda):
            fn, statement = binding.value, self.module.parent_of(binding.value)
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                return None
        else:
            return None
        parts = _leaf_parts(fn)
        if parts is None or parts[1]:  # (one return, nothing before it)
            return None
        action = self.leaf_action(parts[2], parts[0])
        return Helper(func.id, fn, statement, action) if action else None

    def of_module_name(self, name: str) -> Helper | None:
        """The helper a module-level name of this module is, if it is one (bound once)."""
        bindings = self.module.names.module_scope.bindings.get(name, [])
        return self._own(name, bindings[0]) if len(bindings) == 1 else None

    def _own(self, name: str, binding) -> Helper | None:
        if isinstance(binding, OpaqueBinding) and isinstance(binding.node, ast.FunctionDef):
            fn, statement = binding.node, binding.node
        elif isinstance(binding, ValueBinding) and isinstance(binding.value, ast.Lambda):
            fn, statement = binding.value, self.module.parent_of(binding.value)
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                return None
        else:
            return None
        if id(fn) not in self._summaries:
            self._summaries[id(fn)] = self._summarise(fn)
        summary = self._summaries[id(fn)]
        return Helper(name, fn, statement, summary[0], takes=summary[1], per_leaf=self._maps_leaves(fn)) \
            if summary else None

    def _maps_leaves(self, fn: ast.FunctionDef | ast.Lambda) -> bool:
        """Whether the helper returns a tree map (its action is on each leaf)."""
        result = fn.body if isinstance(fn, ast.Lambda) else _without_docstring(fn.body)[-1].value
        return isinstance(result, ast.Call) and self.module.names.qualified_name(result.func) in TREE_MAPS

    def replicate_method(self, call: ast.Call) -> tuple[Helper, tuple[str, ...]] | None:
        """``state.replicate()`` of an object a class of this module makes, whose method of that
        name returns ``flax.jax_utils.replicate(self)``, maybe ``.replace(f=shard_prng_key(self.f))``
        (the Hugging Face examples' ``TrainState``): the method, and the fields it gives one key per
        device; None where the call is not such a replication."""
        func = call.func
        if call.args or call.keywords or not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return None
        classes = {id(c): c for c in self._classes_made(func.value)}
        if len(classes) != 1:
            return None
        method = next((m for m in next(iter(classes.values())).body
                       if isinstance(m, ast.FunctionDef) and m.name == func.attr), None)
        if method is None or method.decorator_list or len(method.args.args) != 1 or method.args.vararg \
                or method.args.kwarg or method.args.kwonlyargs or method.args.posonlyargs:
            return None
        body = _without_docstring(method.body)
        if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
            return None
        me, result, keys = method.args.args[0].arg, body[0].value, []
        if isinstance(result.func, ast.Attribute) and result.func.attr == "replace" and not result.args:
            for keyword in result.keywords:
                value = keyword.value
                if not (keyword.arg and isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords
                        and self.module.names.qualified_name(value.func) == _SHARD_PRNG_KEY
                        and _is_attribute_of(value.args[0], me, keyword.arg)):
                    return None
                keys.append(keyword.arg)
            result = result.func.value
        if not (isinstance(result, ast.Call) and len(result.args) == 1 and not result.keywords
                and isinstance(result.args[0], ast.Name) and result.args[0].id == me
                and self.module.names.qualified_name(result.func) == _REPLICATE):
            return None
        return Helper(method.name, method, method, "replicate"), tuple(keys)

    def _classes_made(self, name: ast.Name) -> list[ast.ClassDef]:
        """The classes of this module that the assignments of ``name`` construct (``Cls(...)`` or
        ``Cls.create(...)``, there or returned by a function of the module, as a
        ``create_train_state`` returns its state); its other assignments (a step's outputs) keep
        the object's class. Empty where a function it is made by may return anything else."""
        found = []
        for binding in self.module.names.bindings(name):
            value = getattr(binding, "value", None)
            if not isinstance(value, ast.Call):
                continue
            made = self._constructed(value)
            if made is None:
                maker = value.func if isinstance(value.func, ast.Name) else None
                functions = [b.node for b in self.module.names.bindings(maker) if isinstance(b, OpaqueBinding)
                             and isinstance(b.node, ast.FunctionDef)] if maker is not None else []
                if len(functions) != 1:
                    continue
                returns = [r.value for r in ast.walk(functions[0]) if isinstance(r, ast.Return)
                           and enclosing_scope(self.module, r) is functions[0]]
                made = [self._constructed(r) if isinstance(r, ast.Call) else None for r in returns]
                if not made or None in made:
                    return []
                made = [c for classes in made for c in classes]
            found += made
        return found

    def _constructed(self, call: ast.Call) -> list[ast.ClassDef] | None:
        """The class of this module ``call`` constructs (``Cls(...)`` / ``Cls.create(...)``), if it does."""
        maker = call.func.value if isinstance(call.func, ast.Attribute) and call.func.attr == "create" else call.func
        if not isinstance(maker, ast.Name):
            return None
        classes = [b.node for b in self.module.names.bindings(maker)
                   if isinstance(b, OpaqueBinding) and isinstance(b.node, ast.ClassDef)]
        return classes or None

    def _imported(self, func: ast.expr, qualified: str | None) -> Helper | None:
        """A helper another module of the program defines (or imports from one, re-exported)."""
        found = program_modules.definition(qualified) if qualified is not None else None
        if found is None:
            return None
        other = found.module.shared.get("helper_summaries")
        if other is None:
            other = found.module.shared["helper_summaries"] = HelperSummaries(found.module)
        helper = other.of_module_name(found.name)
        if helper is None:
            return None
        short = func.id if isinstance(func, ast.Name) else ast.unparse(func)
        return Helper(short, None, None, helper.action, str(found.path), helper.takes, helper.per_leaf)

    def _summarise(self, fn: ast.FunctionDef | ast.Lambda) -> tuple[str, str | None] | None:
        """(what the helper does, what its second parameter is: ``Helper.takes``), or None."""
        if isinstance(fn, ast.Lambda):
            param = only_parameter(fn.args)
            action = self._action(fn.body, param, self.shapes) if param is not None else None
            return (action, None) if action else None
        params = _plain_parameters(fn.args)
        if fn.decorator_list or params is None or len(params) not in (1, 2):
            return None
        body = _without_docstring(fn.body)
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        result, staged = body[-1].value, _staged(body, params[0])
        if not _computed_aside([s for s in body[:-1] if s is not staged], params[0]):
            return None
        leaves = {s.name: s for s in body[:-1] if isinstance(s, ast.FunctionDef)}

        def action(shapes: DeviceAxisShapes) -> str | None:
            if staged is None:
                return self._action(result, params[0], shapes, leaves)
            # `copies = tree.map(<copies>, tree)`, then `return tree.map(lambda x: jax.device_put(x,
            # sharding), copies)`: the copies laid out one per device, in two passes
            placed = result.args[0] if isinstance(result.args[0], ast.Lambda) else None
            leaf = only_parameter(placed.args) if placed is not None else None
            if leaf is None or not shapes.is_placed_per_device(placed.body, leaf):
                return None
            return "replicate" if self._action(staged.value, params[0], shapes, leaves) == "replicate" else None

        if len(params) == 1:
            found = action(self.shapes)
            return (found, None) if found else None
        # A second parameter is read as the device list JAX's `device_put_replicated` took, or as
        # the device count a split or copies take: its calls are the helper's only where they pass
        # that (`of_call`).
        second = frozenset({id(fn.args.args[1])})
        if action(DeviceAxisShapes(self.module, devices=second)) == "replicate":
            return "replicate", "devices"
        found = action(DeviceAxisShapes(self.module, counts=second))
        return (found, "count") if found in ("replicate", "shard") else None

    def _leaf_function(self, fn: ast.FunctionDef) -> tuple[str, ast.expr, list[ast.stmt]] | None:
        """(its leaf, what it returns, the statements before) of a leaf function ``def`` of one
        return, maybe after the leaf made an array of itself (``x = jnp.asarray(x)``, the values it
        holds) and sizes computed from its shape (``_sizes``)."""
        parts = _leaf_parts(fn)
        if parts is None:
            return None
        leaf, steps, returned = parts
        for statement in steps:
            if _sizes(statement, leaf):
                continue
            value = statement.value if _rebinds(statement, leaf) else None
            if not (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords
                    and is_name(value.args[0], leaf) and self.module.names.qualified_name(value.func) in _AS_ARRAY):
                return None
        return leaf, returned, steps

    def _action(self, result: ast.expr, param: str, shapes: DeviceAxisShapes,
                leaves: dict[str, ast.FunctionDef] | None = None) -> str | None:
        """What ``result`` does to ``param``: the leaf action of a tree map over it of a lambda or
        of a leaf function defined beside it (``leaves``), or of ``result`` itself."""
        if isinstance(result, ast.Call) and self.module.names.qualified_name(result.func) in TREE_MAPS \
                and len(result.args) == 2 and not result.keywords \
                and isinstance(result.args[1], ast.Name) and result.args[1].id == param:
            fn = result.args[0]
            if isinstance(fn, ast.Name) and leaves and fn.id in leaves:
                read = self._leaf_function(leaves[fn.id])
                action = shapes.leaf_action(read[1], read[0]) if read is not None else None
                # (a split after the leaf is prepared, `x = np.asarray(x)`, is a ``Preparer``'s, whose
                # preparation stays)
                return None if action == "shard" and not all(_sizes(s, read[0]) for s in read[2]) else action
            leaf = only_parameter(fn.args) if isinstance(fn, ast.Lambda) else None
            return shapes.leaf_action(fn.body, leaf) if leaf is not None else None
        return shapes.leaf_action(result, param)



@dataclass(frozen=True, eq=False)
class Preparer:
    """A function of the module that prepares a host batch and splits it per device, as flax's
    ImageNet example's ``prepare_tf_data`` does::

        def prepare_tf_data(xs):
            local_device_count = jax.local_device_count()
            def _prepare(x):
                x = x._numpy()
                return x.reshape((local_device_count, -1) + x.shape[1:])
            return jax.tree_util.tree_map(_prepare, xs)

    Mapped over the host batches, it yields them split; in the global view the split (``split``,
    the reshape of ``leaf``, the leaf's own name) goes and the rest of the preparation stays."""

    fn: ast.FunctionDef
    split: ast.Call
    leaf: ast.Name


def batch_preparer(module, shapes, func: ast.expr) -> Preparer | None:
    """The ``Preparer`` ``func`` names: a ``def`` of one parameter whose body (after assignments
    that do not read it, and the leaf function) returns a tree map over it of a leaf function (a
    lambda, or a ``def`` beside it) that may rebind its leaf from itself (``x = x._numpy()``) and
    returns a device-count reshape of it."""
    if not isinstance(func, ast.Name):
        return None
    bindings = module.names.bindings(func)
    if len(bindings) != 1 or not isinstance(bindings[0], OpaqueBinding) \
            or not isinstance(bindings[0].node, ast.FunctionDef):
        return None
    fn = bindings[0].node
    param = only_parameter(fn.args)
    if fn.decorator_list or param is None:
        return None
    body = _without_docstring(fn.body)
    if not body or not isinstance(body[-1], ast.Return) or not isinstance(body[-1].value, ast.Call):
        return None
    result = body[-1].value
    if not (module.names.qualified_name(result.func) in TREE_MAPS and len(result.args) == 2 and not result.keywords
            and isinstance(result.args[1], ast.Name) and result.args[1].id == param):
        return None
    leaf_fn = result.args[0]
    nested = {s.name: s for s in body[:-1] if isinstance(s, ast.FunctionDef)}
    if isinstance(leaf_fn, ast.Name) and leaf_fn.id in nested:
        leaf_fn = nested[leaf_fn.id]
    if not _computed_aside([s for s in body[:-1] if s is not leaf_fn], param):
        return None
    split = _leaf_split(shapes, leaf_fn)
    return Preparer(fn, *split) if split is not None else None


def _leaf_parts(leaf_fn: ast.AST) -> tuple[str, list[ast.stmt], ast.expr] | None:
    """(its one parameter, the statements before its return, what it returns) of a lambda or an
    undecorated ``def`` of one parameter that ends in a ``return`` of a value."""
    if isinstance(leaf_fn, ast.Lambda):
        args, returned, steps = leaf_fn.args, leaf_fn.body, []
    elif isinstance(leaf_fn, ast.FunctionDef) and not leaf_fn.decorator_list:
        body = _without_docstring(leaf_fn.body)
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            return None
        args, returned, steps = leaf_fn.args, body[-1].value, body[:-1]
    else:
        return None
    leaf = only_parameter(args)
    return (leaf, steps, returned) if leaf is not None else None


def arguments(helper: Helper, call: ast.Call) -> list[ast.expr] | None:
    """What ``call`` passes the helper, in its parameters' order: the value, and the device list
    or count it takes, positionally or by its parameter's name (``shard(batch, num_devices=n)``)."""
    given = list(call.args)
    names = [a.arg for a in helper.fn.args.args] if isinstance(helper.fn, ast.FunctionDef) else []
    for keyword in call.keywords:
        if keyword.arg is None or names[len(given):len(given) + 1] != [keyword.arg]:
            return None
        given.append(keyword.value)
    return given


def _sizes(statement: ast.stmt, leaf: str) -> bool:
    """``statement`` computes a size from the leaf's shape and host values, with no call
    (``local_batch_size = x.shape[0] // num_devices``), into a name other than the leaf's."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id != leaf):
        return False
    allowed = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.BinOp, ast.UnaryOp,
               ast.Tuple, ast.operator, ast.unaryop, ast.expr_context)
    return all(isinstance(node, allowed) for node in ast.walk(statement.value)) and all(
        node.attr == "shape" for node in ast.walk(statement.value) if isinstance(node, ast.Attribute))


def _rebinds(statement: ast.stmt, leaf: str) -> bool:
    """``statement`` assigns the leaf itself only (``x = x._numpy()``)."""
    return isinstance(statement, ast.Assign) and len(statement.targets) == 1 and is_name(statement.targets[0], leaf)


def _leaf_split(shapes, leaf_fn) -> tuple[ast.Call, ast.Name] | None:
    """(the reshape, the leaf it reshapes) of a leaf function that returns a device-count reshape
    of its one parameter, maybe rebound first from itself only."""
    parts = _leaf_parts(leaf_fn)
    if parts is None:
        return None
    leaf, steps, returned = parts
    # (`x = x._numpy()`: the leaf prepared, still one array per leaf)
    if not all(_rebinds(statement, leaf) for statement in steps) or shapes.leaf_action(returned, leaf) != "shard":
        return None
    return returned, returned.func.value


def only_parameter(args: ast.arguments) -> str | None:
    """The name of a function's one parameter: positional, no default, nothing else taken."""
    params = _plain_parameters(args)
    return params[0] if params is not None and len(params) == 1 else None


def _staged(body: list[ast.stmt], param: str) -> ast.Assign | None:
    """``copies = jax.tree.map(..., param)`` before ``return jax.tree.map(..., copies)``, the name
    read nowhere else: the one statement of a helper that may read its parameter aside."""
    result = body[-1].value
    if not (isinstance(result, ast.Call) and len(result.args) == 2 and isinstance(result.args[1], ast.Name)):
        return None
    name = result.args[1].id
    staged = [s for s in body[:-1] if isinstance(s, ast.Assign) and len(s.targets) == 1
              and is_name(s.targets[0], name)]
    if len(staged) != 1 or not (isinstance(staged[0].value, ast.Call) and len(staged[0].value.args) == 2
                                and is_name(staged[0].value.args[1], param)):
        return None
    reads = [n for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == name]
    return staged[0] if len(reads) == 2 else None  # (its target and the return's read)


def defaulted(args: ast.arguments) -> set[str]:
    """The names of a function's parameters that have defaults, positional and keyword-only."""
    return {a.arg for a in args.args[len(args.args) - len(args.defaults):]} | {
        a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None}


def _plain_parameters(args: ast.arguments) -> list[str] | None:
    """The names of a function's positional parameters, when it takes nothing else and no defaults."""
    if args.posonlyargs or args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        return None
    return [a.arg for a in args.args]


def _computed_aside(statements: list[ast.stmt], param: str) -> bool:
    """Only host values computed aside (``n = jax.local_device_count()``): assignments to names
    other than ``param`` that do not read it, and leaf functions (a ``def`` that does not read it:
    its own parameter of that name is another variable), so the parameter flows through the
    returned expression alone."""
    def reads(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == param for n in ast.walk(node))

    for statement in statements:
        if isinstance(statement, ast.FunctionDef) and statement.name != param and not statement.decorator_list:
            if param not in (_plain_parameters(statement.args) or []) and any(reads(s) for s in statement.body):
                return False
            continue
        if not (isinstance(statement, ast.Assign)
                and all(isinstance(t, ast.Name) and t.id != param for t in statement.targets)
                and not reads(statement.value)):
            return False
    return True


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return list(body)


def _is_attribute_of(node: ast.expr, owner: str, attr: str) -> bool:
    """``node`` is ``owner.attr``."""
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id == owner
