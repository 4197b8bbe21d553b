"""Whether a value is one array, so that ``x[0]`` of it replicated is device 0's copy.

The driving code reads device 0's copy of a replicated array as ``x[0]``, which the global view
drops. Under pmap, ``x[0]`` of a replicated tuple or list is its first part instead: an optimizer's
state, a step's ``(loss, accuracy)``, a helper's pair. Dropping the index there would put the whole
tuple where its first part was. So the index is dropped only where ``x`` is proven to be one array,
read from where it is made:

- what ``jax.numpy``, ``numpy``, ``jax.nn``, ``jax.random``, an optax loss or ``float`` returns, but
  for the functions that return several arrays (``jnp.split``, ``jnp.linalg.svd``...); a method
  only arrays have (``.astype(...)``), or a reduction (``.mean()``) of a value proven no tuple;
- arithmetic that no tuple or list can do (``a - b``, ``-a``), or does with an array (``a + x.sum()``);
- a collective, a transfer or a replicate of one array; a ``jax.value_and_grad``'s value;
- what a function of the module, a step or a jitted function returns there, with its arguments
  read at the call (a function of another module of the program: read there, with its own imports);
- a parameter annotated as an array, or given one at every call of its function in the module;
- a name every binding of which is one of these.

Anything else (a parameter nothing passes, an attribute, a call of another library) is not proven.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from jaxmigrate import program_modules
from jaxmigrate.core.flow import reaching_assignment, reads_of, statement_of
from jaxmigrate.lint.patterns import TREE_MAPS, own_nodes
from jaxmigrate.migrate.global_view.objects import method_called, method_uses
from jaxmigrate.names import OpaqueBinding, ValueBinding

# Functions of these modules return one array, but for those named in _SEVERAL.
_ARRAY_MODULES = ("jax.numpy.", "numpy.", "jax.nn.", "jax.random.", "jax.scipy.special.")
_SEVERAL = frozenset({
    "split", "array_split", "hsplit", "vsplit", "dsplit", "unstack", "meshgrid", "broadcast_arrays", "ix_",
    "unique", "unique_all", "unique_counts", "unique_inverse", "nonzero", "where", "histogram", "histogram2d",
    "histogramdd", "frexp", "modf", "divmod", "atleast_1d", "atleast_2d", "atleast_3d", "indices",
    "triu_indices", "tril_indices", "diag_indices", "mask_indices", "unravel_index", "polyfit", "gradient",
    "eig", "eigh", "svd", "qr", "slogdet", "lstsq", "vectorize", "frompyfunc", "tree_map", "dtype",
    "finfo", "iinfo", "shape", "broadcast_shapes", "einsum_path",
})
# Methods that only arrays have (no tuple or list has them): an array, or `.item()` a number.
_ARRAY_METHODS = frozenset({
    "astype", "reshape", "squeeze", "ravel", "flatten", "transpose", "argmax", "argmin", "cumsum", "conj",
    "block_until_ready", "item",
})
# An array's reductions, whose names other objects use too (`stats.mean()`): an array where the
# object is proven no tuple or list.
_REDUCTIONS = frozenset({"mean", "sum", "max", "min", "prod", "std", "var", "all", "any", "round", "clip", "dot"})
# `x.at[i].set(v)` and the like.
_AT_METHODS = frozenset({"set", "add", "multiply", "divide", "power", "min", "max", "apply", "get"})
# Calls that give their first argument's structure back: collectives, transfers, replicates.
_SAME_STRUCTURE = frozenset({
    "jax.lax.pmean", "jax.lax.psum", "jax.lax.pmax", "jax.lax.pmin", "jax.lax.all_gather",
    "jax.lax.stop_gradient", "jax.device_get", "jax.device_put", "jax.device_put_replicated",
    "jax.block_until_ready", "flax.jax_utils.replicate", "flax.jax_utils.unreplicate",
})
_JITS = frozenset({"jax.jit", "jax.pmap"})
# ``grad(f)`` and ``value_and_grad(f)`` (which give the value too), by position ``(f, argnums)``.
_GRADS = frozenset({"jax.grad", "equinox.filter_grad"})
_VALUE_AND_GRADS = frozenset({"jax.value_and_grad", "equinox.filter_value_and_grad"})
_SCALARS = frozenset({"float", "int", "bool", "len", "abs", "round"})
_ANNOTATIONS = frozenset({"jax.Array", "jax.numpy.ndarray", "numpy.ndarray", "chex.Array", "jax.typing.ArrayLike"})
_DEPTH = 12  # calls and bindings followed from the value
_STEPS = 2_000  # expressions read for one value, at most

# How much is proven of a value: nothing; that it is no tuple or list (it may be a Python number,
# which repeats a tuple it multiplies); that it is an array.
UNKNOWN, NUMBER, ARRAY = 0, 1, 2

# The def a call of a step runs (``p_step(w, x)``), which only the driving code's analysis knows,
# and whether the call's arguments are its parameters (none bound by a ``partial``); or None.
StepFunction = Callable[[ast.Call], "tuple[ast.FunctionDef, bool] | None"]


class ArrayProof:
    """Proves values one array (see the module's docstring)."""

    def __init__(self, module, step_function: StepFunction = lambda call: None, assumed: frozenset[int] = frozenset()
                 ) -> None:
        self.module = module
        self.names = module.names
        self.step_function = step_function
        self.assumed = assumed  # parameters (by ``id``) taken as annotated arrays (``annotations_needed``)
        self.unannotated: dict[int, ast.arg] = {}  # parameters met, unannotated and not proven by their calls
        self._proving: set[tuple[int, int]] = set()  # (binding, env) being proven
        self._steps = _STEPS

    def one_array(self, node: ast.expr, given: dict | None = None) -> bool:
        """Whether ``node`` is proven one array (or a number); ``given``: what the calls being read
        pass the parameters of the functions it is in (``id`` of a parameter: its argument and
        the ``given`` of the call's own function)."""
        self._steps = _STEPS
        return self._level(node, given or {}, _DEPTH) > UNKNOWN

    def annotations_needed(self, node: ast.expr, given: dict | None = None) -> list[ast.arg]:
        """The unannotated parameters whose annotation as arrays would prove ``node`` one array
        (a finding's hint); empty where annotating them would not."""
        if self.one_array(node, given) or not self.unannotated:
            return []
        params = list(self.unannotated.values())
        again = ArrayProof(self.module, self.step_function, frozenset(map(id, params)))
        return params if again.one_array(node, given) else []

    # -- expressions -----------------------------------------------------------------------

    def _level(self, node: ast.expr, env: dict, depth: int) -> int:
        self._steps -= 1
        if depth <= 0 or self._steps < 0:
            return UNKNOWN  # (not proven: a value made this far away, or by this many ways, blocks)
        depth -= 1
        if isinstance(node, ast.Constant):
            return NUMBER if type(node.value) in (int, float, complex, bool) else UNKNOWN
        if isinstance(node, ast.Name):
            return self._name(node, env, depth)
        if isinstance(node, ast.UnaryOp):  # `-x`, `not x`: no tuple or list is what they give
            return max(NUMBER, self._level(node.operand, env, depth))
        if isinstance(node, ast.Compare):
            return NUMBER
        if isinstance(node, ast.BinOp):
            return self._arithmetic(node, env, depth)
        if isinstance(node, (ast.BoolOp, ast.IfExp)):
            values = node.values if isinstance(node, ast.BoolOp) else [node.body, node.orelse]
            return min(self._level(value, env, depth) for value in values)
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                    and not isinstance(node.slice, ast.Slice):
                return NUMBER  # `x.shape[0]`
            if self._level(node.value, env, depth) == ARRAY:
                return ARRAY  # an index of an array
            index = node.slice
            if isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0:
                return self._part(node.value, [index.value], env, depth)  # `pair[0]`: its first part
            return UNKNOWN
        if isinstance(node, ast.Attribute) and node.attr in ("size", "ndim", "T", "real", "imag"):
            return self._level(node.value, env, depth)
        if isinstance(node, ast.Call):
            return self._call(node, env, depth)
        return UNKNOWN

    def _arithmetic(self, node: ast.BinOp, env: dict, depth: int) -> int:
        left, right = self._level(node.left, env, depth), self._level(node.right, env, depth)
        if isinstance(node.op, (ast.Add, ast.BitOr)):  # a tuple, list or dict joins only its own kind
            return max(left, right)
        if isinstance(node.op, ast.Mult):  # `pair * 2` repeats a tuple; an array times it is an array
            return ARRAY if ARRAY in (left, right) else min(left, right)
        return max(NUMBER, left, right)  # `-`, `/`, `**`, `@`...: no tuple, list or dict does them

    def _call(self, node: ast.Call, env: dict, depth: int) -> int:
        func = node.func
        if isinstance(func, ast.Attribute) and self.names.qualified_name(func) is None:
            if func.attr in _ARRAY_METHODS or func.attr in _REDUCTIONS and self._level(func.value, env, depth):
                return NUMBER if func.attr == "item" else ARRAY
            if func.attr in _AT_METHODS and isinstance(func.value, ast.Subscript) \
                    and isinstance(func.value.value, ast.Attribute) and func.value.value.attr == "at":
                return ARRAY  # `x.at[i].set(v)`
        builtin = self.names.builtin(func)
        if builtin in _SCALARS or builtin == "sum" and len(node.args) == 1 and not node.keywords:
            return NUMBER  # (a `sum` from 0: `sum(pairs, ())` joins tuples)
        qualified = self.names.qualified_name(func) or ""
        if qualified.startswith(_ARRAY_MODULES):
            return UNKNOWN if qualified.rsplit(".", 1)[1] in _SEVERAL else ARRAY
        if qualified.startswith("optax.") and _optax_loss(qualified.rsplit(".", 1)[1]):
            return ARRAY
        if qualified in _SAME_STRUCTURE:
            return self._level(node.args[0], env, depth) if node.args else UNKNOWN
        if qualified in TREE_MAPS and len(node.args) == 2:
            return min(self._maps_to(node.args[0], depth), self._level(node.args[1], env, depth))
        gradient = self._gradient(func)
        if gradient is not None and not gradient[0]:  # `jax.grad(f)(x)`: shaped like x
            return self._argument(node, gradient[2], env, depth)
        return self._returned(node, None, env, depth)

    def _maps_to(self, func: ast.expr, depth: int) -> int:
        """What ``func`` makes of the leaves a tree map gives it: no tuple or list (those are the
        tree's nodes), a number at least."""
        definition = self._function(func)
        if definition is None:
            return UNKNOWN
        args = definition.args
        leaf = (ast.Constant(0), {})
        given = {id(p): leaf for p in [*args.posonlyargs, *args.args]}
        return self._returns(definition, None, given, depth)

    def _argument(self, call: ast.Call, position: int | None, env: dict, depth: int) -> int:
        if position is None or position >= len(call.args) or isinstance(call.args[position], ast.Starred) \
                or any(isinstance(a, ast.Starred) for a in call.args[:position]):
            return UNKNOWN
        return self._level(call.args[position], env, depth)

    # -- names -----------------------------------------------------------------------------

    def _name(self, node: ast.Name, env: dict, depth: int) -> int:
        bindings = self._reaching(node)
        return min((self._assumed(binding, env, depth) for binding in bindings), default=UNKNOWN)

    def _reaching(self, node: ast.Name) -> list:
        """The bindings ``node`` may read: the one assignment that reaches it in straight-line
        code (``w = replicate(w)`` then ``w = p_step(w, x)``), else every binding of the name."""
        bindings = self.names.bindings(node)
        statements = [self._statement(binding) for binding in bindings]
        assigns = [s for s in statements if s is not None]
        reaching = reaching_assignment(self.module, node, assigns) if len(bindings) > 1 else None
        return [b for b, s in zip(bindings, statements) if s is reaching] if reaching is not None else bindings

    def _statement(self, binding) -> ast.stmt | None:
        """The statement that makes ``binding`` (an assignment, a ``for``, a ``with``, a def...);
        None for a parameter, bound before any statement of its function."""
        node = getattr(binding, "value", None) or getattr(binding, "node", None)
        return None if isinstance(node, ast.arg) else statement_of(self.module, node)

    def _assumed(self, binding, env: dict, depth: int) -> int:
        """``_bound``, a binding being proven taken as proven where it reaches itself (``loss =
        jax.lax.pmean(loss, "i")``, ``w = step(w)`` in a loop): its other bindings decide."""
        key = id(getattr(binding, "value", None) or getattr(binding, "node", None)), id(env)
        if key in self._proving:
            return ARRAY
        self._proving.add(key)
        try:
            return self._bound(binding, env, depth)
        finally:
            self._proving.discard(key)

    def _bound(self, binding, env: dict, depth: int) -> int:
        if isinstance(binding, ValueBinding):
            return self._level(binding.value, env, depth)
        node = binding.node if isinstance(binding, OpaqueBinding) else None
        if isinstance(node, ast.arg):
            given = env.get(id(node))
            return self._level(given[0], given[1], depth) if given else self._parameter(node, depth)
        if isinstance(node, ast.Name) and id(node) in env:  # a comprehension's variable
            return self._level(*env[id(node)], depth)
        if isinstance(node, ast.Name):
            path, value = self._unpacking(node)
            return UNKNOWN if value is None else self._part(value, path, env, depth)
        return UNKNOWN

    def _unpacking(self, name: ast.Name) -> tuple[list[int], ast.expr | None]:
        """The positions a (nested) unpacking puts ``name`` at and the value it unpacks:
        ``(loss, logits), grads = f(...)`` puts ``loss`` at ``[0, 0]``."""
        path, node = [], name
        parent = self.module.parent_of(node)
        while isinstance(parent, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in parent.elts):
                return [], None
            path.insert(0, next(i for i, e in enumerate(parent.elts) if e is node))
            node, parent = parent, self.module.parent_of(parent)
        if isinstance(parent, ast.Assign) and path and len(parent.targets) == 1:
            return path, parent.value
        return [], None

    def _part(self, value: ast.expr, path: list[int], env: dict, depth: int) -> int:
        """How much is proven of the part of ``value`` at ``path``."""
        if not path:
            return self._level(value, env, depth)
        if isinstance(value, (ast.Tuple, ast.List)):
            items = value.elts
            if path[0] >= len(items) or any(isinstance(item, ast.Starred) for item in items[:path[0] + 1]):
                return UNKNOWN
            return self._part(items[path[0]], path[1:], env, depth)
        if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension_part(value, path, env, depth)
        if isinstance(value, ast.Name):  # `loss, grads = both`
            return min((self._part(b.value, path, env, depth) if isinstance(b, ValueBinding) else UNKNOWN
                        for b in self._reaching(value)), default=UNKNOWN)
        if not isinstance(value, ast.Call):
            return UNKNOWN
        if self.names.qualified_name(value.func) in _SAME_STRUCTURE and value.args:  # `pmean((loss, grads))`
            return self._part(value.args[0], path, env, depth)
        gradient = self._gradient(value.func)
        if gradient is None or not gradient[3]:
            return self._returned(value, path, env, depth)
        has_aux, function, argnums, _ = gradient  # value_and_grad gives `(what f returns, grads)`
        if path == [1]:
            return self._argument(value, argnums, env, depth)  # the grads, shaped like the argument
        if path[0] != 0:
            return UNKNOWN
        if path[1:] == ([0] if has_aux else []):
            return ARRAY  # the value: a scalar
        definition = self._function(function)
        return UNKNOWN if definition is None else self._returns(definition, path[1:], {}, depth)

    def _comprehension_part(self, value: ast.ListComp | ast.GeneratorExp, path: list[int], env: dict,
                            depth: int) -> int:
        """``[f(x) for x in (a, b)]`` unpacked: its item at ``path[0]`` is ``f`` of that item."""
        if len(value.generators) != 1:
            return UNKNOWN
        loop = value.generators[0]
        items = loop.iter.elts if isinstance(loop.iter, (ast.Tuple, ast.List)) else []
        if loop.ifs or loop.is_async or not isinstance(loop.target, ast.Name) or path[0] >= len(items) \
                or any(isinstance(item, ast.Starred) for item in items):
            return UNKNOWN
        inner = {**env, id(loop.target): (items[path[0]], env)}
        return self._part(value.elt, path[1:], inner, depth)

    def _gradient(self, func: ast.expr) -> tuple[bool, ast.expr, int | None, bool] | None:
        """``has_aux``, ``f``, ``argnums`` (an int, else None) and whether it gives the value too,
        where ``func`` is ``jax.grad(f, ...)`` or ``jax.value_and_grad(f, ...)`` (or equinox's
        filtered ones), or a name bound once to one; None where it is not, or ``has_aux`` is not
        a literal."""
        if isinstance(func, ast.Name):
            bindings = self.names.bindings(func)
            if len(bindings) != 1 or not isinstance(bindings[0], ValueBinding):
                return None
            func = bindings[0].value
        if not isinstance(func, ast.Call):
            return None
        qualified = self.names.qualified_name(func.func)
        positional = 1 if qualified and qualified.startswith("equinox.") else 2  # (equinox's: no argnums)
        if qualified not in _GRADS | _VALUE_AND_GRADS or not 1 <= len(func.args) <= positional \
                or any(k.arg is None or isinstance(k.value, ast.Starred) for k in func.keywords):
            return None
        options = {k.arg: k.value for k in func.keywords}
        if len(func.args) == 2:
            options["argnums"] = func.args[1]
        aux = options.get("has_aux", ast.Constant(False))
        argnums = options.get("argnums", ast.Constant(0))
        if not isinstance(aux, ast.Constant):
            return None
        position = argnums.value if isinstance(argnums, ast.Constant) and type(argnums.value) is int else None
        return bool(aux.value), func.args[0], position, qualified in _VALUE_AND_GRADS

    # -- functions -------------------------------------------------------------------------

    def _returned(self, call: ast.Call, path: list[int] | None, env: dict, depth: int) -> int:
        """How much is proven of what ``call`` returns (its part at ``path``): a step's, a jitted
        function's or a function's of the module, read with the arguments of the call."""
        definition, aligned = self.step_function(call) or (self._function(call.func), True)
        if definition is None:
            return self._returned_elsewhere(call, path, depth)
        given = self._arguments(definition, call, env) if aligned else None
        return self._returns(definition, path, given or {}, depth)

    def _returned_elsewhere(self, call: ast.Call, path: list[int] | None, depth: int) -> int:
        """What a function of another module of the program returns (``losses.l2(params)``), read
        there with that module's imports (its parameters not known)."""
        qualified = self.names.qualified_name(call.func)
        other = program_modules.definition(qualified) if qualified else None
        definition = getattr(other.binding, "node", None) if other is not None else None
        if not isinstance(definition, ast.FunctionDef):
            return UNKNOWN
        there = ArrayProof(other.module)
        if not all(there._jit(d) for d in definition.decorator_list):
            return UNKNOWN
        return there._returns(definition, path, {}, depth)

    def _returns(self, definition: ast.FunctionDef | ast.Lambda, path: list[int] | None, given: dict,
                 depth: int) -> int:
        if isinstance(definition, ast.Lambda):
            return self._part(definition.body, path or [], given, depth)
        returns = [node for node in own_nodes(definition.body) if isinstance(node, ast.Return)]
        return min((UNKNOWN if r.value is None else self._part(r.value, path or [], given, depth)
                    for r in returns), default=UNKNOWN)

    def _function(self, func: ast.expr) -> ast.FunctionDef | ast.Lambda | None:
        """The def (or lambda) a call of ``func`` runs, its result as the def returns it: a
        function of the module, undecorated or jitted, ``jax.jit(f)`` or a name bound once to it."""
        if isinstance(func, ast.Lambda):
            return func
        if isinstance(func, ast.Call) and self.names.qualified_name(func.func) in _JITS and func.args:
            return self._function(func.args[0])
        if not isinstance(func, ast.Name):
            return None
        bindings = self.names.bindings(func)
        if len(bindings) != 1:
            return None
        node = getattr(bindings[0], "node", None)
        if isinstance(node, ast.FunctionDef):
            return node if all(self._jit(d) for d in node.decorator_list) else None
        value = getattr(bindings[0], "value", None)
        return self._function(value) if isinstance(value, (ast.Call, ast.Lambda)) else None

    def _jit(self, decorator: ast.expr) -> bool:
        if isinstance(decorator, ast.Call):  # @partial(jax.jit, ...), @jax.jit(...)
            if self.names.qualified_name(decorator.func) == "functools.partial" and decorator.args:
                decorator = decorator.args[0]
            else:
                decorator = decorator.func
        return self.names.qualified_name(decorator) in _JITS

    def _arguments(self, definition: ast.FunctionDef, call: ast.Call, env: dict, skip: int = 0) -> dict | None:
        """The parameters a call gives by position or keyword, each with the caller's ``env``, and
        the defaults of those it does not give; None where that is not known. ``skip``: how many
        leading parameters the call gives itself (a method's ``self``)."""
        args = definition.args
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords) \
                or args.vararg or args.kwarg:
            return None
        params = [*args.posonlyargs, *args.args]
        defaults = dict(zip(map(id, params[len(params) - len(args.defaults):]), args.defaults))
        defaults.update((id(p), d) for p, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
        params = params[skip:]
        by_name = {p.arg: p for p in [*params, *args.kwonlyargs]}
        if len(call.args) > len(params) or any(k.arg not in by_name for k in call.keywords):
            return None
        given = {key: (default, {}) for key, default in defaults.items()}
        given.update({id(p): (a, env) for p, a in zip(params, call.args)})
        given.update({id(by_name[k.arg]): (k.value, env) for k in call.keywords})
        return given

    def _parameter(self, param: ast.arg, depth: int) -> int:
        """A parameter no call being read gives: an array where annotated as one, else what every
        call of its function in the module gives it (one call at least, and the function only
        called: a function passed as a value is called with anything)."""
        if param.annotation is not None and self.names.qualified_name(param.annotation) in _ANNOTATIONS \
                or id(param) in self.assumed:
            return ARRAY
        level = self._called_with(param, depth)
        if level == UNKNOWN and param.annotation is None:
            self.unannotated.setdefault(id(param), param)
        return level

    def _called_with(self, param: ast.arg, depth: int) -> int:
        """What every call of the parameter's function in the module gives it."""
        definition = self.module.parent_of(self.module.parent_of(param))
        if not isinstance(definition, ast.FunctionDef):
            return UNKNOWN
        if isinstance(self.module.parent_of(definition), ast.ClassDef):
            if definition.decorator_list or not definition.args.args or param is definition.args.args[0]:
                return UNKNOWN
            uses, skip = method_uses(self.module, definition), 1
            if not all(method_called(self.module, use) is definition for use in uses):
                return UNKNOWN
        else:
            uses, skip = reads_of(self.module, definition.name, definition), 0
        calls = [self.module.parent_of(use) for use in uses]
        if not calls or not all(isinstance(c, ast.Call) and c.func is use for c, use in zip(calls, uses)):
            return UNKNOWN
        levels = []
        for call in calls:
            given = self._arguments(definition, call, {}, skip)
            if given is None or id(param) not in given:
                return UNKNOWN
            levels.append(self._level(*given[id(param)], depth))
        return min(levels)


def _optax_loss(name: str) -> bool:
    return "loss" in name or "entropy" in name or name in ("global_norm", "cosine_similarity", "kl_divergence")
