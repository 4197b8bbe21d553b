"""Which expressions add or remove pmap's leading device axis, read from their shapes.

``(n, -1) + x.shape[1:]`` splits a host batch into one slice per device, ``(n,) + x.shape`` copies
a value onto every device (``jax.device_put`` of the copies on a mesh of the local devices, one
per device, too), ``x[0]`` reads device 0's copy, with n the local device count (a call of
``jax.local_device_count()``, a name bound once to one, or a parameter every call gives one). Shared by the driving code's analysis
(``driving``) and the summaries of the program's own helpers (``helpers``).
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import reads_of
from jaxmigrate.core.module import is_script
from jaxmigrate.lint.patterns import BROADCASTS, single_value
from jaxmigrate.migrate._plan import literal_int
from jaxmigrate.migrate.global_view.einops_patterns import (
    REARRANGE,
    REPEAT,
    device_copies,
    device_split,
    literal_pattern,
)
from jaxmigrate.names import OpaqueBinding, ValueBinding

# Functions that make one array of a list of equal arrays along a new leading axis.
STACKS = frozenset(f"{m}.{f}" for m in ("jax.numpy", "numpy") for f in ("stack", "array", "asarray"))
_REPEATS = frozenset({"jax.numpy.repeat", "numpy.repeat"})
_TILES = frozenset({"jax.numpy.tile", "numpy.tile"})
# The function form of `x.reshape(shape)`: `jnp.reshape(x, shape)`.
RESHAPES = frozenset({"jax.numpy.reshape", "numpy.reshape"})
_EXPAND_DIMS = frozenset({"jax.numpy.expand_dims", "numpy.expand_dims"})
_NDIMS = frozenset({"jax.numpy.ndim", "numpy.ndim"})
_DEVICE_PUT_SHARDED, _DEVICE_PUT_REPLICATED = "jax.device_put_sharded", "jax.device_put_replicated"
LOCAL_DEVICE_COUNT = "jax.local_device_count"
_DEVICE_COUNT = frozenset({"jax.device_count", "jax.lib.xla_bridge.device_count"})
_DEVICE_PUT = "jax.device_put"
_FETCHES = frozenset({"jax.device_get", "numpy.asarray", "numpy.array"})
_NAMED_SHARDINGS = frozenset({"jax.sharding.NamedSharding", "jax.NamedSharding"})
_MESH = "jax.sharding.Mesh"
_SPECS = frozenset({"jax.sharding.PartitionSpec", "jax.P"})
_ARRAYS = frozenset({"numpy.array", "numpy.asarray"})
_SPLITS = frozenset({"jax.numpy.split", "numpy.split"})


class DeviceAxisShapes:
    """The shape patterns of one module (names resolved with its resolver)."""

    def __init__(self, module, devices: frozenset[int] = frozenset(), counts: frozenset[int] = frozenset()) -> None:
        self.module = module
        self.names = module.names
        # Parameters (their ``ast.arg`` ids) read as every local device, or as their count: a
        # helper's, which its calls are checked to pass (``helpers.Helper.takes``).
        self.devices = devices
        self.counts = counts

    def tree_map_action(self, fn: ast.Lambda) -> str | None:
        if len(fn.args.args) != 1 or fn.args.vararg or fn.args.kwonlyargs:
            return None
        return self.leaf_action(fn.body, fn.args.args[0].arg)

    def leaf_action(self, body: ast.expr, x: str) -> str | None:
        """What ``body`` does to the array ``x`` about pmap's device axis: ``index`` (``x[0]``),
        ``fetch`` (``jax.device_get(x[0])``), ``shard`` (a device-count reshape), ``replicate`` (``x`` copied onto a leading axis of the
        local device count), or None."""
        if isinstance(body, ast.Subscript) and is_name(body.value, x) and is_zero(body.slice):
            return "index"
        if isinstance(body, ast.Call) and len(body.args) == 1 and not body.keywords \
                and self.names.qualified_name(body.func) in _FETCHES and self.leaf_action(body.args[0], x) == "index":
            return "fetch"  # `jax.device_get(x[0])`, `np.asarray(x[0])`: device 0's copy, on the host
        if isinstance(body, ast.Call) and self._is_repeat(body, x):
            return "replicate"
        if isinstance(body, ast.Call) and is_name(body.args[0] if body.args else None, x):
            einops = self.einops_action(body)  # `rearrange(x, "(d b) ... -> d b ...", d=n)`
            if einops is not None:
                return einops
        if not isinstance(body, ast.Call) or body.keywords:
            return None
        if isinstance(body.func, ast.Attribute) and body.func.attr == "reshape" \
                and is_name(body.func.value, x) and self.is_shard_reshape(body.func.value, body.args):
            return "shard"
        qualified = self.names.qualified_name(body.func)
        if qualified in RESHAPES and len(body.args) == 2 and is_name(body.args[0], x) \
                and self.is_shard_reshape(body.args[0], body.args[1:]):
            return "shard"  # `jnp.reshape(x, (n, -1) + x.shape[1:])`
        if qualified in BROADCASTS and len(body.args) == 2 \
                and is_name(body.args[0], x) and self._is_leading_count(body.args[1], x, 0):
            return "replicate"
        if qualified in STACKS and len(body.args) == 1 and self._is_copies(body.args[0], x):
            return "replicate"
        if qualified in _TILES and len(body.args) == 2 and self._is_tiled_once(body.args[0], body.args[1], x):
            return "replicate"
        if self.split_per_device(body) is not None and is_name(body.args[0].args[0], x):
            return "shard"  # `device_put_sharded(jnp.split(x, n), devices)`
        # jaxline's `bcast_local_devices`: `device_put_sharded(len(devices) * [v], devices)`
        if qualified == _DEVICE_PUT_SHARDED and len(body.args) == 2 and self._is_copies(body.args[0], x) \
                and self.is_every_local_device(body.args[1]):
            return "replicate"
        if qualified == _DEVICE_PUT_REPLICATED and len(body.args) == 2 and is_name(body.args[0], x) \
                and self.is_replication_target(body.args[1]):
            return "replicate"
        # What JAX's migration guide puts for `device_put_replicated` (and today's flax `replicate`
        # does): the copies laid out one per local device, `jax.device_put(jnp.stack([x] * n),
        # NamedSharding(Mesh(devices, ("d",)), P("d")))`
        if qualified == _DEVICE_PUT and len(body.args) == 2 and self.leaf_action(body.args[0], x) == "replicate" \
                and self.is_split_over_every_local_device(body.args[1]):
            return "replicate"
        return None

    def _is_repeat(self, body: ast.Call, x: str) -> bool:
        """``np.repeat(x[None], n, axis=0)`` (or ``x[None].repeat(n, axis=0)``, ``np.expand_dims(x, 0)``
        for ``x[None]``, axis positional): ``x`` given a leading axis of one, repeated n times along it."""
        qualified = self.names.qualified_name(body.func)
        if qualified in _REPEATS:
            args = body.args
        elif isinstance(body.func, ast.Attribute) and body.func.attr == "repeat":
            args = [body.func.value, *body.args]
        else:
            return False
        axis = [k.value for k in body.keywords if k.arg == "axis"]
        if len(body.keywords) != len(axis) or len(args) + len(axis) != 3:
            return False
        return self._with_leading_one(args[0], x) and self.is_device_count(args[1]) and is_zero([*args, *axis][2])

    def _is_tiled_once(self, array: ast.expr, reps: ast.expr, x: str) -> bool:
        """``np.tile(x, (n,) + (1,) * x.ndim)`` (or of ``x[None]``): one copy of ``x`` per device along a
        new leading axis. Reps written out (``(n, 1)``) tile ``x``'s own axes where it has more of
        them than that, so only the ones counted off ``x`` itself are read."""
        if not (is_name(array, x) or self._with_leading_one(array, x)):
            return False
        if not (isinstance(reps, ast.BinOp) and isinstance(reps.op, ast.Add)
                and isinstance(reps.left, (ast.Tuple, ast.List)) and len(reps.left.elts) == 1
                and self.is_device_count(reps.left.elts[0])):
            return False
        ones = reps.right
        if not (isinstance(ones, ast.BinOp) and isinstance(ones.op, ast.Mult)):
            return False
        for items, count in ((ones.left, ones.right), (ones.right, ones.left)):
            if isinstance(items, (ast.Tuple, ast.List)) and type(items) is type(reps.left) and len(items.elts) == 1 \
                    and literal_int(items.elts[0]) == 1 and self._is_ndim(count, x):
                return True
        return False

    def _is_ndim(self, node: ast.expr, x: str) -> bool:
        """``x.ndim``, ``np.ndim(x)`` or ``len(x.shape)``."""
        if isinstance(node, ast.Attribute) and node.attr == "ndim" and is_name(node.value, x):
            return True
        if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
            return False
        if self.names.qualified_name(node.func) in _NDIMS:
            return is_name(node.args[0], x)
        return self.names.builtin(node.func) == "len" and _is_shape_of(node.args[0], x, None)

    def _with_leading_one(self, node: ast.expr, x: str) -> bool:
        """``x[None]``, ``x[None, ...]``, ``x[np.newaxis]``, ``np.expand_dims(x, 0)``: ``x`` with a new
        leading axis of one."""
        if isinstance(node, ast.Subscript) and is_name(node.value, x):
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            new_axis = isinstance(index[0], ast.Constant) and index[0].value is None or (
                self.names.qualified_name(index[0]) in ("numpy.newaxis", "jax.numpy.newaxis"))
            return new_axis and all(isinstance(i, ast.Constant) and i.value is Ellipsis for i in index[1:])
        if isinstance(node, ast.Call) and self.names.qualified_name(node.func) in _EXPAND_DIMS:
            axis = [*node.args[1:], *(k.value for k in node.keywords if k.arg == "axis")]
            return len(node.args) >= 1 and is_name(node.args[0], x) and len(axis) == 1 and is_zero(axis[0]) \
                and len(node.args) + len(node.keywords) == 2
        return False

    def einops_action(self, node: ast.Call) -> str | None:
        """``shard`` for ``rearrange(x, "(d b) ... -> d b ...", d=n)`` (the rows split per device and
        nothing else rearranged), ``replicate`` for ``repeat(x, "... -> d ...", d=n)``, n the local
        device count given as the only keyword (``einops_patterns``)."""
        qualified = self.names.qualified_name(node.func)
        pattern = literal_pattern(node) if qualified in (REARRANGE, REPEAT) else None
        if pattern is None or len(node.keywords) != 1 or node.keywords[0].arg is None \
                or not self.is_device_count(node.keywords[0].value):
            return None
        device = node.keywords[0].arg
        if qualified == REPEAT:
            return "replicate" if device_copies(pattern, device) else None
        split = device_split(pattern, device)
        return "shard" if split is not None and split[1] else None

    def copied_once(self, node: ast.Call) -> ast.expr | None:
        """``e`` of ``jnp.stack([e] * n)`` (or ``np.array(n * [e])``), n the local device count:
        whatever ``e`` is, it is evaluated once, and the list holds that one value n times."""
        if not (self.names.qualified_name(node.func) in STACKS and len(node.args) == 1 and not node.keywords):
            return None
        copies = node.args[0]
        if not (isinstance(copies, ast.BinOp) and isinstance(copies.op, ast.Mult)):
            return None
        for items, count in ((copies.left, copies.right), (copies.right, copies.left)):
            if isinstance(items, ast.List) and len(items.elts) == 1 and self.is_device_count(count):
                element = items.elts[0]
                # (a Python number: the array pmap was given has a dtype `jax.device_put` of the
                # number would not, a strong one, not weak)
                number = isinstance(element, ast.UnaryOp) and isinstance(element.operand, ast.Constant)
                return None if isinstance(element, (ast.Starred, ast.Constant)) or number else element
        return None

    def _is_copies(self, node: ast.expr, x: str) -> bool:
        """``[x] * n`` / ``n * [x]`` / ``[x for _ in range(n)]`` with n the local device count."""
        if isinstance(node, ast.ListComp) and is_name(node.elt, x) and len(node.generators) == 1:
            loop = node.generators[0]
            count = loop.iter
            return (not loop.ifs and not loop.is_async and not is_name(loop.target, x)
                    and isinstance(count, ast.Call) and self.names.builtin(count.func) == "range"
                    and len(count.args) == 1 and not count.keywords
                    and self.is_device_count(count.args[0]))
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
            return False
        for items, count in ((node.left, node.right), (node.right, node.left)):
            if isinstance(items, ast.List) and len(items.elts) == 1 and is_name(items.elts[0], x) \
                    and self.is_device_count(count):
                return True
        return False

    def split_per_device(self, node: ast.Call) -> ast.expr | None:
        """What ``jax.device_put_sharded(jnp.split(x, n), devices)`` splits, ``x``: ``n`` the local
        device count, ``devices`` every local device, the split along the first axis. Device i gets
        the i-th of n equal parts of ``x``'s rows, as flax's ``shard(x)`` gives it (unequal parts
        cannot be put: ``device_put_sharded`` takes arrays of one shape). None for anything else."""
        if not (self.names.qualified_name(node.func) == _DEVICE_PUT_SHARDED and len(node.args) == 2
                and not node.keywords and self.is_every_local_device(node.args[1])):
            return None
        split = node.args[0]
        if not (isinstance(split, ast.Call) and self.names.qualified_name(split.func) in _SPLITS
                and 2 <= len(split.args) <= 3 and not any(isinstance(a, ast.Starred) for a in split.args)):
            return None
        axis = [*split.args[2:], *(k.value for k in split.keywords if k.arg == "axis")]
        if any(k.arg != "axis" for k in split.keywords) or len(axis) > 1 \
                or axis and not (isinstance(axis[0], ast.Constant) and axis[0].value == 0
                                 and type(axis[0].value) is int):
            return None
        return split.args[0] if self.is_device_count(split.args[1]) else None

    def is_shard_reshape(self, base: ast.expr, args: list[ast.expr]) -> bool:
        """``(n, -1) + x.shape[1:]`` / ``(n, -1, *x.shape[1:])`` / ``n, -1, *x.shape[1:]``, n the local
        device count."""
        if len(args) == 1:
            shape = args[0]
        elif len(args) >= 2:
            shape = ast.Tuple(elts=list(args), ctx=ast.Load())
        else:
            return False
        return self._is_leading_count(shape, base, -1)

    def split_sizes(self, args: list[ast.expr]) -> list[ast.expr] | None:
        """The sizes of a reshape that splits an array's elements among the local devices, written
        out (``x.reshape(n, -1, 28, 28, 1)``, ``x.reshape((n, per_device, features))``), n the
        local device count. Device i gets the i-th n-th of ``x``'s elements in order, shaped by the
        other sizes; so does the global array ``x.reshape(-1, 28, 28, 1)`` laid out over n devices,
        whatever ``x``'s own shape: the first two sizes merge into -1 (where the second is not -1
        and a later one is, that cannot be written: None)."""
        sizes = list(args[0].elts) if len(args) == 1 and isinstance(args[0], ast.Tuple) else list(args)
        if len(sizes) < 2 or any(isinstance(size, ast.Starred) for size in sizes) \
                or not self.is_device_count(sizes[0]):
            return None
        unknown = [i for i, size in enumerate(sizes) if literal_int(size) == -1]
        if len(unknown) > 1 or unknown and unknown[0] > 1:
            return None
        return sizes

    def _is_leading_count(self, shape: ast.expr, base, second: int) -> bool:
        """``shape`` is ``(n, <second>) + base.shape[k:]`` or ``(n, <second>, *base.shape[k:])`` (second 0:
        ``(n,) + base.shape`` / ``(n, *base.shape)``) with n the local device count."""
        name = base if isinstance(base, str) else None
        if (split := _head_and_tail(shape, self.names)) is None:
            return False
        head, tail = split
        expected = 1 if second == 0 else 2
        if len(head) != expected or not self.is_device_count(head[0]):
            return False
        # (n, k) + x.shape[1:] reshapes x only where n * k rows are x's rows: any k is -1 then
        # (JAX's pmap example writes the per-device batch size it computed)
        if second == 0:
            return _is_shape_of(tail, name, None)
        if _is_shape_of(tail, name or self.module.segment(base), 1, self.module):
            return True
        # `x[:n].reshape(n_dev, -1, *x.shape[1:])`: rows sliced off keep x's other sizes; and so
        # does an array made of x (`jnp.array(v).reshape((n, per_device) + v.shape[1:])`)
        if isinstance(base, ast.Subscript) and _rows_sliced(base.slice):
            return _is_shape_of(tail, self.module.segment(base.value), 1, self.module)
        return isinstance(base, ast.Call) and self.names.qualified_name(base.func) in STACKS \
            and len(base.args) == 1 and not base.keywords \
            and _is_shape_of(tail, self.module.segment(base.args[0]), 1, self.module)

    def is_unshard_reshape(self, base: ast.expr, args: list[ast.expr]) -> bool:
        """``(-1,) + x.shape[2:]`` / ``(-1, *x.shape[2:])``: pmap's two leading axes merged."""
        shape = args[0] if len(args) == 1 else ast.Tuple(elts=list(args), ctx=ast.Load())
        if (split := _head_and_tail(shape)) is None:
            return False
        head, tail = split
        return len(head) == 1 and literal_int(head[0]) == -1 \
            and _is_shape_of(tail, self.module.segment(base), 2, self.module)

    def is_row_reshape(self, base: ast.expr, args: list[ast.expr]) -> bool:
        """``x.reshape(-1, k, ...)`` with each k a feature size (``x.shape[-1]``: a negative axis is a
        feature axis) or a value not read off ``x``: the same rows in the same order whether ``x``
        has pmap's two leading axes or the global view's one (the caller checks the other k are
        host values)."""
        shape = args[0] if len(args) == 1 and isinstance(args[0], ast.Tuple) else ast.Tuple(elts=list(args))
        if not shape.elts or literal_int(shape.elts[0]) != -1:
            return False
        segment = self.module.segment(base)
        for size in shape.elts[1:]:
            if isinstance(size, ast.Starred):
                return False
            read = [n for n in ast.walk(size) if isinstance(n, ast.Attribute) and n.attr == "shape"
                    and self.module.segment(n.value) == segment]
            if read and not (isinstance(size, ast.Subscript) and size.value in read
                             and (literal_int(size.slice) or 0) < 0):
                return False
        return True

    def is_device_count(self, node: ast.expr, _seen: frozenset[int] = frozenset()) -> bool:
        """``jax.local_device_count()`` (``len(jax.local_devices())``), or a name bound once to it
        (a parameter every call gives one: ``_given_always``); in a module that shows no sign of
        running as several processes, ``jax.device_count()`` too (JAX's own pmap example reads
        ``xla_bridge.device_count()``)."""
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            qualified = self.names.qualified_name(node.func)
            return qualified == LOCAL_DEVICE_COUNT or qualified in _DEVICE_COUNT and self._one_process()
        if isinstance(node, ast.Call) and self.names.builtin(node.func) == "len" \
                and len(node.args) == 1 and not node.keywords:
            return self.is_every_local_device(node.args[0])
        if isinstance(node, ast.Name):
            bindings = self.names.bindings(node)
            if len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) and id(bindings[0].node) in self.counts:
                return True
            if len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) and isinstance(bindings[0].node, ast.arg):
                return self._given_always(bindings[0].node, self.is_device_count, _seen)
            return len(bindings) == 1 and isinstance(bindings[0], ValueBinding) and self.is_device_count(
                bindings[0].value, _seen)
        return False

    def _given_always(self, param: ast.arg, check, seen: frozenset[int]) -> bool:
        """Whether every call of the function that takes ``param`` passes a value ``check`` takes
        there (``_run_val(p_val_step, state, batches, num_devices)``, ``num_devices`` the local
        device count): a function of this module that is only called, by name, positionally or by
        keyword, that no other module may call (nested, private or in a script)."""
        fn = self.module.parent_of(self.module.parent_of(param))
        if not isinstance(fn, ast.FunctionDef) or fn.decorator_list or id(param) in seen \
                or param not in fn.args.args[:len(fn.args.args) - len(fn.args.defaults)]:
            return False
        if self.module.parent_of(fn) is self.module.tree and not fn.name.startswith("_") and not is_script(self.module):
            return False
        position, calls = fn.args.args.index(param), []
        for read in reads_of(self.module, fn.name, fn):
            call = self.module.parent_of(read)
            if not (isinstance(call, ast.Call) and call.func is read) or any(isinstance(a, ast.Starred) for a in call.args) \
                    or any(k.arg is None for k in call.keywords):
                return False
            given = call.args[position] if position < len(call.args) else next(
                (k.value for k in call.keywords if k.arg == param.arg), None)
            if given is None:
                return False
            calls.append(given)
        return bool(calls) and all(check(given, seen | {id(param)}) for given in calls)


    def counts_every_process(self, node: ast.expr) -> bool:
        """``jax.device_count()``, or a name bound once to it: the devices of every process, which
        is pmap's device count only in one process."""
        if isinstance(node, ast.Name):
            bindings = self.names.bindings(node)
            return len(bindings) == 1 and isinstance(bindings[0], ValueBinding) and self.counts_every_process(
                bindings[0].value)
        return isinstance(node, ast.Call) and not node.args and not node.keywords \
            and self.names.qualified_name(node.func) in _DEVICE_COUNT

    def split_by_every_process(self, call: ast.Call) -> ast.expr | None:
        """The ``jax.device_count()`` a reshape to ``(n, -1) + x.shape[1:]`` splits by, in a module
        that runs as several processes (where ``is_device_count`` does not take it); else None."""
        if self.names.qualified_name(call.func) in RESHAPES:
            shape = call.args[1] if len(call.args) == 2 else None
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "reshape" and call.args:
            shape = call.args[0] if len(call.args) == 1 else ast.Tuple(elts=list(call.args), ctx=ast.Load())
        else:
            shape = None
        if shape is None:
            return None
        split = _head_and_tail(shape, self.names) or (
            (list(shape.elts), None) if isinstance(shape, ast.Tuple) and shape.elts else None)
        if split is None or self._one_process():
            return None
        count = split[0][0]
        return count if self.counts_every_process(count) else None

    def is_every_local_device(self, node: ast.expr) -> bool:
        """``jax.local_devices()`` (``jax.devices()`` in a module of one process), maybe in
        ``list(...)`` (jraph replicates onto ``list(jax.devices())``) or ``np.array(...)`` (a mesh's
        devices), or a name bound once to it: the devices pmap maps over, in its order."""
        if isinstance(node, ast.Name):
            bindings = self.names.bindings(node)
            if len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) and id(bindings[0].node) in self.devices:
                return True
            return len(bindings) == 1 and isinstance(bindings[0], ValueBinding) and not isinstance(
                bindings[0].value, ast.Name) and self.is_every_local_device(bindings[0].value)
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and (
                self.names.builtin(node.func) == "list" or self.names.qualified_name(node.func) in _ARRAYS):
            return self.is_every_local_device(node.args[0])
        qualified = self.names.qualified_name(node.func) if isinstance(node, ast.Call) \
            and not node.args and not node.keywords else None
        return qualified == "jax.local_devices" or qualified == "jax.devices" and self._one_process()

    def is_replication_target(self, node: ast.expr) -> bool:
        """The devices a ``device_put_replicated`` copies onto, when they are every local device:
        those ``is_every_local_device`` knows, or ``jax.devices()`` in any module: run as several
        processes, it holds devices this process cannot reach and the copy raises, so wherever the
        call runs they are this process's own."""
        if isinstance(node, ast.Call) and not node.args and not node.keywords \
                and self.names.qualified_name(node.func) == "jax.devices":
            return True
        return self.is_every_local_device(node)

    def is_placed_per_device(self, body: ast.expr, x: str) -> bool:
        """``jax.device_put(x, sharding)``, the sharding one slice of a leading axis per local device."""
        return isinstance(body, ast.Call) and len(body.args) == 2 and not body.keywords \
            and self.names.qualified_name(body.func) == _DEVICE_PUT and is_name(body.args[0], x) \
            and self.is_split_over_every_local_device(body.args[1])

    def is_split_over_every_local_device(self, node: ast.expr) -> bool:
        """``NamedSharding(Mesh(devices, ("d",)), P("d"))`` (or ``Mesh(devices, "d")``) with ``devices``
        every local device (maybe in ``np.array(...)``; each part maybe a name bound once to it): a
        leading axis laid out one slice per local device, as pmap's arguments are. (Their order does
        not matter to copies.)"""
        sharding = self._bound(node)
        if not (self._call_of(sharding, _NAMED_SHARDINGS) and len(sharding.args) == 2):
            return False
        mesh, spec = self._bound(sharding.args[0]), self._bound(sharding.args[1])
        if not (self._call_of(mesh, {_MESH}) and len(mesh.args) == 2
                and self._call_of(spec, _SPECS) and len(spec.args) == 1):
            return False
        devices, axes, axis = mesh.args[0], mesh.args[1], spec.args[0]
        if isinstance(axes, (ast.Tuple, ast.List)) and len(axes.elts) == 1:
            axes = axes.elts[0]  # (`Mesh(devices, "d")` names its one axis so too)
        return self.is_every_local_device(devices) and isinstance(axes, ast.Constant) \
            and isinstance(axis, ast.Constant) and isinstance(axis.value, str) and axes.value == axis.value

    def _call_of(self, node: ast.expr, qualified: frozenset[str] | set[str]) -> bool:
        """``node`` calls one of ``qualified`` with positional arguments only."""
        return isinstance(node, ast.Call) and not node.keywords and self.names.qualified_name(node.func) in qualified

    def _bound(self, node: ast.expr) -> ast.expr:
        """What a name bound once (to a value) holds; any other expression itself."""
        value = single_value(self.names, node) if isinstance(node, ast.Name) else None
        return node if value is None else value

    def _one_process(self) -> bool:
        from jaxmigrate.migrate._pmap_sites import planner_of  # (the planner imports the global view)

        return planner_of(self.module).multi_process is None


