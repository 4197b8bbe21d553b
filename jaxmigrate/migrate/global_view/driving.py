"""The code that drives a pmapped step: where values get and lose pmap's leading device axis.

Every function of the module that calls a step (and the module's top level) is read statement by
statement, tracking which names hold values with the device axis:

``DREP``    replicated onto every device (``jax.device_put_replicated(x, jax.local_devices())``,
            ``flax.jax_utils.replicate(x)``, a tree map of ``broadcast_to((n,) + x.shape)``, a
            helper of the program that does one of these (``helpers``), and the step's
            replicated outputs);
``DSHARD``  a host batch split into one slice per device (``x.reshape((n, -1) + x.shape[1:])``
            with n the local device count, ``flax.training.common_utils.shard(x)``, and the step's
            per-example outputs).

Each such value must be made, passed and read in ways the global view has a counterpart for:
made by one of the calls above (which become ``jax.device_put(x, NamedSharding(mesh, P()))`` and
``jax.make_array_from_process_local_data(NamedSharding(mesh, P(axis)), x)``), passed to a step,
and read back with ``x[0]``, ``jax.tree.map(lambda x: x[0], x)``, ``flax.jax_utils.unreplicate(x)``
or ``jax.device_get(x)[0]`` (the index goes), or for a per-example output reshaped back with
``x.reshape((-1,) + x.shape[2:])`` (the reshape goes). Anything else (returned, stored in an
attribute, passed to another function, used in arithmetic) blocks the global view, with the line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from jaxmigrate.core.flow import ancestors, child_of, reads_of
from jaxmigrate.migrate._pmap_sites import planner_of
from jaxmigrate.migrate.global_view.arrays import ArrayProof
from jaxmigrate.migrate.global_view.device_lists import stacked_per_device
from jaxmigrate.migrate.global_view.einops_patterns import REARRANGE, REPEAT, device_split, literal_pattern
from jaxmigrate.migrate.global_view.flags import branch, literal_flags, runs
from jaxmigrate.migrate.global_view.helpers import (
    Helper,
    HelperSummaries,
    Preparer,
    arguments,
    batch_preparer,
    defaulted,
    only_parameter,
)
from jaxmigrate.migrate.global_view.hints import PAD_SHARD_UNPAD, made_by, step_used_as_value, stored_pad_wrapper
from jaxmigrate.migrate.global_view.modes import Mode
from jaxmigrate.migrate.global_view.objects import (
    check_holder,
    class_level_names,
    method_called,
    method_uses,
    reads_only_through_self,
    self_attribute,
)
from jaxmigrate.migrate.global_view.kinds import (
    BOT,
    KEY,
    SUM,
    Blocked,
    Fields,
    Kind,
    M,
    Outputs,
    R,
    Record,
    S,
    Seq,
    describe,
    join,
)
from jaxmigrate.migrate.global_view.kinds import leaves as kind_leaves
from jaxmigrate.migrate.global_view.shapes import RESHAPES, STACKS, DeviceAxisShapes, is_zero, split_count
from jaxmigrate.lint.patterns import TREE_MAPS, single_value
from jaxmigrate.names import OpaqueBinding, ValueBinding


@dataclass(frozen=True)
class H:
    name: str  # HOST | DREP | DSHARD | MIXED

    def __repr__(self) -> str:
        return self.name


HOST, DREP, DSHARD, MIXED = H("HOST"), H("DREP"), H("DSHARD"), H("MIXED")
EMPTY, DLIST = H("EMPTY"), H("DLIST")  # `[]`, and a list the step's replicated outputs are appended to
DKEYS = H("DKEYS")  # one RNG key per device
# A step's output that each device computes from its own slice and the step does not reduce across
# devices (a per-shard mean or sum returned without pmean/psum): pmap gives one per device, the global
# view one over the whole batch, so no read of it has a counterpart.
OWN = H("OWN")
# Such an output that is a per-shard mean (``metrics["accuracy"]`` of a step that does not pmean it).
# Averaged over the devices it is the global mean (the shards are equal), so host code that only
# adds these up, adds host values or scales by Python numbers and at last averages them
# (``acc += metrics["accuracy"]``, ``acc /= n``, ``jnp.mean(acc)``) reads in both views what the
# global view computes.
OWN_MEAN = H("OWN_MEAN")
OWN_MEANS = H("OWN_MEANS")  # a list such means are appended to (``losses.append(metrics["loss"])``)
_MEANS = frozenset({"jax.numpy.mean", "numpy.mean"})
# A host batch a generator of the program splits per device and yields (JAX's pmap example's
# `data_stream`, the Hugging Face examples' data collators): the generator yields it whole in the
# global view, and the code that gives it to a step lays it out there.
SOURCED = H("SOURCED")
# What a step returns from a Hugging Face model's call (``kinds.Outputs``): a ``ModelOutput`` or
# tuple whose every field has pmap's device axis (``predictions[0]``, ``outputs.logits``: ``DSHARD``).
DOUTPUTS = H("DOUTPUTS")
DEVICE = (DREP, DSHARD, DKEYS)
CARRIES_AXIS = (DREP, DSHARD, DKEYS, DLIST, MIXED, OWN, OWN_MEAN, OWN_MEANS, SOURCED, DOUTPUTS)


@dataclass(frozen=True)
class Source:
    """A generator of the program whose values have pmap's device axis (``yields``, their kind)."""

    yields: object


@dataclass(frozen=True)
class KeyedState:
    """Replicated like ``DREP`` but for these fields, one RNG key per device each: the Hugging Face
    examples' ``TrainState.replicate`` is ``replicate(self).replace(dropout_rng=shard_prng_key(
    self.dropout_rng))``. The global view places it as ``DREP``: each field the one key."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class HostEntries:
    """A dict batch split per device (``split``: ``DSHARD`` or ``SOURCED``) that the program also
    gives host values at these keys, ``batch["epoch"] = epoch``, to read or ``pop`` before the step
    takes it. Reaching a step or a layout with them blocks: pmap would map them over its device axis."""

    split: H
    keys: frozenset[str]


@dataclass(frozen=True)
class StepRef:
    """A pmapped step passed by name to a function of the module, which calls it
    (``run_epoch(p_train_step, state, batches)``): the parameter holds that step (``name``, its
    key in the steps). Calls of the parameter are the step's calls; any other use of it blocks."""

    name: str


def _replicated(kind) -> bool:
    """Whether a driving kind is a copy of one value on every device, which ``x[0]`` reads back."""
    return kind == DREP or isinstance(kind, KeyedState)


def _carries(kind) -> bool:
    """Whether a driving kind holds pmap's device axis."""
    return isinstance(kind, (KeyedState, Source, HostEntries)) or kind in CARRIES_AXIS

REPLICATE = frozenset({"flax.jax_utils.replicate"})
DEVICE_PUT_REPLICATED = "jax.device_put_replicated"
DEVICE_PUT_SHARDED = "jax.device_put_sharded"
SHARD = frozenset({"flax.training.common_utils.shard"})
UNREPLICATE = frozenset({"flax.jax_utils.unreplicate"})
GET_METRICS = "flax.training.common_utils.get_metrics"
PREFETCH_TO_DEVICE = "flax.jax_utils.prefetch_to_device"
SHARD_PRNG_KEY = "flax.training.common_utils.shard_prng_key"
_CONVERSIONS = frozenset(f"{m}.{f}" for m in ("jax.numpy", "numpy") for f in ("array", "asarray"))
# Calls that run a function as the program, with the command line (host values) for arguments.
APP_RUN = frozenset({"absl.app.run", "fire.Fire", "typer.run", "tyro.cli"})
# Decorators that make a function the program's entry point, called with its configuration.
ENTRY_DECORATORS = frozenset({"hydra.main", "click.command"})
# The leaf actions that read device 0's copy: on the device, or fetched to the host.
_READS_DEVICE_ZERO = frozenset({"index", "fetch"})
_PROGRESS_BARS = frozenset({"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm"})
# Calls that only write their arguments out: ``print``, the ``logging`` and ``absl.logging``
# functions, and those methods of a logger the module gets from ``logging.getLogger``.
_LOG_LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "fatal", "exception", "log"})
_LOG_FUNCTIONS = frozenset(f"{module}.{level}" for module in ("logging", "absl.logging") for level in _LOG_LEVELS)
_GET_LOGGER = frozenset({"logging.getLogger", "absl.logging.get_absl_logger"})
# What an array (not a pytree's field) answers, which counts pmap's device axis or its devices.
# A pytree's copy with some fields swapped: a flax struct's (``TrainState.replace``), a named tuple's.
_REPLACES = frozenset({"replace", "_replace"})
_ARRAY_ATTRIBUTES = frozenset({"shape", "size", "ndim", "T", "mT", "nbytes", "flat", "at", "sharding", "devices",
                               "addressable_shards", "addressable_data", "device_buffers", "global_shards"})


@dataclass
class Step:
    """A pmapped function as its callers see it."""

    name: str  # the module-level name callers call
    binding: ast.AST  # the def (decorator form) or the assigned pmap call (call form)
    func: ast.FunctionDef
    in_axes: tuple  # per position: 0 or None
    static: tuple[int, ...] = ()  # positions of `static_broadcasted_argnums=` (unmapped host values)
    outputs: Kind = BOT
    params: list[Kind] = field(default_factory=list)
    bound: tuple[str, ...] = ()  # names a `partial(...)` binds (host values: replicated)
    leading: int = 0  # how many of them it binds by position: the first parameters
    keyword_only: tuple[str, ...] = ()  # its keyword-only parameters `partial` leaves: the last positions
    fun: ast.expr | None = None  # call form: the expression naming the function pmap maps
    factory: ast.FunctionDef | None = None  # the function that builds and returns it (``options.factory_of``)
    returned: ast.Name | None = None  # the factory's `return step` of a pmapped def
    holder: tuple | None = None  # (class, attribute) of `self.<attribute> = jax.pmap(...)` (``objects``)
    # (dict literal, key) of `steps = {"train": jax.pmap(...)}`, called `steps["train"](...)`
    entry: tuple | None = None
    # `jax.pmap(opt_init)(params)`: a function whose body is not known here (``func`` is None), with
    # no axis name, so no collective of it can name pmap's axis: each device computes it alone.
    # Given only replicated values, every device computes the same value, which `jax.jit` computes
    # once. ``opaque`` is its number of arguments.
    opaque: int | None = None
    axis: str | None = None  # the axis name its pmap gives, which its collectives name
    # `out_axes=`: 0 (each output mapped), None (every output one value), or per output 0 / None.
    # An unmapped output is device 0's value as it is (no device axis): the global view's is the
    # same only where the step computes it the same on every device.
    out_axes: object = 0

    @property
    def line(self) -> int:
        return self.func.lineno if self.func is not None else self.binding.lineno

    @property
    def arity(self) -> int:
        if self.opaque is not None:
            return self.opaque
        return len([a for a in self.func.args.args if a.arg not in self.bound]) + len(self.keyword_only)


@dataclass
class DriverEdit:
    node: ast.AST
    # replicate | shard | index | unshard | local | key | metrics | opaque | source | place | pad | pad_call |
    # unwrap | transfer
    action: str
    inner: ast.expr  # the expression that is kept
    helper: Helper | None = None  # the program's own function this call of it stands for
    keys: tuple[str, ...] = ()  # fields a replication gave one RNG key per device (``KeyedState``)
    iterator: bool = False  # the rows it reads are an iterator where it stood (`chain(*x)` not iterated at once)
    per_device: ast.expr | None = None  # pad: `pad_shard_unpad`'s `min_device_batch=`, where it was given
    # an einops split kept as the same rearrangement of whole rows: (its pattern, the new one, the
    # keyword giving the device count, which goes)
    einops: tuple[ast.Constant, str, ast.keyword] | None = None
    # a split written out, `x.reshape(n, k, 28, 28)`, kept as `x.reshape(-1, 28, 28)`: (n, k), merged
    merged: tuple[ast.expr, ast.expr] | None = None
    # batches drawn one per device and stacked, `jnp.stack(xs)`, kept as `jnp.concatenate(xs)`:
    # the `jnp.stack` renamed (``device_lists``)
    stacked: ast.Attribute | None = None


def _hjoin(a, b):
    if a == BOT:
        return b
    if b == BOT or a == b:
        return a
    if {a, b} in ({EMPTY, DLIST}, {EMPTY, HOST}, {EMPTY, OWN_MEANS}):
        return b if a == EMPTY else a
    if {a, b} == {HOST, OWN_MEAN}:
        return OWN_MEAN  # (`acc = 0.0` before a loop that adds per-shard means: a host value is its own mean)
    if all(leaf == HOST for leaf in _hleaves(a) + _hleaves(b)):
        return HOST  # a literal of host values on one path, another host value on the other
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_hjoin(x, y) for x, y in zip(a, b))
    return MIXED


def _averaged_arithmetic(op: ast.operator, left, right, number) -> H | None:
    """What ``left <op> right`` is where one side is ``OWN_MEAN``: ``OWN_MEAN`` where averaging over
    the devices commutes with it (sums and differences with per-shard means and host values,
    products with and quotients by a Python number, ``number(side)``: a host array could weigh
    each device's value differently); None otherwise."""
    if OWN_MEAN not in (left, right) or not {left, right} <= {OWN_MEAN, HOST}:
        return None
    if isinstance(op, (ast.Add, ast.Sub)) or isinstance(op, ast.Mult) and (
            left == HOST and number(0) or right == HOST and number(1)) \
            or isinstance(op, ast.Div) and right == HOST and number(1):
        return OWN_MEAN
    return None


def _per_item(arg: ast.expr, made):
    """What a replicate or split of ``arg`` makes: of a tuple literal, a tuple of that many such
    values (``params, opt_state = replicate((params, opt_state))`` unpacks the tree's two items;
    unpacking an array would iterate over pmap's device axis instead)."""
    if isinstance(arg, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in arg.elts) and made != HOST:
        return tuple(made for _ in arg.elts)
    return made


def _takes(action: str, kind) -> bool:
    """Whether a helper's or leaf function's ``action`` applies to a value of ``kind``: a read of
    device 0's copy to a replicated value, a replicate or split to a host value."""
    if action in _READS_DEVICE_ZERO:
        return _replicated(kind)
    return action in ("replicate", "shard") and all(leaf == HOST for leaf in _hleaves(kind))


def _hleaves(kind) -> list:
    if isinstance(kind, tuple):
        return [leaf for item in kind for leaf in _hleaves(item)]
    return [kind]