def is_name(node: ast.AST, name: str) -> bool:
    """``node`` is the name ``name``."""
    return isinstance(node, ast.Name) and node.id == name


def is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 0


def split_count(node: ast.Call) -> ast.expr | None:
    """How many keys a ``jax.random.split(key, n)`` call (``num=n`` too) asks for; None for another
    form (its default, two keys, is never the device count)."""
    if len(node.args) == 2 and not node.keywords:
        return node.args[1]
    if len(node.args) == 1 and len(node.keywords) == 1 and node.keywords[0].arg == "num":
        return node.keywords[0].value
    return None


def _head_and_tail(shape: ast.expr, names=None) -> tuple[list[ast.expr], ast.expr] | None:
    """A shape written ``(a, b) + rest`` or ``(a, b, *rest)`` (the tuple maybe a name bound once to
    it, with ``names``, the module's resolver): ([a, b], rest); None otherwise."""
    if isinstance(shape, ast.BinOp) and isinstance(shape.op, ast.Add) and isinstance(shape.left, ast.Name) \
            and names is not None:
        bindings = names.bindings(shape.left)
        if len(bindings) == 1 and isinstance(bindings[0], ValueBinding) and isinstance(bindings[0].value, ast.Tuple):
            return list(bindings[0].value.elts), shape.right
    if isinstance(shape, ast.BinOp) and isinstance(shape.op, ast.Add) and isinstance(shape.left, ast.Tuple):
        return list(shape.left.elts), shape.right
    if isinstance(shape, ast.Tuple) and shape.elts and isinstance(shape.elts[-1], ast.Starred):
        return list(shape.elts[:-1]), shape.elts[-1].value
    return None


def _rows_sliced(index: ast.expr) -> bool:
    """``[a:b]`` (either bound optional, no step): rows of the first axis, every other axis whole."""
    return isinstance(index, ast.Slice) and index.step is None


def _is_shape_of(node, base: str | None, start: int | None, module=None) -> bool:
    """``<base>.shape[start:]`` (or ``<base>.shape`` when start is None)."""
    if start is not None:
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)
                and literal_int(node.slice.lower) == start and node.slice.upper is None and node.slice.step is None):
            return False
        node = node.value
    if not (isinstance(node, ast.Attribute) and node.attr == "shape"):
        return False
    value = node.value
    if isinstance(value, ast.Name) and base is not None and value.id == base:
        return True
    return module is not None and base is not None and module.segment(value) == base