class DriverAnalyzer:
    """Reads every scope that calls a step; collects argument kinds and the call-site edits."""

    def __init__(self, module, steps: dict[str, Step], mode: Mode | None = None) -> None:
        self.module = module
        self.mode = mode  # the pmap mode of a program with two (``modes``): its branches alone are read
        self.names = module.names
        self.steps = steps
        self.edits: dict[int, DriverEdit] = {}
        self.step_calls: list[ast.Call] = []
        self._step_bindings = {id(step.binding): step for step in steps.values()}
        self._entries = {(id(step.entry[0]), step.entry[1]): step for step in steps.values() if step.entry}
        self._factories = {id(step.factory): step for step in steps.values() if step.factory is not None}
        self._held = {(id(step.holder[0]), step.holder[1]): step for step in steps.values() if step.holder}
        # The kind of each attribute of a class holding a step, joined over every assignment in
        # its methods (flow-insensitive: methods run in any order), kept from one pass to the next.
        self.attributes: dict[tuple[int, str], object] = {}
        self._assigned = self._assigned_attributes()
        self.shapes = DeviceAxisShapes(module)
        self.helpers = HelperSummaries(module)
        self._shared_names: dict[int, set[str]] = {}
        self._generators: dict[int, bool] = {}
        self._batch_functions: set[int] = set()  # functions read as making batches (``_batches_made``)
        self._batch_sources: set[int] = set()  # generators (and functions returning one) of such batches
        self._forwarders: dict[int, bool] = {}  # per function: whether it may return another's (``_forwards_batches``)
        self._free: dict[int, frozenset[str]] = {}  # per nested function: the names it reads from around it

    # -- entry -----------------------------------------------------------------------------

    def analyse(self) -> None:
        for step in self.steps.values():
            step.params = [BOT] * step.arity
        self.edits.clear()
        self.step_calls.clear()
        self.called: set[str] = set()
        self.averaged: set[int] = set()  # lines where the host averages per-shard means (``OWN_MEAN``)
        self.logged: set[int] = set()  # lines that print or log a replicated value (``_written_out``)
        scopes = self._driving_scopes()
        self.wrappers = self._wrappers(scopes)
        self.scopes = frozenset(id(scope) for scope in scopes)
        self._inline: list[tuple[ast.FunctionDef, list]] = []  # wrappers being read, their returns' kinds
        self._passed: list[dict[str, ast.expr]] = []  # per wrapper being read: its parameters' call-site values
        self._reads: list[set] = []  # per wrapper being read: the edits (node, action) made in it
        self._flags: list[dict[str, bool]] = []  # per wrapper being read: its flags at the call (``flags``)
        # Per wrapper: its edits at a call, that call's line and flags.
        self._wrapper_edits: dict[int, tuple[frozenset, int, dict[str, bool]]] = {}
        # Methods of an object holding the step that are given its values (``self._log(self.params)``):
        # read at those calls, not on their own; found on one pass, used from the next.
        self.method_readers: dict[int, ast.FunctionDef] = {}
        for _ in range(4):
            settled, known = dict(self.attributes), set(self.method_readers)
            self.edits.clear()
            self.factory_calls: set[int] = set()
            self.readers: dict[int, ast.FunctionDef] = {}  # functions given device-axis values, read at each call
            self.reader_calls: set[int] = set()
            self.step_ref_calls: set[int] = set()  # calls of a parameter holding a step (``StepRef``)
            self.preparers: dict[int, ast.FunctionDef] = {}  # batch preparers mapped (``helpers.Preparer``)
            self.preparer_maps: set[int] = set()  # the `map(prepare, batches)` calls read
            self._step_parameters: dict[tuple[int, str], tuple[str, int]] = {}  # (func, param): (step, line)
            # Nested functions read at a call in the scope that defines them, with that scope's
            # values at the call for the names they read from it (a closure reads them when
            # called); and those called from anywhere else, whose reads of such names are not.
            self.closures: dict[int, ast.FunctionDef] = {}
            self.closures_called_elsewhere: set[int] = set()
            # Functions of the module the driving code gives host values only (a `create_train_state`):
            # each with the calls that do.
            self._given_host: dict[int, tuple[ast.FunctionDef, set[int]]] = {}
            self.method_reader_calls: set[int] = set()
            self._wrapper_edits.clear()
            for scope in scopes:
                if id(scope) in self.wrappers or id(scope) in self.method_readers:
                    continue  # read at each of its calls, with the kinds its arguments have there
                self._device_names: set[str] = set()
                self._block(scope.body, {})
                self._no_escape(scope, self._device_names)
            if self.attributes == settled and set(self.method_readers) == known:
                break
        else:
            raise Blocked(1, "the kinds of the attributes of the object holding the step do not settle")
        self._factories_called_where_read()
        self._readers_only_called_where_read()
        self._preparers_only_mapped_where_read()
        self._closures_only_called_where_defined()
        self._held_only_through_self()
        for method in self.method_readers.values():
            owner = self.module.parent_of(method)
            for node in self.module.of_type(ast.Attribute):
                if node.attr == method.name and not (isinstance(self.module.parent_of(node), ast.Call)
                                                     and self.module.parent_of(node).func is node
                                                     and id(self.module.parent_of(node)) in self.method_reader_calls):
                    raise Blocked(node.lineno, f"`{owner.name}.{method.name}` is given values with pmap's device "
                                  "axis elsewhere, and is called or used here where this fix does not read it")

    def host_scopes(self) -> frozenset[int]:
        """The functions whose locals are host values, the same on every device: the driving code,
        and the functions of the module it alone calls, with host values at every call (a step's
        loss kept in a `TrainState` field may close over the locals of the one that made it)."""
        given_host = set()
        for func, calls in self._given_host.values():
            uses = reads_of(self.module, func.name, func)
            if uses and all(isinstance(self.module.parent_of(use), ast.Call) and self.module.parent_of(use).func is use
                            and id(self.module.parent_of(use)) in calls for use in uses) \
                    and id(func) not in self.readers:
                given_host.add(id(func))
        return self.scopes | given_host

    def _assigned_attributes(self) -> set[tuple[int, str]]:
        """(class, attribute) of every ``self.<attribute> = ...`` in a class holding a step."""
        holders = {id(step.holder[0]) for step in self.steps.values() if step.holder}
        found = set()
        for node in self.module.of_type(ast.Attribute) if holders else ():
            if isinstance(node.ctx, ast.Store):
                held = self_attribute(self.module, node)
                if held is not None and id(held[0]) in holders:
                    found.add((id(held[0]), held[1]))
        return found

    def _held_only_through_self(self) -> None:
        """The step an object holds, and its attributes with the device axis, are reached only as
        ``self.<name>`` in the methods this analysis read."""
        owners = {id(step.holder[0]): step.holder[0] for step in self.steps.values() if step.holder}
        for owner in owners.values():
            check_holder(self.module, owner)
        for step in self.steps.values():
            if step.holder:
                reads_only_through_self(self.module, step.holder[0], step.holder[1], self.scopes,
                                        f"the pmapped step `{step.name}`")
        for (owner_id, attribute), kind in self.attributes.items():
            if any(_carries(leaf) for leaf in _hleaves(kind)):
                reads_only_through_self(self.module, owners[owner_id], attribute, self.scopes,
                                        "a value with pmap's device axis")
                line = class_level_names(owners[owner_id]).get(attribute)
                if line is not None:
                    raise Blocked(line, f"`{attribute}` of `{owners[owner_id].name}` has a class-level value too, "
                                  "read until a method assigns one with pmap's device axis")

    def _factories_called_where_read(self) -> None:
        """A factory's locals count as host values (``StepAnalyzer``'s host scopes) because its
        arguments were read as such: every call of it must be in the code this analysis read."""
        for step in self.steps.values():
            factory = step.factory
            if factory is None:
                continue
            for node in reads_of(self.module, factory.name, factory):
                call = self.module.parent_of(node)
                if isinstance(call, ast.Call) and call.func is node and id(call) not in self.factory_calls:
                    raise Blocked(call.lineno, f"`{factory.name}` (which returns the pmapped step) is called "
                                  "outside the code that calls the step, whose arguments this fix does not read")

    def _wrappers(self, scopes: list) -> dict[int, ast.FunctionDef]:
        """The driving functions the module itself calls (``train_epoch(state, batches)`` calling the
        step), by id; their callers join ``scopes``. Such a function is read at each call with its
        arguments' kinds, so the device axis is followed into it and out through its returns."""
        wrappers: dict[int, ast.FunctionDef] = {}
        pending = list(scopes)
        while pending:
            scope = pending.pop()
            if not isinstance(scope, ast.FunctionDef) or id(scope) in wrappers:
                continue
            # `app.run(main)` / `fire.Fire(main)` / `typer.run(main)` / `tyro.cli(main)` calls it with
            # the command line's arguments, host values, as a caller elsewhere would; so does
            # `@hydra.main(...)` with its configuration, where the script calls `main()`.
            if any(isinstance(d, ast.Call) and self._qualified(d.func) in ENTRY_DECORATORS
                   for d in scope.decorator_list):
                continue
            uses = [use for use in reads_of(self.module, scope.name, scope) if not self._run_by_app(use)]
            if not uses:
                continue  # an entry point: called from elsewhere, with host values
            for use in uses:
                parent = self.module.parent_of(use)
                if not (isinstance(parent, ast.Call) and parent.func is use):
                    raise Blocked(use.lineno, f"`{use.id}` (which drives the pmapped step) is used other than by "
                                  "calling it")
                caller = self.scope_of(use)
                if isinstance(caller, ast.Lambda):
                    raise Blocked(use.lineno, f"`{use.id}` (which drives the pmapped step) is called inside a "
                                  "lambda, which this fix does not follow")
                if all(caller is not known for known in scopes):
                    scopes.append(caller)
                    pending.append(caller)
            wrappers[id(scope)] = scope
        return wrappers

    def _run_by_app(self, use: ast.Name) -> bool:
        parent = self.module.parent_of(use)
        return isinstance(parent, ast.Call) and bool(parent.args) and parent.args[0] is use \
            and self._qualified(parent.func) in APP_RUN

    def _shared(self, scope) -> set[str]:
        """The names ``scope`` declares ``global`` or ``nonlocal`` (its own statements, not nested
        functions'): a value bound to one is read by other functions."""
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return set()  # a module's own top level shares its names already
        if id(scope) in self._shared_names:
            return self._shared_names[id(scope)]
        found = self._shared_names[id(scope)] = set()
        pending = list(scope.body)
        while pending:
            node = pending.pop()
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                found.update(node.names)
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                pending.extend(ast.iter_child_nodes(node))
        return found

    def _method(self, held) -> ast.FunctionDef | None:
        """The method ``self.<name>`` calls, in a class holding the step (``objects``)."""
        if held is None or not any(step.holder and step.holder[0] is held[0] for step in self.steps.values()):
            return None
        return next((m for m in held[0].body if isinstance(m, ast.FunctionDef) and m.name == held[1]), None)

    def _reader(self, func: ast.expr) -> ast.FunctionDef | None:
        """The def of this module ``func`` calls, when it is one the analysis may read at its calls
        as it reads the functions that drive the step: a function given values with pmap's device
        axis (``save_checkpoint(state)``, ``log(metrics)``), whose reads of them are rewritten too;
        or a method of an object of the module's own classes (``stream.train_iter()``, ``objects``)."""
        if isinstance(func, ast.Attribute):
            found = method_called(self.module, func)
        else:
            bindings = self.names.bindings(func) if isinstance(func, ast.Name) else []
            found = bindings[0].node if len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) else None
        if not isinstance(found, ast.FunctionDef):
            return None
        if any(found is step.func or found is step.factory for step in self.steps.values() if step.opaque is None):
            return None
        return found

    def _readers_only_called_where_read(self) -> None:
        """A function read at its calls has one text for all of them: each of its calls must be one
        the analysis read (with the kinds its arguments have there), and it is used no other way."""
        for reader in self.readers.values():
            for node in self._uses(reader):
                call = self.module.parent_of(node)
                if isinstance(call, ast.Call) and call.func is node and self._runs_no_edit(reader, call):
                    continue  # (its flags skip every edit: its text runs as it did there)
                if not (isinstance(call, ast.Call) and call.func is node and id(call) in self.reader_calls):
                    what = "returns batches it splits per device" if id(reader) in self._batch_functions \
                        | self._batch_sources else "is given values with pmap's device axis"
                    raise Blocked(node.lineno, f"`{reader.name}` {what} elsewhere, and is called or used here where "
                                  "this fix does not read it")

    def _uses(self, func: ast.FunctionDef) -> list[ast.expr]:
        """The reads that may reach a function of the module: of its name, or of any attribute so
        named for a method (``objects.method_uses``)."""
        if self._is_method(func):
            return method_uses(self.module, func)
        return reads_of(self.module, func.name, func)

    def _is_method(self, func: ast.FunctionDef) -> bool:
        return isinstance(self.module.parent_of(func), ast.ClassDef)

    def _runs_no_edit(self, func: ast.FunctionDef, call: ast.Call) -> bool:
        """Whether ``call`` of a function that makes batches passes flags under which none of the
        edits in it runs (``get_batch(..., for_pmap=False)``): the call gets host values either way."""
        if id(func) not in self._batch_functions or any(isinstance(a, ast.Starred) for a in call.args) \
                or any(k.arg is None for k in call.keywords):
            return False
        given = self._parameters(func, call, bound_self=self._is_method(func))
        if given is None:
            return False
        flags = literal_flags(self.names, func, given)
        return not any(runs(self.module, edit.node, flags) for edit in self.edits.values()
                       if func in ancestors(self.module, edit.node))

    def _preparers_only_mapped_where_read(self) -> None:
        """A batch preparer whose split goes is used only in the ``map`` calls this analysis read:
        called or mapped anywhere else, its batches would come out whole where they were split."""
        for fn in self.preparers.values():
            for node in reads_of(self.module, fn.name, fn):
                call = self.module.parent_of(node)
                if not (isinstance(call, ast.Call) and call.args[:1] == [node] and id(call) in self.preparer_maps):
                    raise Blocked(node.lineno, f"`{fn.name}` splits the batches mapped at a call this fix rewrites, "
                                  "and is used here too, where its batches would no longer be split")

    def _closures_only_called_where_defined(self) -> None:
        """A nested function read with its defining scope's values must be called nowhere else,
        where the values it reads from that scope are not the caller's."""
        for closure in self.closures.values():
            if id(closure) in self.closures_called_elsewhere:
                call = next(node for node in reads_of(self.module, closure.name, closure)
                            if self.scope_of(node) is not self.module.parent_of(closure)
                            and not self._called_from_sibling(closure, node))
                raise Blocked(call.lineno, f"`{closure.name}` reads values with pmap's device axis from the "
                              "function that defines it, and is called elsewhere too, where this fix does not "
                              "follow them")

    def _own_names(self, func: ast.FunctionDef) -> frozenset[str]:
        """The names ``func`` binds (its own), but for those it declares ``nonlocal`` (the defining
        function's, read as such); a ``global`` one is the module's, not the defining function's."""
        own = next((scope for scope in self.names.scopes if scope.node is func), None)
        return (frozenset(own.bindings) | own.globals) - own.nonlocals if own is not None else frozenset()

    def _free_names(self, func: ast.FunctionDef) -> frozenset[str]:
        """The names ``func`` reads from the scopes around it, with those of the functions nested
        beside it that it calls (each reads its names from the same scope, at ``func``'s call)."""
        if id(func) not in self._free:
            self._free[id(func)] = frozenset()  # (siblings calling each other: each other's names once)
            local = self._own_names(func)
            read = frozenset(n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
            free = set(read - local)
            for sibling in self._siblings_called(func):
                free |= self._free_names(sibling) - local
            self._free[id(func)] = frozenset(free)
        return self._free[id(func)]

    def _siblings_called(self, func: ast.FunctionDef) -> list[ast.FunctionDef]:
        """The functions nested in the scope that defines ``func`` which ``func``'s body calls by name."""
        parent = self.module.parent_of(func)
        found = []
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                for binding in self.names.bindings(node.func):
                    target = getattr(binding, "node", None)
                    if isinstance(target, ast.FunctionDef) and target is not func \
                            and self.module.parent_of(target) is parent and target not in found:
                        found.append(target)
        return found

    def _called_from_sibling(self, func: ast.FunctionDef, node: ast.AST) -> bool:
        """Whether ``node`` (a call of ``func``, or the name it calls) is in another function nested
        beside it that is read as a closure (its calls are where they are defined), binding none of
        the names ``func`` reads from there: each of its calls reads ``func`` with the defining
        scope's values too."""
        if isinstance(node, ast.Name):
            call = self.module.parent_of(node)
            if not (isinstance(call, ast.Call) and call.func is node):
                return False  # used other than by calling it
        caller = self.scope_of(node)
        if not (isinstance(caller, ast.FunctionDef) and id(caller) in self.closures
                and self.module.parent_of(caller) is self.module.parent_of(func)):
            return False
        shadowed = sorted(self._own_names(caller) & self._free_names(func))
        if shadowed:
            raise Blocked(node.lineno, f"`{func.name}` reads `{shadowed[0]}` from the function that defines it, "
                          f"and is called from `{caller.name}`, nested there too, which binds a `{shadowed[0]}` "
                          "of its own: this fix reads a call with the caller's values, which would be the wrong ones")
        return True

    def _closure(self, func: ast.FunctionDef, node: ast.Call, env: dict) -> bool:
        """Whether this call of ``func`` reads it as a closure: a function nested in the scope that
        calls it, which reads that scope's values with pmap's device axis (LRA's `run_eval` reads
        the replicated `optimizer` of `train`). Called elsewhere, it is noted, for the check."""
        if not isinstance(self.module.parent_of(func), (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False  # (of the module, or a method)
        if self.scope_of(node) is not self.module.parent_of(func) and not self._called_from_sibling(func, node):
            self.closures_called_elsewhere.add(id(func))  # (in a lambda there too: its scope)
            return False
        if id(func) in self.closures:
            return True
        free = [leaf for name in self._free_names(func) for leaf in _hleaves(env.get(name, HOST))]
        if not any(_carries(leaf) or leaf == BOT for leaf in free):  # (BOT: a step's output, not known yet)
            return False
        # (A `nonlocal` name it binds is checked where it is bound: host values only, `_bind`.)
        if func.decorator_list:
            raise Blocked(func.decorator_list[0].lineno, f"`{func.name}` reads values with pmap's device axis "
                          "from the function that defines it, and is decorated: what its calls run is not its body")
        self.closures[id(func)] = func
        return True

    def _wrapper_call(self, func: ast.FunctionDef, node: ast.Call, env: dict, kinds: list | None = None,
                      bound_self: bool = False, closure: bool = False):
        """A call of a function that drives the step (or reads its values): its body read with the
        arguments' kinds; the kind of what it returns. ``bound_self``: a method called on ``self``,
        whose first parameter is that object (its attributes are read as ``objects`` says)."""
        role = "which drives the pmapped step" if id(func) in self.wrappers else "given pmap's device axis"
        bound_self = bound_self or self._is_method(func)  # (called on an object: `objects.method_called`)
        keywords = [k for k in node.keywords if k.arg is not None]
        mapping = [k.value for k in node.keywords if k.arg is None]  # `main(**vars(args))`
        if any(isinstance(a, ast.Starred) for a in node.args) or mapping and not self._host_mapping(mapping, env):
            raise Blocked(node.lineno, f"`{func.name}` ({role}) is called with starred arguments")
        given = self._parameters(func, node, bound_self, filled=bool(mapping))
        if given is None:
            raise Blocked(node.lineno, f"`{func.name}` ({role}) takes *args, **kwargs, "
                          "keyword-only arguments or defaults this call does not match")
        if any(func is reading for reading, _ in self._inline):
            raise Blocked(node.lineno, f"`{func.name}` ({role}) calls itself")
        # A closure reads its defining scope's names as they are at the call (this scope's). A
        # parameter this call leaves to its default holds that default: a host value.
        inner = {name: env[name] for name in self._free_names(func) if name in env} if closure else {}
        inner.update({a.arg: HOST for a in [*func.args.args, *func.args.kwonlyargs]})
        kinds = [self._argument(arg, env) for arg in node.args] if kinds is None else kinds
        for name, kind in zip(given, kinds + [self._argument(k.value, env) for k in keywords]):
            inner[name] = kind
            if isinstance(kind, StepRef):
                step, line = self._step_parameters.setdefault((id(func), name), (kind.name, node.lineno))
                if step != kind.name:
                    raise Blocked(node.lineno, f"`{func.name}` is given the pmapped step `{kind.name}` here and "
                                  f"`{step}` at line {line} as `{name}`: its one text cannot call both")
        outer_names, self._device_names = self._device_names, set()
        for name, kind in inner.items():
            if any(_carries(leaf) for leaf in _hleaves(kind)):
                self._device_names.add(name)
        self._inline.append((func, []))
        self._passed.append(given)
        self._reads.append(set())
        # (parameters a `**mapping` may fill hold what it gives, not their defaults)
        flags = literal_flags(self.names, func, given, defaults=not mapping)
        self._flags.append(flags)
        try:
            self._block(func.body, inner)
            self._no_escape(func, self._device_names)
            self._steps_only_called(func, [name for name, kind in inner.items() if isinstance(kind, StepRef)])
            returns = self._inline[-1][1]
            if self._is_generator(func):  # what it yields, from each `next(...)` or `for` over it
                yielded = BOT
                for kind in returns:
                    yielded = _hjoin(yielded, kind)
                returns = [Source(yielded) if any(_carries(leaf) for leaf in _hleaves(yielded)) else HOST]
            made = frozenset(self._reads[-1])
        finally:
            self._inline.pop()
            self._passed.pop()
            self._reads.pop()
            self._flags.pop()
            self._device_names = outer_names
        # One text serves every call: each must need the same edits in it (a `params[0]` that reads
        # device 0's copy at one call and a host array's first row at another cannot be rewritten),
        # but for the code a call's flags never run (`if for_pmap:` at a call without).
        settled = not any(leaf == BOT for kind in inner.values() for leaf in _hleaves(kind))
        known = self._wrapper_edits.setdefault(id(func), (made, node.lineno, flags)) if settled else (made, 0, flags)
        if {e for e in known[0] if runs(self.module, e[0], flags)} \
                != {e for e in made if runs(self.module, e[0], known[2])}:
            raise Blocked(node.lineno, f"`{func.name}` ({role}) is called here with values "
                          f"whose device axis differs from its call at line {known[1]}")
        kind = BOT
        for returned in returns or [HOST]:
            kind = _hjoin(kind, returned)
        return kind

    def _host_mapping(self, mapping: list[ast.expr], env: dict) -> bool:
        """``**vars(args)`` / ``**config``: mappings of host values only (what a script's argparse
        namespace holds), which fill the parameters the call does not name with host values."""
        return all(leaf == HOST for value in mapping for leaf in _hleaves(self.expr(value, env)))

    @staticmethod
    def _parameters(func: ast.FunctionDef, node: ast.Call, bound_self: bool,
                    filled: bool = False) -> dict[str, ast.expr] | None:
        """The parameter each argument of ``node`` binds, positional ones first (in order), then
        keywords; None where the call does not match the signature: a parameter given twice or
        not at all without a default, or ``*args`` / ``**kwargs`` to be filled. ``filled``: a
        ``**mapping`` of host values gives the others (any missing would raise in both views)."""
        args = func.args
        if args.vararg or args.kwarg or args.posonlyargs:
            return None
        positional = [a.arg for a in (args.args[1:] if bound_self else args.args)]
        if len(node.args) > len(positional):
            return None
        given = dict(zip(positional, node.args))
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            if keyword.arg in given or keyword.arg not in positional + [a.arg for a in args.kwonlyargs]:
                return None
            given[keyword.arg] = keyword.value
        with_defaults = defaulted(args)
        if not filled and any(name not in given and name not in with_defaults
                              for name in positional + [a.arg for a in args.kwonlyargs]):
            return None
        return given

    def _argument(self, node: ast.expr, env: dict):
        """The kind of an argument of a call of a function of the module: a step named there is
        passed as a ``StepRef`` (read at the call of the parameter), any other value as it is."""
        if isinstance(node, ast.Call) and id(node) in self._step_bindings:  # `run(jax.pmap(f, ...), x)`
            return StepRef(self._step_bindings[id(node)].name)
        if isinstance(node, ast.Name):
            held = env.get(node.id)
            if isinstance(held, StepRef):
                return held
            step = self._step_of(node)  # (its name holds a host value here: the pmap call's)
            if step is not None and step.holder is None:
                return StepRef(step.name)
        return self.expr(node, env)

    def _steps_only_called(self, func: ast.FunctionDef, names: list[str]) -> None:
        """Each read of a parameter holding a step is a call of it this analysis read (not one
        in a nested function or a lambda, nor the name passed on elsewhere)."""
        for node in ast.walk(func) if names else ():
            if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
                call = self.module.parent_of(node)
                if not (isinstance(call, ast.Call) and call.func is node and id(call) in self.step_ref_calls) \
                        and not self._passed_on(node):
                    raise _step_ref_used(node, self._step_ref(func, node.id))

    def _passed_on(self, node: ast.Name) -> bool:
        """Whether ``node`` is an argument of a call this analysis read the function of."""
        return id(call_given(self.module, node)) in self.reader_calls | self.method_reader_calls

    def _step_ref(self, func: ast.FunctionDef, name: str) -> str:
        return self._step_parameters.get((id(func), name), (name,))[0]

    def _no_escape(self, scope, device_names: set[str]) -> None:
        """A name that ever holds a device-axis value here must not be read from another scope (a
        nested function, another function reading a global): those reads are not followed."""
        if not device_names:
            return
        # The module's names of these identifiers, in walk order (a walk of the whole tree for each
        # driving scope made a module of many steps quadratic).
        by_id = self.module.names_at
        for _, node in sorted(item for name in device_names for item in by_id.get(name, ())):
            if not isinstance(node.ctx, ast.Load):
                continue
            if self.scope_of(node) is scope and not self._in_lambda(node, scope):
                continue
            if self._in_closure(node, scope):
                continue  # read at each of that function's calls, with this scope's values
            if any(self.scope_of(binding_node(b)) is scope for b in self.names.bindings(node)
                   if binding_node(b) is not None):
                raise Blocked(node.lineno, f"`{node.id}` (with pmap's device axis) is read in another function "
                              "or a lambda, which this fix does not follow")

    def placement_scope(self, node: ast.AST):
        """The scope whose mesh a placement at ``node`` reads: a closure's is the one of the function
        defining it (where the mesh is built above the closure's def, if not above an earlier
        placement), which every call of it follows."""
        scope = self.scope_of(node)
        while isinstance(scope, ast.FunctionDef) and id(scope) in self.closures:
            scope = self.module.parent_of(scope)
        return scope

    def _in_closure(self, node: ast.AST, scope) -> bool:
        """Whether ``node`` is in a function nested in ``scope`` (maybe in another such), each
        read as a closure at its calls there, and not where the function's defaults or decorators
        are evaluated (in ``scope``, when it is defined)."""
        inner = self.scope_of(node)
        while inner is not scope:
            if not isinstance(inner, ast.FunctionDef) or id(inner) not in self.closures \
                    or self._outside_body(node, inner):
                return False
            inner = self.module.parent_of(inner)
        return True

    def _outside_body(self, node: ast.AST, func: ast.FunctionDef) -> bool:
        return child_of(self.module, node, func) not in func.body

    def _driving_scopes(self) -> list:
        scopes: list = []
        seen: set[int] = set()
        at_once = [step.binding for step in self.steps.values() if isinstance(step.binding, ast.Call)
                   and (self._called_at_once(step.binding) or self._given_at_once(step.binding))]
        for node in [*self.module.of_type(ast.Name), *at_once]:
            if isinstance(node, ast.Call) or isinstance(node.ctx, ast.Load) and (self._step_of(node) or (
                    isinstance(self.module.parent_of(node), ast.Subscript)
                    and self._entry_of(self.module.parent_of(node)) is not None)):
                scope = self.scope_of(node)
                if isinstance(scope, ast.Lambda):
                    raise Blocked(node.lineno, f"`{self._short(node)}` is called inside a lambda, which this fix "
                                  "does not follow")
                if id(scope) not in seen:
                    seen.add(id(scope))
                    scopes.append(scope)
        # A class holding a step: every method is read (they share its attributes).
        for step in self.steps.values():
            if step.holder:
                for method in step.holder[0].body:
                    if isinstance(method, ast.FunctionDef) and id(method) not in seen:
                        seen.add(id(method))
                        scopes.append(method)
        return scopes

    def _given_at_once(self, pmap_call: ast.Call) -> bool:
        """``run_epoch(jax.pmap(train_step, ...), state)``: the step an argument where it is made."""
        call = call_given(self.module, pmap_call)
        return isinstance(call, ast.Call) and call.func is not pmap_call

    def _called_at_once(self, pmap_call: ast.Call) -> bool:
        parent = self.module.parent_of(pmap_call)
        return isinstance(parent, ast.Call) and parent.func is pmap_call

    def _in_lambda(self, node: ast.AST, scope) -> bool:
        parent = self.module.parent_of(node)
        while parent is not None and parent is not scope:
            if isinstance(parent, ast.Lambda):
                return True
            parent = self.module.parent_of(parent)
        return False

    def scope_of(self, node: ast.AST):
        parent = self.module.parent_of(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                             ast.Module, ast.ClassDef)):
            parent = self.module.parent_of(parent)
        if isinstance(parent, ast.ClassDef):
            raise Blocked(node.lineno, "a step used in a class body is not followed")
        return parent

    def _step_of(self, node: ast.Name) -> Step | None:
        if any(node is step.fun or node is step.returned for step in self.steps.values()):
            return None  # `f = jax.pmap(f, ...)`: here `f` is still the def; `return step` in a factory
        bindings = self.names.bindings(node)
        for binding in bindings:
            key = id(binding.node) if hasattr(binding, "node") else id(binding.value)
            step = self._step_bindings.get(key)
            if step is not None:
                return step
            step = self.made_by_factory(binding)
            if step is not None:
                if any(self.made_by_factory(other) is not step for other in bindings):
                    raise Blocked(node.lineno, f"`{node.id}` may be the step `{step.name}` makes or another value")
                return step
        return None

    def _entry_of(self, node: ast.Subscript) -> Step | None:
        """The step ``steps["train"]`` names: an entry of a dict literal of steps bound to that name."""
        if not (self._entries and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant)):
            return None
        for binding in self.names.bindings(node.value):
            step = self._entries.get((id(getattr(binding, "value", None)), node.slice.value))
            if step is not None:
                return step
        return None

    def made_by_factory(self, binding) -> Step | None:
        """The step a name is bound to by ``p_update = make_update(...)``, a factory's call."""
        value = getattr(binding, "value", None)
        if not (self._factories and isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return None
        for made in self.names.bindings(value.func):
            step = self._factories.get(id(getattr(made, "node", None)))
            if step is not None:
                return step
        return None

    # -- statements ------------------------------------------------------------------------

    def _block(self, body: list[ast.stmt], env: dict) -> dict:
        for stmt in body:
            env = self._stmt(stmt, env)
        return env

    def _stmt(self, node: ast.stmt, env: dict) -> dict:
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return env  # such a name may hold host values only (`_bind`)
        if isinstance(node, ast.FunctionDef):
            # Its defaults and decorators run here; its body when called: a call in this scope
            # reads it as a closure, and any other read of this scope's device-axis values in it
            # blocks (`_no_escape`).
            for part in [*node.decorator_list, *node.args.defaults, *filter(None, node.args.kw_defaults)]:
                self._host(part, env)
            return env
        if isinstance(node, (ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom,
                             ast.Pass, ast.Break, ast.Continue)):
            self._no_device_names(node, env)
            return env
        if isinstance(node, ast.Assign):
            kind = self.expr(node.value, env)
            for target in node.targets:
                self._bind(target, kind, env)
            return env
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self._bind(node.target, self.expr(node.value, env), env)
            return env
        if isinstance(node, ast.AugAssign):
            kind = self.expr(node.value, env)
            if isinstance(node.target, ast.Name):
                target = env.get(node.target.id, HOST)
            else:
                target = self.expr(node.target, env)
            averaged = _averaged_arithmetic(node.op, target, kind, lambda side: self._number(
                (node.target, node.value)[side])) if isinstance(node.target, ast.Name) else None
            if averaged is not None:  # `accuracy += metrics["accuracy"]`
                self._bind(node.target, averaged, env)
                return env
            if _carries(kind) or _carries(target):
                self._check_own(node.target, target)  # (the side that is each device's own, named)
                self._check_own(node.value, kind)
                raise Blocked(node.lineno, "augmented assignment of a value with pmap's device axis")
            return env
        if isinstance(node, (ast.Expr, ast.Assert, ast.Raise, ast.Delete)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._host(child, env)
            return env
        if isinstance(node, ast.Return):
            if self._inline and self.scope_of(node) is self._inline[-1][0]:
                # A wrapper's return: its caller gets the kind (read on, at the call).
                if self._is_generator(self._inline[-1][0]):
                    if node.value is not None:
                        self._host(node.value, env)
                    return env
                self._inline[-1][1].append(HOST if node.value is None else self.expr(node.value, env))
                return env
            if node.value is not None:
                kind = self.expr(node.value, env)
                if any(_carries(leaf) for leaf in _hleaves(kind)):
                    raise Blocked(node.lineno, "a value with pmap's device axis is returned; its callers are not "
                                  "followed")
            return env
        if isinstance(node, (ast.For, ast.While)):
            item = HOST
            if isinstance(node, ast.For):
                iterated = self.expr(node.iter, env)
                if isinstance(iterated, Source):
                    item = iterated.yields  # `for batch in data_loader(...)`
                else:
                    self._host(node.iter, env)
            else:
                self._host(node.test, env)
            entry = dict(env)
            for _ in range(2):
                if isinstance(node, ast.For):
                    self._bind(node.target, item, env)
                after = self._block(node.body, dict(env))
                env = self._merge(entry, after)
                entry = env
            return self._block(node.orelse, env)
        if isinstance(node, ast.If):
            held = self._branch_held(node)
            if held is not None:  # the pmap mode runs this branch alone, or this call's flags do
                self._host(node.test, env)
                return self._block(node.body if held else node.orelse, env)
            self._tested(node.test, env)
            return self._merge(self._block(node.body, dict(env)), self._block(node.orelse, dict(env)))
        if isinstance(node, ast.With):
            for item in node.items:
                self._host(item.context_expr, env)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, HOST, env)
            return self._block(node.body, env)
        if isinstance(node, ast.Try):
            env = self._block(node.body, env)
            for handler in node.handlers:
                env = self._merge(env, self._block(handler.body, dict(env)))
            return self._block(node.orelse + node.finalbody, env)
        raise Blocked(node.lineno, f"a `{type(node).__name__}` statement in code that drives the step")

    def _branch_held(self, node: ast.If | ast.IfExp) -> bool | None:
        """Whether the body of ``node`` is the branch that runs here: its test is the pmap mode's,
        or, in the wrapper being read, a flag this call gives a literal (``flags``); None where it
        is neither."""
        held = self.mode.branch(node.test) if self.mode is not None else None
        if held is None and self._inline and self.scope_of(node) is self._inline[-1][0]:
            held = branch(node.test, self._flags[-1])
        return held

    def _tested(self, test: ast.expr, env: dict) -> None:
        """An ``if`` test. ``if not state.batch_stats:`` asks whether a replicated pytree is empty,
        which its copies answer as the one value does (an array's truth, where it has one, is its
        one element's in both views)."""
        inner = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
        kind = self.expr(inner, env)
        if not _replicated(kind):
            self._hosted(inner, kind)

    def _unpacking_hint(self, target: ast.expr) -> str:
        """For ``a, b = shard(batch)``: why it is not followed, and the form that is."""
        statement = self.module.parent_of(target)
        value = statement.value if isinstance(statement, ast.Assign) else None
        if not (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords
                and self._qualified(value.func) in REPLICATE | SHARD
                and not isinstance(value.args[0], (ast.Tuple, ast.List))):
            return ""
        made = self.module.segment(value.func).rpartition(".")[2]
        names = ", ".join(self.module.segment(e) for e in target.elts)
        return (f" (`{self._short(value)}` may be one array, whose device axis the unpacking would iterate, "
                f"or a tuple: this fix cannot tell. Unpack the host value first and {made} the tuple: "
                f"`{names} = {self._short(value.args[0])}`, then `{names} = {made}(({names}))`)")

    def _merge(self, a: dict, b: dict) -> dict:
        return {name: _hjoin(a.get(name, BOT), b.get(name, BOT)) for name in set(a) | set(b)}

    def _no_device_names(self, node: ast.AST, env: dict, where: str = "a nested function") -> None:
        """A nested def or class (or a comprehension's body: ``where`` says which) must not capture
        a device value (its uses are not followed)."""
        outer = self.scope_of(node) if not isinstance(node, ast.Lambda) else None
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and _carries(env.get(sub.id)) and sub is not node:
                if outer is not None and not any(self.scope_of(binding_node(b)) is outer
                                                 for b in self.names.bindings(sub) if binding_node(b) is not None):
                    continue  # the nested function's own name (a parameter), not the outer value
                raise Blocked(sub.lineno, f"`{sub.id}` (with pmap's device axis) is used inside {where}, which "
                              "this fix does not follow")

    def _bind(self, target: ast.expr, kind, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = kind
            if any(_carries(leaf) for leaf in _hleaves(kind)):
                if target.id in self._shared(self.scope_of(target)):
                    raise Blocked(target.lineno, f"`{target.id}` is declared `global` / `nonlocal` and gets a value "
                                  "with pmap's device axis, read elsewhere where this fix does not follow")
                self._device_names.add(target.id)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(kind, tuple) and len(kind) == len(target.elts):
                for element, item in zip(target.elts, kind):
                    self._bind(element, item, env)
                return
            if _carries(kind) or isinstance(kind, tuple):
                raise Blocked(target.lineno, "a value with pmap's device axis is unpacked in a way this fix does "
                              "not follow" + self._unpacking_hint(target))
            for element in target.elts:
                self._bind(element.value if isinstance(element, ast.Starred) else element,
                           BOT if kind == BOT else HOST, env)
            return
        held = self_attribute(self.module, target) if self._assigned else None
        if held is not None and (id(held[0]), held[1]) in self._assigned:
            key = (id(held[0]), held[1])
            if key in self._held:
                if isinstance(self.module.parent_of(target), ast.Assign) \
                        and self.module.parent_of(target).value is self._held[key].binding:
                    return  # `self.p_train_step = jax.pmap(...)`: the step itself
                raise Blocked(target.lineno, f"`{self._short(target)}`, which holds the pmapped step, is assigned "
                              "again")
            joined = _hjoin(self.attributes.get(key, BOT), kind)
            if MIXED in _hleaves(joined):
                raise Blocked(target.lineno, f"`{self._short(target)}` holds values with pmap's device axis and "
                              "values without it (or laid out differently) at different assignments")
            self.attributes[key] = joined
            return
        entry = _literal_key(target)
        if entry is not None and isinstance(target.value, ast.Name) and kind == HOST:
            batch = env.get(target.value.id)
            if batch in (DSHARD, SOURCED) or isinstance(batch, HostEntries):
                split, keys = (batch.split, batch.keys) if isinstance(batch, HostEntries) else (batch, frozenset())
                env[target.value.id] = HostEntries(split, keys | {entry})  # `batch["epoch"] = epoch`
                return
        # An attribute or item: the value escapes where this fix cannot follow it.
        if any(_carries(leaf) for leaf in _hleaves(kind)):
            raise Blocked(target.lineno, "a value with pmap's device axis is stored in an attribute or container, "
                          "which this fix does not follow")
        self._host(target, env)

    # -- expressions -----------------------------------------------------------------------

    def _host(self, node: ast.expr, env: dict) -> None:
        self._hosted(node, self.expr(node, env))

    def _hosted(self, node: ast.expr, kind) -> None:
        """``node``, whose kind is ``kind``, is read where only host values have a counterpart."""
        self._check_own(node, kind)
        if MIXED in _hleaves(kind):
            raise Blocked(node.lineno, f"`{self._short(node)}` has pmap's device axis on one path to here and not on "
                          "another (a loop that may run no time, a branch), so which it holds here is not known")
        if any(_carries(leaf) for leaf in _hleaves(kind)):
            raise Blocked(node.lineno, f"`{self._short(node)}` has pmap's device axis here, where the global "
                          "view has no counterpart")

    def _check_own(self, node: ast.expr, kind) -> None:
        means = any(leaf in (OWN_MEAN, OWN_MEANS) for leaf in _hleaves(kind))
        if OWN in _hleaves(kind) or means:
            averaged = (" (host code that only adds such means up, adds host values or scales by Python "
                        "numbers and at last averages them, `jnp.mean(x)`, reads the global mean in both views)"
                        ) if means else ""
            raise Blocked(node.lineno, f"`{self._short(node)}` is each device's own value: the step returns it "
                          "as a mean or sum over the device's slice of the batch without `pmean`/`psum`, so pmap "
                          "gives one value per device (reading device 0's takes that device's), where the global "
                          f"view computes one over the whole batch{averaged}")

    def _averages(self, fn: ast.expr) -> bool:
        """``fn``, mapped over a tree's leaves, averages each whole: ``jnp.mean`` itself, or a lambda
        whose body is ``jnp.mean(x)`` or ``x.mean()`` of its parameter, maybe read out with
        ``.item()`` or ``float(...)``."""
        if not isinstance(fn, ast.Lambda):
            return self._qualified(fn) in _MEANS
        param, body = only_parameter(fn.args), fn.body
        if isinstance(body, ast.Call) and not body.keywords and (
                isinstance(body.func, ast.Attribute) and body.func.attr == "item" and not body.args
                or self.names.builtin(body.func) == "float" and len(body.args) == 1):
            body = body.args[0] if body.args else body.func.value
        averaged = self._mean_of(body) if isinstance(body, ast.Call) else None
        return param is not None and isinstance(averaged, ast.Name) and averaged.id == param

    def _mean_of(self, call: ast.Call) -> ast.expr | None:
        """What ``call`` averages whole: ``x`` of ``jnp.mean(x)``, ``np.mean(x)`` or ``x.mean()``."""
        if call.keywords:
            return None
        if self._qualified(call.func) in _MEANS:
            return call.args[0] if len(call.args) == 1 else None
        if isinstance(call.func, ast.Attribute) and call.func.attr == "mean" and not call.args:
            return call.func.value
        return None

    def _averaged_here(self, node: ast.Call) -> None:
        """``node`` averages per-shard means over the devices: the global mean in one process."""
        processes = planner_of(self.module).multi_process
        if processes:
            raise Blocked(node.lineno, f"`{self._short(node)}` averages per-shard means the step returns one "
                          "per device: under pmap the devices are this process's only, where the global view "
                          f"averages over every process's (this module runs as several processes: {processes})")
        self.averaged.add(node.lineno)

    def _number(self, node: ast.expr, seen: frozenset[str] = frozenset()) -> bool:
        """A Python number on the host: a numeric literal, ``len(...)``, ``int(...)``, ``float(...)``,
        ``x.item()``, arithmetic of those, or a name every assignment of which is one (``n = 0`` and
        ``n += 1``)."""
        if isinstance(node, ast.Constant):
            return type(node.value) in (int, float)
        if isinstance(node, ast.UnaryOp):
            return self._number(node.operand, seen)
        if isinstance(node, ast.BinOp):
            return self._number(node.left, seen) and self._number(node.right, seen)
        if isinstance(node, ast.Call):
            return self.names.builtin(node.func) in ("len", "int", "float") or isinstance(node.func, ast.Attribute) \
                and node.func.attr == "item" and not node.args and not node.keywords
        if not isinstance(node, ast.Name):
            return False
        if node.id in seen:
            return True  # (`n += 1`: a number where `n` is)
        values = []
        for binding in self.names.bindings(node):
            statement = self.module.parent_of(binding.node) if isinstance(binding, OpaqueBinding) else None
            if isinstance(binding, ValueBinding):
                values.append(binding.value)
            elif isinstance(statement, ast.AugAssign) and statement.target is binding.node:
                values.append(statement.value)
            else:
                return False
        return bool(values) and all(self._number(value, seen | {node.id}) for value in values)

    def _short(self, node: ast.AST) -> str:
        return short(self.module, node)

    def expr(self, node: ast.expr, env: dict):
        if isinstance(node, ast.Name):
            kind = env.get(node.id)
            if kind is None:
                if self._step_of(node) is not None:
                    raise Blocked(node.lineno, step_used_as_value(self.module, node))
                return HOST
            if isinstance(kind, StepRef):
                raise _step_ref_used(node, kind.name)
            return HOST if kind == EMPTY else kind
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, ast.Attribute) and self._assigned:
            held = self_attribute(self.module, node)
            if held is not None and (id(held[0]), held[1]) in self._assigned:
                if (id(held[0]), held[1]) in self._held:
                    raise Blocked(node.lineno, f"`{self._short(node)}` is used other than by calling it")
                return self.attributes.get((id(held[0]), held[1]), BOT)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, env)
        if isinstance(node, ast.Attribute) and node.attr not in _ARRAY_ATTRIBUTES:
            base = self.expr(node.value, env)
            if base in (DREP, BOT):  # BOT: a step's output, not known yet on this round
                return base  # a field of a replicated pytree (`state.params` of a flax TrainState) is one too
            if isinstance(base, KeyedState):
                return DKEYS if node.attr in base.keys else DREP
            if base == DOUTPUTS:
                return DSHARD  # `outputs.start_logits`
        if isinstance(node, ast.List) and not node.elts:
            return EMPTY
        if isinstance(node, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return tuple(self.expr(e, env) for e in node.elts)
        if isinstance(node, ast.Dict) and node.values and all(key is not None for key in node.keys):
            for key in node.keys:
                self._host(key, env)
            kinds = {self.expr(value, env) for value in node.values}
            known = kinds - {BOT}  # BOT: a step's output not known yet on this round
            if not known:
                return BOT
            # A dict whose every value is replicated (or every one split, or every one a key per
            # device: `rngs = {"params": shard_prng_key(k1), "dropout": shard_prng_key(k2)}`) is
            # such a tree itself.
            if len(known) == 1 and next(iter(known)) in (HOST, DREP, DSHARD, DKEYS, OWN_MEAN):
                return known.pop()
            if any(_carries(leaf) for kind in kinds for leaf in _hleaves(kind)):
                raise Blocked(node.lineno, f"`{self._short(node)}` mixes values with and without pmap's device "
                              "axis, or laid out differently")
            return HOST
        if isinstance(node, ast.DictComp):
            mapped = self._dict_map(node, env)
            if mapped is not None:
                return mapped
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) and node.generators:
            # Its first iterable is evaluated here, in this scope (`[p for p in chain(*predictions)]`);
            # the rest runs in the comprehension's own, which must not read a device-axis value.
            self._host(node.generators[0].iter, env)
            for part in [*(getattr(node, f) for f in ("elt", "key", "value") if hasattr(node, f)),
                         *node.generators[0].ifs, *node.generators[1:]]:
                self._no_device_names(part, env, "a comprehension (write it as a loop)")
            return HOST
        if isinstance(node, ast.Lambda):
            self._no_device_names(node, env)
            return HOST
        if isinstance(node, ast.BinOp):  # `accuracy + metrics["accuracy"] * 0.5`
            averaged = _averaged_arithmetic(node.op, self.expr(node.left, env), self.expr(node.right, env),
                                            lambda side: self._number((node.left, node.right)[side]))
            if averaged is not None:
                return averaged
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
                and self.expr(node.operand, env) == OWN_MEAN:
            return OWN_MEAN
        held = self._branch_held(node) if isinstance(node, ast.IfExp) else None
        if held is not None:  # `x[0] if args.pmap else x`: the branch the pmap mode (or the call's flags) runs
            self._host(node.test, env)
            return self.expr(node.body if held else node.orelse, env)
        if isinstance(node, ast.Yield) and self._inline and self.scope_of(node) is self._inline[-1][0]:
            self._inline[-1][1].append(HOST if node.value is None else self.expr(node.value, env))
            return HOST  # what `send` gives back: nothing of the device axis
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._host(child, env)
            elif isinstance(child, ast.keyword):
                self._host(child.value, env)
        return HOST

    def _dict_map(self, node: ast.DictComp, env: dict):
        """``{k: v.reshape((n, -1) + v.shape[1:]) for k, v in batch.items()}``: a tree map over a
        dict's values written as a comprehension (a werewolf-game classifier splits its batch so,
        then lays it out with ``device_put_sharded``): the value read with ``v`` of the dict's kind,
        the result a dict of what it makes of each. None where it is not that, or makes something
        else (what its reading recorded goes)."""
        loop = node.generators[0] if len(node.generators) == 1 else None
        target = loop.target if loop is not None else None
        if loop is None or loop.ifs or loop.is_async or not (
                isinstance(target, ast.Tuple) and len(target.elts) == 2
                and all(isinstance(e, ast.Name) for e in target.elts)):
            return None
        key, value = target.elts
        items = loop.iter
        if not (isinstance(items, ast.Call) and isinstance(items.func, ast.Attribute) and items.func.attr == "items"
                and not items.args and not items.keywords and isinstance(node.key, ast.Name) and node.key.id == key.id):
            return None
        source = self.expr(items.func.value, env)
        if source not in (HOST, DSHARD, SOURCED):
            return None
        before = set(self.edits)
        kind = self.expr(node.value, {**env, key.id: HOST, value.id: source})
        if kind in (HOST, DSHARD, SOURCED, DKEYS):
            return kind
        for made in set(self.edits) - before:
            del self.edits[made]
        return None

    def _subscript(self, node: ast.Subscript, env: dict):
        inner = node.value
        if is_zero(node.slice):
            # jax.device_get(x)[0] reads device 0's copy just as x[0] does.
            if isinstance(inner, ast.Call) and self._qualified(inner.func) == "jax.device_get" and len(inner.args) == 1:
                kind = self.expr(inner.args[0], env)
                if _replicated(kind):
                    self._device_zero(node, inner.args[0], env)
                    self._edit(node, "index", inner)
                    return HOST
            kind = self.expr(inner, env)
            if _replicated(kind):
                self._device_zero(node, inner, env)
                self._edit(node, "index", inner)
                return HOST
            if isinstance(kind, tuple):
                return kind[0]
        if _is_last(node.slice) and self.expr(inner, env) == DREP:
            # `loss[-1]`: the last device's copy, which is device 0's (per-device keys are not)
            self._device_zero(node, inner, env)
            self._edit(node, "index", inner)
            return HOST
        self._host(node.slice, env)
        kind = self.expr(inner, env)
        if isinstance(kind, HostEntries) and _literal_key(node.slice) is not None:
            return HOST if _literal_key(node.slice) in kind.keys else kind.split
        if kind in (DREP, BOT, DSHARD, SOURCED, OWN_MEAN) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            return kind  # a dict entry of a pytree (`params["dense"]`, `batch["labels"]`) is laid out as it is
        if kind == DOUTPUTS and isinstance(node.slice, ast.Constant) and type(node.slice.value) in (int, str):
            return DSHARD  # `predictions[0]`: a field of the outputs, not device 0's slice
        if isinstance(kind, tuple) and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int:
            try:
                return kind[node.slice.value]
            except IndexError:
                pass
        self._check_own(inner, kind)
        if any(_carries(leaf) for leaf in _hleaves(kind)):
            raise Blocked(node.lineno, f"`{self._short(node)}` indexes a value with pmap's device axis")
        return HOST

    def _device_zero(self, node: ast.Subscript, indexed: ast.expr, env: dict) -> None:
        """``node``, ``x[0]`` of a replicated ``x``, reads device 0's copy only where ``x`` is one
        array: of a tuple or list it is the first part under pmap too (``arrays``)."""
        given: dict = {}
        for (func, _), passed in zip(self._inline, self._passed):  # the calls being read, outermost first
            params = {a.arg: a for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
            given = {**given, **{id(params[name]): (value, given) for name, value in passed.items() if name in params}}
        proof = ArrayProof(self.module, lambda call: self._step_function(call, env))
        if not proof.one_array(indexed, given):
            needed = proof.annotations_needed(indexed, given)
            hint = "; it can where {} annotated `jax.Array`".format(
                " and ".join(f"parameter `{p.arg}` (line {p.lineno}) is" for p in needed)) if needed else ""
            raise Blocked(node.lineno, f"`{self._short(node)}` may take the first part of a tuple or list (which "
                          f"stays under pmap), not device 0's copy: this fix reads `x[0]` of a replicated value as "
                          f"device 0's copy only where it can tell `{self._short(indexed)}` is one array{hint}")

    def _step_function(self, call: ast.Call, env: dict) -> tuple[ast.FunctionDef, bool] | None:
        """The def a call of a step runs, and whether the call's arguments are its parameters."""
        step = self._called_step(call.func, env)
        if step is None or step.func is None:
            return None
        return step.func, not (step.bound or step.keyword_only)

    def _called_step(self, func: ast.expr, env: dict) -> Step | None:
        """The step ``func(...)`` calls: ``jax.pmap(f, "i")``, ``steps["train"]``,
        ``self.p_train_step``, a parameter holding a step (``StepRef``), a name bound to one."""
        if isinstance(func, ast.Call):
            return self._step_bindings.get(id(func))
        if isinstance(func, ast.Subscript):
            return self._entry_of(func)
        if isinstance(func, ast.Attribute):
            held = self_attribute(self.module, func) if self._held else None
            return self._held.get((id(held[0]), held[1])) if held is not None else None
        if isinstance(func, ast.Name):
            ref = env.get(func.id)
            return self.steps[ref.name] if isinstance(ref, StepRef) else self._step_of(func)
        return None

    def _qualified(self, node: ast.expr) -> str | None:
        return self.names.qualified_name(node)

    def _call(self, node: ast.Call, env: dict):
        """What a call gives: the forms this analysis knows are tried in the order below, and the
        first that applies answers (a form answers None where the call is not of it); any other
        call is read as such (``_generic``)."""
        kind = self._call_of_a_step(node, env)
        if kind is not None:
            return kind
        func = node.func
        qualified = self._qualified(func)
        arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
        for form in (self._call_reading_device_values, self._call_of_a_helper, self._call_of_a_reader,
                     self._call_collecting, self._call_laying_out, self._call_of_batch_entries,
                     self._call_splitting):
            kind = form(node, qualified, arg, env)
            if kind is not None:
                return kind
        if self._writes_out(func, qualified):
            return self._written_out(node, env)
        replaced = self._replaced(node, env)
        if replaced is not None:
            return replaced
        if self.names.builtin(func) == "hasattr" and len(node.args) == 2 and not node.keywords \
                and _replicated(self.expr(node.args[0], env)):
            self._host(node.args[1], env)
            return HOST  # (its fields are the same in both views)
        return self._generic(node, env)

    def _call_of_a_step(self, node: ast.Call, env: dict):
        """A call of a pmapped step (by name, attribute, subscript or at once), of its
        `pad_shard_unpad` wrapper, of a method of the object holding it, or of a wrapper of
        the module that drives it; None for another call."""
        func = node.func
        if isinstance(func, (ast.Call, ast.Subscript)) and (step := self._called_step(func, env)) is not None:
            return self._step_call(step, node, env)  # jax.pmap(f, "i")(x), steps["train"](x)
        if isinstance(func, ast.Call) and self._qualified(func.func) == PAD_SHARD_UNPAD and func.args \
                and isinstance(func.args[0], ast.Name) and self._step_of(func.args[0]) is not None:
            return self._padded_step_call(self._step_of(func.args[0]), node, env, func)
        stored = stored_pad_wrapper(self.module, func) if isinstance(func, ast.Name) else None
        if stored is not None and self._step_of(stored.args[0]) is not None:  # p_eval_step_pad(params, batch)
            return self._padded_step_call(self._step_of(stored.args[0]), node, env, stored)
        if isinstance(func, ast.Attribute) and self._held:
            step = self._called_step(func, env)
            if step is not None:  # self.p_train_step(...)
                return self._step_call(step, node, env)
            method = self._method(self_attribute(self.module, func))
            if method is not None and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
                kinds = [self.expr(a, env) for a in node.args]
                if id(method) in self.method_readers or any(_carries(leaf) for k in kinds for leaf in _hleaves(k)):
                    self.method_readers[id(method)] = method
                    self.method_reader_calls.add(id(node))
                    return self._wrapper_call(method, node, env, kinds, bound_self=True)
                return HOST  # a method given host values (read above): read on its own, as an entry point
        if isinstance(func, ast.Name):
            if isinstance(env.get(func.id), StepRef):
                self.step_ref_calls.add(id(node))
            elif self._factories and any(id(getattr(b, "node", None)) in self._factories
                                         for b in self.names.bindings(func)):
                self.factory_calls.add(id(node))  # its arguments are read below, as any call's
            step = self._called_step(func, env)
            if step is not None:
                return self._step_call(step, node, env)
            bindings = self.names.bindings(func)
            if len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) and id(bindings[0].node) in self.wrappers:
                wrapper = bindings[0].node
                return self._wrapper_call(wrapper, node, env, closure=self._closure(wrapper, node, env))
        return None

    def _call_reading_device_values(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """Host reads of values with pmap's device axis: `jax.device_get`, conversions, stacks and sums
        of per-device means, `len`, averages, `next` of a batch source, iterators over batches."""
        func = node.func
        fetched = self.expr(arg, env) if qualified == "jax.device_get" and arg is not None else None
        if fetched in (DREP, OWN_MEAN):
            return fetched  # (the same values, on the host)
        converted = self._converted(node, qualified)
        split = self.expr(converted, env) if converted is not None else None
        if split in (DSHARD, SOURCED):
            return split  # `jnp.asarray(x, dtype=jnp.int32)`: each row as it was
        if arg is not None and (qualified in STACKS or self.names.builtin(func) == "sum") \
                and self.expr(arg, env) == OWN_MEANS:
            return OWN_MEAN  # `jnp.stack(losses)`, `sum(losses)`: the means of each device still apart
        if arg is not None and self.names.builtin(func) == "len" and self.expr(arg, env) in (DLIST, OWN_MEANS):
            return HOST  # (how many were appended, the same in both views)
        if qualified in TREE_MAPS and len(node.args) == 2 and not node.keywords and self._averages(node.args[0]):
            tree = self.expr(node.args[1], env)
            if tree in (OWN_MEAN, OWN_MEANS):
                self._averaged_here(node)
            if tree in (DREP, DLIST, OWN_MEAN, OWN_MEANS):
                return HOST  # `jax.tree.map(jnp.mean, metrics)`: each leaf averaged, as below
        averaged = self._mean_of(node)
        averaged_kind = self.expr(averaged, env) if averaged is not None else None
        if averaged_kind in (OWN_MEAN, OWN_MEANS):
            self._averaged_here(node)  # the devices' per-shard means averaged: the global mean
        if averaged_kind in (DREP, DLIST, OWN_MEAN, OWN_MEANS):
            return HOST  # (of equal copies, the value's own mean)
        if arg is not None and self.names.builtin(func) == "next":
            source = self.expr(arg, env)
            if isinstance(source, Source):
                return source.yields  # `batch = next(batches)`
        wrapped = self._iterating(node, qualified, env)
        if wrapped is not None:
            return wrapped
        mapped = self._mapped_batches(node, qualified, env)
        if mapped is not None:
            return mapped
        return None

    def _call_of_a_helper(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """A replicate, shard or unreplicate written as a helper of the program (or the HF examples'
        `state.replicate()`)."""
        func = node.func
        method = self.helpers.replicate_method(node)
        if method is not None and self.expr(func.value, env) == HOST:  # the HF examples' state.replicate()
            self._edit(node, "replicate", func.value, helper=method[0], keys=method[1])
            return KeyedState(method[1]) if method[1] else DREP
        helper = self.helpers.of_call(node)
        if helper is not None:
            value, *taken = arguments(helper, node)
            kind = self.expr(value, env)
            for devices in taken:
                self._host(devices, env)  # (every local device, or their count: `of_call` checked)
            if _takes(helper.action, kind):
                if helper.action in _READS_DEVICE_ZERO and not helper.per_leaf:
                    self._device_zero(node, value, env)  # `return x[0]`: of a tuple, its first part
                self._edit(node, helper.action, value, helper)
                return _per_item(value, self._made_by(helper.action, node))
        return None

    def _call_of_a_reader(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """A call of a function of the module, read with the values given (or as an entry point where
        given host values only)."""
        func = node.func
        reader = self._reader(func)
        if reader is not None and not any(isinstance(a, ast.Starred) for a in node.args) \
                and all(k.arg is not None for k in node.keywords):
            kinds = [self._argument(a, env) for a in node.args]
            passed = kinds + [self._argument(k.value, env) for k in node.keywords]
            closure = self._closure(reader, node, env)
            if id(reader) in self.readers or closure or any(
                    _carries(leaf) or isinstance(leaf, StepRef) for k in passed for leaf in _hleaves(k)):
                self._read_at(reader, node)
                return self._wrapper_call(reader, node, env, kinds, closure=closure)
            if self._is_generator(reader) and self._splits_batches(reader) or self._maps_batches(reader) \
                    or self._forwards_batches(reader):
                # Read to tell whether it yields batches split per device; one that yields host
                # values is any function given host values, and what the reading found goes.
                before = set(self.edits)
                made = self._wrapper_call(reader, node, env, kinds)
                if isinstance(made, Source):
                    self._read_at(reader, node)
                    self._batch_sources.add(id(reader))
                    return made
                for key in set(self.edits) - before:
                    del self.edits[key]
            elif self._splits_batches(reader):
                made = self._batches_made(reader, node, env, kinds)
                if made is not None:
                    return made
            self._given_host.setdefault(id(reader), (reader, set()))[1].add(id(node))
            return HOST  # a function of the module given host values (read above), as any call
        return None

    def _call_collecting(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """`losses.append(...)` of per-device values, and flax's `get_metrics` of such a list."""
        func = node.func
        if arg is not None and isinstance(func, ast.Attribute) and func.attr == "append" \
                and isinstance(func.value, ast.Name) and env.get(func.value.id) in (EMPTY, DLIST, OWN_MEANS):
            kind, listed = self.expr(arg, env), env.get(func.value.id)
            if kind == DREP and listed != OWN_MEANS or kind == OWN_MEAN and listed != DLIST:
                # (flax's train_metrics.append(metrics); losses.append(metrics["loss"]))
                env[func.value.id] = DLIST if kind == DREP else OWN_MEANS
                self._device_names.add(func.value.id)
                return HOST
            if env.get(func.value.id) == EMPTY and kind in (HOST, EMPTY):
                env[func.value.id] = HOST
                return HOST
        if arg is not None and qualified == GET_METRICS and self.expr(arg, env) == DLIST:
            self._edit(node, "metrics", arg)
            return HOST
        return None

    def _call_laying_out(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """What puts values on the devices with pmap's axis: flax's `replicate` / `shard` /
        `unreplicate`, keys split per device, `device_put_replicated` / `device_put_sharded`, tree
        maps of leaf functions, stacks of one batch per device, copies of one value per device."""
        if arg is not None and qualified in REPLICATE | SHARD | UNREPLICATE:
            kind = self.expr(arg, env)
            if qualified in UNREPLICATE:
                if _replicated(kind):
                    self._edit(node, "index", arg)
                    return HOST
            elif all(leaf == HOST for leaf in _hleaves(kind)):
                self._edit(node, "replicate" if qualified in REPLICATE else "shard", arg)
                return _per_item(arg, DREP if qualified in REPLICATE else self._sharded(node))
        split = self._keys_split_per_device(node, qualified)
        if split is not None or qualified == SHARD_PRNG_KEY and arg is not None:
            key = (split or node).args[0]
            self._host(key, env)
            if split not in (None, node):
                self._unedit(split)  # (the stack's split, read above: the stack goes whole)
            self._edit(node, "key", key)
            return DKEYS
        if qualified == DEVICE_PUT_REPLICATED and len(node.args) == 2 and not node.keywords \
                and self.shapes.is_replication_target(node.args[1]):
            self._host(node.args[0], env)
            self._edit(node, "replicate", node.args[0])
            return DREP
        if qualified == DEVICE_PUT_SHARDED and len(node.args) == 2 and not node.keywords \
                and self.shapes.is_replication_target(node.args[1]):
            rows = _listed(node.args[0], self.names)
            if rows is not None and self.expr(rows, env) in (DSHARD, SOURCED, DKEYS):
                # `device_put_sharded(list(x), devices)` of a split already made (flax's
                # `prefetch_to_device` does so): slice i onto device i, where the split's layout
                # puts it too; the transfer goes.
                self._host(node.args[1], env)
                self._edit(node, "transfer", rows)
                return self.expr(rows, env)
        if qualified in TREE_MAPS and len(node.args) == 2 and not node.keywords \
                and isinstance(node.args[0], (ast.Lambda, ast.Name)):
            # (a leaf function bound to a name, `replicate_array = lambda x: np.broadcast_to(...)`,
            # as JAX's own pmap example writes it)
            leaf = self.helpers.of_leaf_function(node.args[0]) if isinstance(node.args[0], ast.Name) else None
            action = leaf.action if leaf is not None else self.shapes.tree_map_action(node.args[0]) \
                if isinstance(node.args[0], ast.Lambda) else None
            kind = self.expr(node.args[1], env)
            if action is not None and _takes(action, kind):
                self._edit(node, action, node.args[1], helper=leaf)
                return self._made_by(action, node)
        listed = stacked_per_device(self.module, self.shapes.is_device_count, node)
        if listed is not None and all(leaf == HOST for leaf in _hleaves(self.expr(listed, env))):
            self._edit(node, "shard", node, stacked=node.func)  # `jnp.stack(xs)` of one batch per device
            return self._sharded(node)
        copied = _copied_name(node)  # `jnp.broadcast_to(w, (n,) + w.shape)`, `np.stack([w] * n)`
        if copied is not None and self.shapes.leaf_action(node, copied.id) == "replicate" \
                and self.expr(copied, env) == HOST:
            self._edit(node, "replicate", copied)
            return DREP
        copied = self.shapes.copied_once(node)  # `jnp.stack([jnp.zeros((4, 2))] * n)`
        if copied is not None and self.expr(copied, env) == HOST:
            self._edit(node, "replicate", copied)
            return DREP
        return None

    def _call_of_batch_entries(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """`batch.pop(...)` / `.get(...)` of a batch split per device, `itertools.chain(*rows)`."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("pop", "get") and node.args and not node.keywords:
            base = self.expr(func.value, env)
            if isinstance(base, HostEntries):
                for part in node.args:
                    self._host(part, env)
                entry = _literal_key(node.args[0])
                if entry not in base.keys:
                    return base.split  # an entry of the batch split per device
                if func.attr == "pop" and isinstance(func.value, ast.Name):
                    keys = base.keys - {entry}
                    env[func.value.id] = HostEntries(base.split, keys) if keys else base.split
                return HOST  # `epoch = batch.pop("epoch", 0)`: the host value given it
            if base in (DSHARD, SOURCED):
                for key in node.args:
                    self._host(key, env)
                return base  # `labels = batch.pop("labels")`: an entry of a batch split per device
        if qualified == "itertools.chain" and len(node.args) == 1 and isinstance(node.args[0], ast.Starred) \
                and not node.keywords:
            inner = node.args[0].value
            kind = self.expr(inner, env)
            if kind in (DSHARD, SOURCED):
                # `chain(*predictions)`: the rows of every device's slice, in order; the global
                # view's array holds them so. An iterator, though, where it is not iterated at once
                # (`np.array(chain(*mask))` is an array of one object, not of the rows).
                self._unshard(node, inner, kind, iterator=not self._iterated(node))
                return HOST
        return None

    def _call_splitting(self, node: ast.Call, qualified: str | None, arg: ast.expr | None, env: dict):
        """A host batch split per device: by a reshape written out, `device_put_sharded` of a split,
        or einops."""
        func = node.func
        if qualified in RESHAPES and len(node.args) == 2 and not node.keywords:  # jnp.reshape(x, (n, -1) + ...)
            if self.expr(node.args[0], env) == HOST and self.shapes.is_shard_reshape(node.args[0], node.args[1:]):
                self._host(node.args[1], env)
                self._edit(node, "shard", node.args[0])
                return self._sharded(node)
            if self.expr(node.args[0], env) == HOST:
                split = self._written_split(node, node.args[1:], env)
                if split is not None:
                    return split
        split_from = self.shapes.split_per_device(node) if qualified == DEVICE_PUT_SHARDED else None
        if split_from is not None and self.expr(split_from, env) == HOST:  # device_put_sharded(jnp.split(x, n), devices)
            self._host(node.args[0].args[1], env)
            self._host(node.args[1], env)
            self._edit(node, "shard", split_from)
            return self._sharded(node)
        if qualified == REARRANGE:
            split = self._einops_split(node, env)
            if split is not None:
                return split
        if qualified == REPEAT and node.args and self.shapes.einops_action(node) == "replicate" \
                and self.expr(node.args[0], env) == HOST:  # `repeat(key, "k -> d k", d=n)`
            self._edit(node, "replicate", node.args[0])
            return DREP
        if isinstance(func, ast.Attribute) and func.attr == "reshape":
            base = self.expr(func.value, env)
            if base == HOST and self.shapes.is_shard_reshape(func.value, node.args):
                self._edit(node, "shard", func.value)
                return self._sharded(node)
            if base == HOST and not node.keywords:
                split = self._written_split(node, node.args, env)
                if split is not None:
                    return split
            if base == DSHARD and self.shapes.is_unshard_reshape(func.value, node.args):
                self._unshard(node, func.value, base)
                return HOST
            if base in (DSHARD, SOURCED) and not node.keywords and self.shapes.is_row_reshape(func.value, node.args):
                # `labels.reshape(-1, labels.shape[-1])`: the same rows either way, nothing to rewrite
                self._unshard(node, func.value, base, rewrite=False)
                for size in node.args:
                    if not any(isinstance(n, ast.Attribute) and n.attr == "shape" for n in ast.walk(size)):
                        self._host(size, env)
                return HOST
        return None

    def _converted(self, node: ast.Call, qualified: str | None) -> ast.expr | None:
        """What ``node`` makes an array of, element by element (``jnp.asarray(x, dtype=jnp.int32)``,
        ``np.array(x)``, ``x.astype(np.float32)``): a split batch converted so is the same split of
        the converted batch, in either view."""
        if qualified in _CONVERSIONS and len(node.args) == 1 and all(k.arg == "dtype" for k in node.keywords):
            return node.args[0]
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "astype" and len(node.args) + len(node.keywords) == 1 \
                and all(k.arg == "dtype" for k in node.keywords):
            return func.value
        return None

    def _replaced(self, node: ast.Call, env: dict):
        """``state.replace(batch_stats=synced)`` (a flax struct's, ``_replace`` a named tuple's): a
        replicated pytree with some fields swapped for other replicated values is replicated itself."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _REPLACES and not node.args and node.keywords
                and all(k.arg is not None for k in node.keywords)):
            return None
        base = self.expr(func.value, env)
        if base not in (DREP, BOT):
            return None
        kinds = {self.expr(k.value, env) for k in node.keywords} | {base}
        if not kinds <= {DREP, BOT}:
            return None
        return BOT if kinds == {BOT} else DREP

    def _made_by(self, action: str, node: ast.Call):
        """The kind of what ``node``, a helper's or a leaf function's ``action``, makes."""
        return HOST if action in _READS_DEVICE_ZERO else DREP if action == "replicate" else self._sharded(node)

    def _writes_out(self, func: ast.expr, qualified: str | None) -> bool:
        """Whether the call only prints or logs its arguments."""
        if self.names.builtin(func) == "print" or qualified in _LOG_FUNCTIONS:
            return True
        if not (isinstance(func, ast.Attribute) and func.attr in _LOG_LEVELS and isinstance(func.value, ast.Name)):
            return False
        logger = single_value(self.names, func.value)  # `logger = logging.getLogger(__name__)`
        return isinstance(logger, ast.Call) and self._qualified(logger.func) in _GET_LOGGER

    def _written_out(self, node: ast.Call, env: dict):
        """``logging.info(metrics)``, ``print(f"loss {metrics['loss']}")`` of a replicated value: the
        global view writes the one value where pmap's wrote a copy per device; nothing computed
        reads it. (A value split per device, or each device's own, would be written as other numbers.)"""
        parts, shown = [*node.args, *(k.value for k in node.keywords)], []
        while parts:
            part = parts.pop(0)
            if isinstance(part, ast.JoinedStr):  # an f-string: its fields are written out
                parts += [v for v in part.values if isinstance(v, ast.FormattedValue)]
            elif isinstance(part, ast.FormattedValue):
                parts += [part.value] + ([part.format_spec] if part.format_spec is not None else [])
            else:
                shown.append(part)
        for arg in shown:
            kind = self.expr(arg, env)
            leaves = set(_hleaves(kind))
            if DREP in leaves and leaves <= {DREP, HOST} and not isinstance(arg, ast.Starred):
                self.logged.add(node.lineno)
            else:
                self._hosted(arg, kind)
        return HOST

    def _iterating(self, node: ast.Call, qualified: str | None, env: dict) -> Source | None:
        """``enumerate(batches)``, ``zip(steps, batches)``, ``tqdm(batches, ...)`` over a generator of
        batches split per device: an iterator of the same values (in tuples for the first two)."""
        func = node.func
        builtin = self.names.builtin(func)
        if builtin not in ("enumerate", "zip") and qualified not in _PROGRESS_BARS or not node.args \
                or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        kinds = [self.expr(a, env) for a in node.args]
        if not any(isinstance(k, Source) for k in kinds):
            return None
        for keyword in node.keywords:
            self._host(keyword.value, env)
        if qualified in _PROGRESS_BARS:
            if not isinstance(kinds[0], Source) or len(kinds) > 1 and any(_carries(k) for k in kinds[1:]):
                return None
            return kinds[0]
        if builtin == "enumerate" and isinstance(kinds[0], Source) and len(kinds) <= 2:
            if len(kinds) == 2:
                self._host(node.args[1], env)  # `enumerate(batches, 1)`
            return Source((HOST, kinds[0].yields))
        if builtin == "zip":
            for kind, arg in zip(kinds, node.args):
                if not isinstance(kind, Source):
                    self._host(arg, env)
            return Source(tuple(k.yields if isinstance(k, Source) else HOST for k in kinds))
        return None

    def _mapped_batches(self, node: ast.Call, qualified: str | None, env: dict) -> Source | None:
        """``map(shard, batches)`` over host batches, ``shard`` flax's or a helper of the program that
        splits its argument per device: an iterator of batches split per device, which the global
        view iterates whole (``iter(batches)``) and lays out where a step takes them. And
        ``flax.jax_utils.prefetch_to_device(it, size)`` of such an iterator: pmap's per-device
        prefetching, which goes (the step's call site lays each batch out, asynchronously)."""
        split = self._split_mapped(node)
        if split is not None:
            helper, preparer = split
            if any(leaf != HOST for leaf in _hleaves(self.expr(node.args[1], env))):
                return None
            if preparer is not None:  # it prepares each batch, and splits it: only the split goes
                self._edit(preparer.split, "source", preparer.leaf)
                self.preparers[id(preparer.fn)] = preparer.fn
                self.preparer_maps.add(id(node))
                return Source(SOURCED)
            consumer = self.module.parent_of(node)  # (a prefetch around it goes too: see below)
            prefetched = isinstance(consumer, ast.Call) and self._qualified(consumer.func) == PREFETCH_TO_DEVICE \
                and consumer.args[:1] == [node]
            iterated = self._iterated(consumer if prefetched else node)
            self._edit(node, "source", node.args[1], helper=helper, iterator=not iterated)
            return Source(SOURCED)
        if qualified == PREFETCH_TO_DEVICE and node.args and not isinstance(node.args[0], ast.Starred):
            source = self.expr(node.args[0], env)
            devices = [*node.args[2:], *(k.value for k in node.keywords if k.arg == "devices")]
            if not isinstance(source, Source) or source.yields != SOURCED:
                return None
            if any(not (isinstance(d, ast.Constant) and d.value is None) for d in devices):
                raise Blocked(node.lineno, "`prefetch_to_device` is given the devices to place each batch on, where "
                              "the global view lays a batch out over every device of the mesh")
            for size in [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "size")]:
                self._host(size, env)
            self._edit(node, "unwrap", node.args[0])
            return source
        return None

    def _iterated(self, node: ast.expr) -> bool:
        """Whether ``node`` is only iterated over where it stands: the iterable of a `for` or a
        comprehension, or the argument of `list`, `tuple`, `sorted`, `enumerate` or `zip`."""
        parent = self.module.parent_of(node)
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
            return True
        return isinstance(parent, ast.Call) and node in parent.args \
            and self.names.builtin(parent.func) in ("list", "tuple", "sorted", "enumerate", "zip")

    def _unshard(self, node: ast.Call, inner: ast.expr, kind, rewrite: bool = True, iterator: bool = False) -> None:
        """The rows of a value split per device, read whole on the host. Under pmap a process
        holds its own devices' rows; a global array laid out over several processes' devices
        holds all of theirs, and no process can read it whole: in a module that runs as several
        processes, each reads its own with `multihost_utils.global_array_to_host_local_array`,
        JAX's own way back from a global array to what pmap gave ("local"). (A generator's host
        batch was never laid out: it is the process's own.)"""
        if kind == DSHARD and planner_of(self.module).multi_process:
            self._edit(node if rewrite else inner, "local", inner, iterator=iterator)
        elif rewrite:
            self._edit(node, "unshard", inner, iterator=iterator)

    def _generic(self, node: ast.Call, env: dict):
        for child in [node.func, *node.args, *(k.value for k in node.keywords)]:
            self._host(child.value if isinstance(child, ast.Starred) else child, env)
        return HOST

    def _padded_step_call(self, step: Step, node: ast.Call, env: dict, wrapper: ast.Call):
        """``pad_shard_unpad(p_eval_step, static_return=True)(state.params, batch, min_device_batch=n)``
        (flax's full-evaluation helper; ``wrapper`` its first call, there or where a name keeps it):
        the arguments not in ``static_argnums`` are host batches it pads with zero rows to the same
        number per local device (at least ``n``) and splits over them; the others go to the step as
        they are; the step's outputs come back as they are. In the global view each host batch is
        padded the same way and laid out on the mesh, so the step computes over the same rows,
        padding included."""
        options = {k.arg: k.value for k in wrapper.keywords}
        static = literal_positions(options.get("static_argnums", ast.Constant((0,))))
        if len(wrapper.args) != 1 or set(options) - {"static_argnums", "static_argnames", "static_return"} \
                or static is None \
                or literal(options.get("static_argnames", ast.Constant(()))) not in ((), []):
            raise Blocked(wrapper.lineno, "`pad_shard_unpad` is given options other than literal `static_argnums` "
                          "and `static_return`")
        if literal(options.get("static_return", ast.Constant(False))) is not True:
            raise Blocked(wrapper.lineno, "`pad_shard_unpad` without `static_return=True` un-pads the step's outputs "
                          "(per-example rows, the padding cut off), which this fix does not write")
        if any(isinstance(a, ast.Starred) for a in node.args) \
                or any(k.arg != "min_device_batch" for k in node.keywords):
            raise Blocked(node.lineno, "the step `pad_shard_unpad` wraps is called with arguments other than "
                          "positional ones and `min_device_batch=`")
        per_device = node.keywords[0].value if node.keywords else None
        if per_device is not None:
            self._host(per_device, env)
        padded = {}
        for i, arg in enumerate(node.args):
            if i in static:
                continue
            if any(leaf != HOST for leaf in _hleaves(self.expr(arg, env))):
                raise Blocked(arg.lineno, f"`{self._short(arg)}`, which `pad_shard_unpad` pads and splits per device, "
                              "is not a host value")
            padded[id(arg)] = DSHARD
            self._edit(arg, "pad", arg, per_device=per_device)
        self._edit(node, "pad_call", wrapper.args[0])
        bare = ast.Call(func=wrapper.args[0], args=node.args, keywords=[], lineno=node.lineno,
                        col_offset=node.col_offset)
        outputs = self._step_call(step, bare, env, given=padded)
        if any(leaf not in (DREP, BOT) for leaf in _hleaves(outputs)):
            raise Blocked(node.lineno, f"`{step.name}` returns values that are not replicated, which `pad_shard_unpad"
                          "(..., static_return=True)` hands back padded and split per device")
        return outputs

    def _step_call(self, step: Step, node: ast.Call, env: dict, given: dict[int, object] | None = None):
        """A call of the step; ``given``: the kinds of arguments already read (by ``id``)."""
        self.step_calls.append(node)
        self.called.add(step.name)
        for i, arg in self._step_arguments(step, node):
            kind = given[id(arg)] if given and id(arg) in given else self.expr(arg, env)
            mapped = step.in_axes[i] if i < len(step.in_axes) else 0
            if i in step.static and any(arg is k.value for k in node.keywords):
                # pmap's static positions are positional only: by keyword pmap maps the value,
                # where jit's `static_argnums=` would name the parameter static too
                raise Blocked(arg.lineno, f"argument {i + 1} of `{step.name}` is static "
                              "(`static_broadcasted_argnums=`) but passed by keyword, which pmap maps")
            if mapped is None:
                if any(leaf != HOST for leaf in _hleaves(kind)):
                    how = "static (`static_broadcasted_argnums=`)" if i in step.static else "not mapped (in_axes None)"
                    raise Blocked(arg.lineno, f"argument {i + 1} of `{step.name}` is {how} but has pmap's device axis")
                step.params[i] = _join_kind(step.params[i], R)
                continue
            leaves = [leaf for leaf in _hleaves(kind) if leaf != BOT]
            if step.opaque is not None and any(leaf != DREP for leaf in leaves):
                raise Blocked(arg.lineno, f"argument {i + 1} of `{step.name}` (`{self._short(arg)}`) is not shown "
                              f"replicated: pmap maps `{self.module.segment(step.fun)}`, whose body is not known "
                              "here, and only where every device is given the same values does each compute "
                              "what one jit computes")
            if not leaves:
                continue  # made by the step itself, whose outputs are not known yet
            entries = sorted(key for leaf in leaves if isinstance(leaf, HostEntries) for key in leaf.keys)
            if entries:
                raise Blocked(arg.lineno, f"argument {i + 1} of `{step.name}` (`{self._short(arg)}`) is a batch "
                              f"split per device that also holds host values at {', '.join(map(repr, entries))} "
                              "(given with `batch[key] = value`): pmap would map them too; pop them before the step")
            if SOURCED in leaves:
                if any(leaf != SOURCED for leaf in leaves):
                    raise Blocked(arg.lineno, f"argument {i + 1} of `{step.name}` (`{self._short(arg)}`) mixes "
                                  "values a generator split per device with others")
                self._edit(arg, "place", arg)  # the generator's batch, laid out where the step takes it
            elif any(leaf not in DEVICE and not isinstance(leaf, KeyedState) for leaf in leaves):
                raise Blocked(arg.lineno, f"argument {i + 1} of `{step.name}` (`{self._short(arg)}`) is not made by a "
                              "replicate, shard or device-count reshape this fix recognises (nor by the step itself)"
                              + made_by(self, arg), argument=(step, i))
            step.params[i] = _join_kind(step.params[i], _to_kind(kind))
        if step.opaque is not None:
            # `jax.jit(f, out_shardings=NamedSharding(mesh, P()))`: the output laid out as pmap's
            # copies were, even where `f` reads no value of its arguments (optax's `init` reads
            # only shapes, and jit would leave its zeros on one device).
            self._edit(node.func, "opaque", step.fun)
        return self._outputs(step, node)

    def _outputs(self, step: Step, node: ast.Call):
        """What a call of ``step`` gives its caller: each output mapped over pmap's device axis, and
        those `out_axes=None` leaves unmapped as the host value they are (where the step computes
        them replicated: pmap returns device 0's, the global view the one value)."""
        if step.out_axes == 0:
            return _from_kind(step.outputs)
        outputs = step.outputs
        if step.out_axes is None:
            axes, parts = (None,), (outputs,)
        elif isinstance(outputs, Seq) and len(outputs.items) == len(step.out_axes):
            axes, parts = step.out_axes, outputs.items
        elif outputs == BOT:
            return BOT  # not known yet on this round
        else:
            raise Blocked(node.lineno, f"`{step.name}` is given `out_axes=` one per output, but its return is not "
                          f"shown to be a tuple of {len(step.out_axes)} value{'s' if len(step.out_axes) != 1 else ''}")
        given = []
        for i, (axis, part) in enumerate(zip(axes, parts)):
            if axis == 0:
                given.append(_from_kind(part))
            elif part == BOT:
                given.append(BOT)
            elif all(leaf == R for leaf in kind_leaves(part)):
                given.append(HOST)
            else:
                which = "its output" if step.out_axes is None else f"output {i + 1}"
                raise Blocked(node.lineno, f"`out_axes=None` takes {which} of `{step.name}` unmapped, where the "
                              f"step returns {describe(part)}: pmap gives device 0's, the global view one value "
                              "over the whole batch")
        return given[0] if step.out_axes is None else tuple(given)

    def _step_arguments(self, step: Step, node: ast.Call) -> list[tuple[int, ast.expr]]:
        """(position, argument) of each argument of a call of ``step``; a keyword argument is at
        the position of the step's parameter of that name (``partial``'s bound ones not counted),
        where jit passes it too. Every parameter is given once, or left to its default (which pmap
        and jit both take as the Python value it is)."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Blocked(node.lineno, f"`{step.name}` is called with starred arguments")
        if step.opaque is not None:
            if node.keywords:
                raise Blocked(node.lineno, f"`{step.name}` is called with keyword arguments")
            return list(enumerate(node.args))
        rest = step.func.args.args[step.leading:]  # (those a `partial(f, value)` binds by position come first)
        names = [a.arg for a in rest if a.arg not in step.bound]
        after_bound = next((i for i, a in enumerate(rest) if a.arg in step.bound), len(names))
        names += step.keyword_only
        if len(node.args) > after_bound:
            raise Blocked(node.lineno, f"`{step.name}` is given argument {after_bound + 1} by position, after a "
                          "parameter `partial(...)` binds by name")
        given = list(enumerate(node.args))
        for keyword in node.keywords:
            if keyword.arg not in names[len(node.args):]:
                raise Blocked(node.lineno, f"`{step.name}` is called with `{keyword.arg}=`, which is not one of "
                              "its parameters after the positional arguments")
            given.append((names.index(keyword.arg), keyword.value))
        with_defaults = defaulted(step.func.args)
        missing = set(range(len(step.params))) - {i for i, _ in given}
        if len(given) > len(step.params) or any(names[i] not in with_defaults for i in missing):
            raise Blocked(node.lineno, f"`{step.name}` is called with {len(given)} arguments")
        for i in missing:  # its default, a Python value: the same on every device, and to jit
            step.params[i] = _join_kind(step.params[i], R)
        return sorted(given, key=lambda item: item[0])

    # -- patterns --------------------------------------------------------------------------

    def _sharded(self, node: ast.AST):
        """The kind a split per device makes: inside a generator, a batch it yields whole in the
        global view (``SOURCED``)."""
        return SOURCED if self._yields_whole(self.scope_of(node)) else DSHARD

    def _yields_whole(self, scope) -> bool:
        """A generator, or a function read as one that makes batches (``_batches_made``): the host
        batches it splits per device come out whole in the global view."""
        return self._is_generator(scope) or id(scope) in self._batch_functions

    def _read_at(self, func: ast.FunctionDef, node: ast.Call) -> None:
        """``func`` is read at its calls, this one among them (``_readers_only_called_where_read``)."""
        self.readers[id(func)] = func
        self.reader_calls.add(id(node))

    def _batches_made(self, func: ast.FunctionDef, node: ast.Call, env: dict, kinds: list):
        """A function given host values that splits batches per device and returns them
        (nanoGPT-style ``x, y = get_batch(...)``): read as a generator is, the batches it returns
        whole in the global view (``SOURCED``) and laid out where a step takes them. None, with
        nothing of the reading kept, where it returns anything else or reads in a way this
        analysis does not follow (then it is any function given host values)."""
        before = set(self.edits)
        readers, calls = dict(self.readers), set(self.reader_calls)
        self._batch_functions.add(id(func))
        try:
            made = self._wrapper_call(func, node, env, kinds)
        except Blocked:
            made = None
        leaves = _hleaves(made) if made is not None else []
        if SOURCED in leaves and all(leaf in (SOURCED, HOST) for leaf in leaves):
            self._read_at(func, node)
            return made
        self._batch_functions.discard(id(func))
        for key in set(self.edits) - before:
            del self.edits[key]
        self.readers, self.reader_calls = readers, calls
        return None

    def _keys_split_per_device(self, node: ast.Call, qualified: str | None) -> ast.Call | None:
        """The ``jax.random.split(key, n)`` (n the local device count) that ``node`` is, or that
        ``node`` stacks: ``np.stack(jax.random.split(rng, n_devices))`` (trax's trainer, brax's PPO)
        is the same keys, one row per device."""
        if qualified in STACKS and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Call):
            node, qualified = node.args[0], self._qualified(node.args[0].func)
        count = split_count(node) if qualified == "jax.random.split" else None
        return node if count is not None and self.shapes.is_device_count(count) else None

    def _is_generator(self, scope) -> bool:
        if not isinstance(scope, ast.FunctionDef):
            return False
        if id(scope) not in self._generators:
            self._generators[id(scope)] = any(isinstance(n, (ast.Yield, ast.YieldFrom)) and self.scope_of(n) is scope
                                              for n in ast.walk(scope))
        return self._generators[id(scope)]

    def _splits_batches(self, generator: ast.FunctionDef) -> bool:
        """Whether a generator may yield batches split per device: it names a split this analysis
        knows (flax's ``shard``, a reshape, ``device_put_sharded`` of a split); read at its calls to
        tell."""
        return any(isinstance(n, ast.Call) and (self._qualified(n.func) in SHARD | {REARRANGE}
                                                or isinstance(n.func, ast.Attribute) and n.func.attr == "reshape"
                                                or self.helpers.of_call(n) is not None
                                                or stacked_per_device(self.module, self.shapes.is_device_count, n)
                                                or self.shapes.split_per_device(n) is not None)
                   for n in ast.walk(generator))

    def _forwards_batches(self, func: ast.FunctionDef, seen: frozenset[int] = frozenset()) -> bool:
        """Whether a function may return another's batches split per device: it calls a generator
        of the module that may yield them (``train_iter`` returning ``self.generate(self.train_dl)``),
        or a function that may map a split or forward one; read at its calls to tell."""
        if id(func) in self._forwarders:
            return self._forwarders[id(func)]
        found = False
        for node in ast.walk(func):
            callee = self._reader(node.func) if isinstance(node, ast.Call) else None
            if callee is None or callee is func or id(callee) in seen:
                continue
            if self._is_generator(callee) and self._splits_batches(callee) or self._maps_batches(callee) \
                    or self._forwards_batches(callee, seen | {id(func)}):
                found = True
                break
        if not seen:  # (a result found inside a cycle may miss what the cycle's start calls)
            self._forwarders[id(func)] = found
        return found

    def _maps_batches(self, func: ast.FunctionDef) -> bool:
        """Whether a function may return an iterator of batches split per device: it maps a split
        over an iterable (``map(shard, batches)``) or prefetches to the devices (flax's
        ``create_input_iter``); read at its calls to tell."""
        return any(isinstance(node, ast.Call) and (self._qualified(node.func) == PREFETCH_TO_DEVICE
                                                   or self._split_mapped(node) is not None)
                   for node in ast.walk(func))

    def _split_mapped(self, node: ast.Call) -> tuple[Helper | None, Preparer | None] | None:
        """For ``map(f, batches)`` with ``f`` a split per device (flax's ``shard``, a helper of the
        program that splits its argument, or a ``helpers.Preparer``): the helper, or the preparer."""
        func = node.func
        if not (self.names.builtin(func) == "map" and len(node.args) == 2 and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args)):
            return None
        helper = self.helpers.of_function(node.args[0])
        if helper is not None and helper.action == "shard" and helper.takes is None \
                or self._qualified(node.args[0]) in SHARD:
            return helper, None
        preparer = batch_preparer(self.module, self.shapes, node.args[0])
        return (None, preparer) if preparer is not None else None

    def _written_split(self, node: ast.Call, shape: list[ast.expr], env: dict):
        """``x.reshape(n, -1, 28, 28, 1)`` of a host value (``shapes.split_sizes``): the layout of
        ``x.reshape(-1, 28, 28, 1)``, the same elements in the same order on each device."""
        sizes = self.shapes.split_sizes(shape)
        if sizes is None:
            return None
        for size in sizes[1:]:
            self._host(size, env)
        self._edit(node, "shard", node, merged=(sizes[0], sizes[1]))
        return self._sharded(node)

    def _einops_split(self, node: ast.Call, env: dict):
        """``rearrange(x, "(d b) c h w -> d b h w c", d=n)`` of a host value, n the local device
        count: a split per device (``einops_patterns``), which becomes the layout of ``x``, or of
        ``rearrange(x, "b c h w -> b h w c")`` where the rows are rearranged too."""
        pattern = literal_pattern(node)
        counts = [k for k in node.keywords if k.arg is not None and self.shapes.is_device_count(k.value)]
        if pattern is None or len(counts) != 1 or any(k.arg is None for k in node.keywords):
            return None
        split = device_split(pattern, counts[0].arg)
        if split is None or self.expr(node.args[0], env) != HOST:
            return None
        whole, same = split
        for keyword in node.keywords:
            if keyword is not counts[0]:
                self._host(keyword.value, env)
        if same and len(node.keywords) == 1:
            self._edit(node, "shard", node.args[0])
        else:
            self._edit(node, "shard", node, einops=(node.args[1], whole, counts[0]))
        return self._sharded(node)

    def _edit(self, node: ast.AST, action: str, inner: ast.expr, helper: Helper | None = None,
              keys: tuple[str, ...] = (), iterator: bool = False, per_device: ast.expr | None = None,
              einops: tuple[ast.Constant, str, ast.keyword] | None = None,
              merged: tuple[ast.expr, ast.expr] | None = None, stacked: ast.Attribute | None = None) -> None:
        if action == "shard" and self._yields_whole(self.scope_of(node)):
            action = "source"  # the generator yields the host batch; its consumer lays it out
        known = self.edits.get(id(node))
        if known is not None and known.action != action:  # a wrapper read at two calls, two ways
            raise Blocked(node.lineno, f"`{self._short(node)}` holds pmap's device axis at one call of its "
                          "function and not at another")
        self.edits[id(node)] = DriverEdit(node, action, inner, helper, keys, iterator, per_device, einops, merged,
                                          stacked)
        for made in self._reads:
            made.add((node, action))

    def _unedit(self, node: ast.AST) -> None:
        """Forget the edit of ``node``, read on the way to an edit that replaces it whole."""
        edit = self.edits.pop(id(node), None)
        if edit is not None:
            for made in self._reads:
                made.discard((node, edit.action))


def _is_last(node: ast.expr) -> bool:
    """``-1``."""
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
        and type(node.operand.value) is int and node.operand.value == 1


def _literal_key(node: ast.expr) -> str | None:
    """The string a dict's key is, written as a literal (``batch["epoch"]``'s ``"epoch"``)."""
    if isinstance(node, ast.Subscript):
        node = node.slice
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _step_ref_used(node: ast.Name, step: str) -> Blocked:
    """A parameter holding a step, read other than as the step's call."""
    return Blocked(node.lineno, f"`{node.id}` (the pmapped step `{step}`) is used other than by calling it")


def call_given(module, node: ast.expr) -> ast.AST | None:
    """The call ``node`` is an argument of, by position or keyword (else its parent)."""
    parent = module.parent_of(node)
    return module.parent_of(parent) if isinstance(parent, ast.keyword) else parent


def literal(node: ast.expr):
    """The value of a literal expression; "?" for anything else."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return "?"


def literal_positions(node: ast.expr) -> tuple[int, ...] | None:
    """Argument positions written as ``static_argnums=`` takes them: a literal int or a tuple or
    list of ints; None for anything else."""
    value = literal(node)
    value = (value,) if isinstance(value, int) else value
    if isinstance(value, (tuple, list)) and all(isinstance(i, int) for i in value):
        return tuple(value)
    return None


def _copied_name(node: ast.Call) -> ast.Name | None:
    """The array a call would copy onto a leading axis, read from its first argument (or, for
    ``x[None].repeat(n, axis=0)``, what the method is called on): ``x`` of ``broadcast_to(x, ...)``,
    ``stack([x] * n)``, ``stack([x for _ in range(n)])``, ``repeat(x[None], ...)``,
    ``repeat(expand_dims(x, 0), ...)`` (``shapes.leaf_action`` says whether it does)."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "repeat" and isinstance(func.value, ast.Subscript):
        first = func.value
    else:
        first = node.args[0] if node.args else None
    if isinstance(first, ast.BinOp) and isinstance(first.op, ast.Mult):
        first = next((side.elts[0] for side in (first.left, first.right)
                      if isinstance(side, ast.List) and len(side.elts) == 1), None)
    elif isinstance(first, ast.ListComp):
        first = first.elt
    elif isinstance(first, ast.Subscript):  # x[None]
        first = first.value
    elif isinstance(first, ast.Call) and first.args:  # expand_dims(x, 0)
        first = first.args[0]
    return first if isinstance(first, ast.Name) else None


def _listed(node: ast.expr, names) -> ast.expr | None:
    """``x`` of ``list(x)``: the slices along its first axis."""
    if isinstance(node, ast.Call) and names.builtin(node.func) == "list" and len(node.args) == 1 \
            and not node.keywords and not isinstance(node.args[0], ast.Starred):
        return node.args[0]
    return None


def short(module, node: ast.AST) -> str:
    """``node``'s code on one line, cut at 60 characters, for a message."""
    segment = module.segment(node)
    text = " ".join(segment.split())  # a call laid out over lines, on one
    text = text.replace("( ", "(").replace(", )", ")") if "\n" in segment else text
    return text if len(text) <= 60 else text[:57] + "..."


def binding_node(binding) -> ast.AST | None:
    return getattr(binding, "value", None) or getattr(binding, "node", None)


def _to_kind(kind) -> Kind:
    if isinstance(kind, tuple):
        return Seq(tuple(_to_kind(k) for k in kind))
    if isinstance(kind, KeyedState):
        return Fields(tuple((name, KEY) for name in kind.keys))
    return {DREP: R, DSHARD: S, DKEYS: KEY, SOURCED: S}.get(kind, BOT)


def _from_kind(kind: Kind):
    if isinstance(kind, Seq):
        return tuple(_from_kind(k) for k in kind.items)
    if isinstance(kind, Fields):
        return KeyedState(tuple(name for name, _ in kind.items)) if all(
            k == KEY for _, k in kind.items) else MIXED
    if isinstance(kind, Record):
        parts = {_from_kind(k) for _, k in kind.items}
        return parts.pop() if len(parts) == 1 and not isinstance(next(iter(parts)), tuple) else MIXED
    if kind == R:
        return DREP
    if kind == S:
        return DSHARD
    if kind == KEY:
        return DKEYS
    if kind in (M, SUM):
        return OWN_MEAN if kind == M else OWN
    if isinstance(kind, Outputs):
        return DOUTPUTS
    if kind == BOT:
        return BOT
    return MIXED


def _join_kind(a: Kind, b: Kind) -> Kind:
    return join(a, b)
