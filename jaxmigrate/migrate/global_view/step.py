"""What a pmapped step computes, device by device: the analysis behind the global view's collectives.

Under ``pmap`` every device runs the step on its own slice of the batch. Under ``jax.jit`` over
global arrays the same code runs once, on the whole batch. A value means the same thing in both
only for some kinds of values, which this module tracks through the step (and through the
functions it calls, with ``jax.grad`` / ``value_and_grad`` / ``jax.tree.map``: the module's own,
and those of the program's other modules, read there with their imports, ``program_modules``):

``R``    replicated: the same on every device (parameters, constants, results of a collective);
``S``    per-example rows of the batch (the mapped batch, and row-wise functions of it);
``M``    the mean over this device's examples of a per-example quantity (``jnp.mean`` of an ``S``,
         and gradients of such a mean with respect to replicated parameters);
``SUM``  the sum over this device's examples (``jnp.sum`` of an ``S``, counts);
``U``    anything else, with the reason it is not one of the above.

Over equal-sized shards, the mean of per-shard means is the global mean and the sum of per-shard
sums is the global sum, so ``pmean`` of an ``M`` and ``psum`` of a ``SUM`` are what the global
program computes without them: those collectives are removed. ``psum`` of an ``M`` (or of an
``R``) is N times the global value: it keeps the factor. Every other collective, and every
reduction of a value whose kind is not proven, blocks the global view (``Blocked``, with the line).

Assumptions, stated in the fix's documentation: the last axis (-1) is a feature axis (the batch
axis is 0; other negative axes count from an end whose distance to the batch axis is not known
here), and a model applied with ``.apply`` / ``.apply_fn`` without ``mutable=``
treats examples independently (no batch statistics).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from jaxmigrate import program_modules
from jaxmigrate.core.module import is_script
from jaxmigrate.migrate.global_view.kinds import (
    AXIS_ARGUMENT,
    BOT,
    COLLECTIVES,
    GRADS,
    KEY,
    KEY_OPS,
    OTHER_REDUCTIONS,
    REDUCTIONS,
    ROWWISE,
    SAMPLERS,
    SUM,
    Atom,
    Blocked,
    Fields,
    Fn,
    Outputs,
    Grad,
    Kind,
    M,
    R,
    ROWS,
    Record,
    S,
    Seq,
    U,
    describe,
    flat,
    join,
    leaves,
    off_the_batch_axis,
)
from jaxmigrate.lint.patterns import TREE_MAPS, single_value
from jaxmigrate.migrate._plan import literal_int
from jaxmigrate.migrate.global_view.helpers import defaulted
from jaxmigrate.migrate.global_view.layout_ops import is_layout_op, layout_op, method_layout
from jaxmigrate.migrate.global_view.ranks import at_least
from jaxmigrate.migrate.global_view.shapes import is_zero
from jaxmigrate.names import PARTIAL, OpaqueBinding, ValueBinding

_HAIKU_WITH_STATE = frozenset({"haiku.transform_with_state", "haiku.multi_transform_with_state"})
_STATE_UPDATES = frozenset({"replace", "apply_gradients"})
# lax's convolutions: the positions of their `dimension_numbers` and `batch_group_count` (None: none).
_CONVOLUTIONS = {"jax.lax.conv_general_dilated": (6, 8), "jax.lax.conv": (None, None),
                 "jax.lax.conv_with_general_padding": (None, None), "jax.lax.conv_transpose": (5, None)}
# A model's keywords that give it keys to draw with: flax's `rngs=`, a Hugging Face model's `dropout_rng=`.
_MODEL_KEYS = frozenset({"rngs", "dropout_rng"})


@dataclass
class CollectiveEdit:
    """What becomes of one collective call: ``replace`` is its new text (from the argument's)."""

    node: ast.Call
    arg: ast.expr
    action: str  # "drop" (the argument itself) | "scale" (times the device count) | "unfold" (the key folded)
    tree: bool = False


@dataclass
class Frame:
    env: dict[str, Kind]
    parent: "Frame | None"
    func: ast.AST | None

    def lookup(self, name: str) -> Kind | None:
        frame: Frame | None = self
        while frame is not None:
            if name in frame.env:
                return frame.env[name]
            frame = frame.parent
        return None


@dataclass
class StepAnalysis:
    """The analysis of one step: its output kind and the collectives to rewrite."""

    output: Kind = BOT
    edits: dict[int, CollectiveEdit] = field(default_factory=dict)
    # Lines where it draws random values for the batch's examples (from a key per device, or one
    # key every device shares): one draw covers the whole batch in the global view.
    draws: set[int] = field(default_factory=set)


class StepAnalyzer:
    """Interprets a step's body (and what it calls) over kinds."""

    MAX_DEPTH = 12

    def __init__(self, module, axis: str | None, host_scopes: frozenset[int] = frozenset()) -> None:
        self.module = module  # a core.module.ParsedModule
        self.names = module.names
        self.axis = axis
        # Functions whose locals a step defined in them may close over: the driving code, whose
        # analysis blocks any value with pmap's device axis read from a nested function, so each
        # of their locals is a host value, the same on every device (ids of the defs).
        self.host_scopes = host_scopes
        self.result = StepAnalysis()
        self._depth = 0
        self._memo: dict[tuple, Kind] = {}

    # -- entry -----------------------------------------------------------------------------

    def analyse(self, func: ast.FunctionDef, params: list[Kind], bound: tuple[str, ...] = ()) -> StepAnalysis:
        """``params``: the kinds of the step's parameters ``partial`` leaves, the positional ones
        first, then the keyword-only ones (``Step.keyword_only``)."""
        args = func.args
        if args.vararg or args.kwarg or args.posonlyargs:
            raise Blocked(func.lineno, f"`{getattr(func, 'name', 'lambda')}` takes *args or **kwargs")
        keyword_only = [a.arg for a in args.kwonlyargs if a.arg not in bound]
        positional = len(params) - len(keyword_only)
        if positional < 0 or positional + len([a for a in args.args if a.arg in bound]) != len(args.args):
            raise Blocked(func.lineno, f"`{getattr(func, 'name', 'lambda')}` is called with {len(params)} arguments, not "
                          f"{len(args.args) + len(keyword_only)}")
        keywords = {name: R for name in bound} | dict(zip(keyword_only, params[positional:]))
        self.result.output = self._call_def(func, [*params[:positional], *(R for a in args.args if a.arg in bound)],
                                            None, keywords=keywords)
        return self.result

    # -- functions -------------------------------------------------------------------------

    def _call_def(self, func: ast.AST, params: list[Kind], parent: Frame | None,
                  keywords: dict[str, Kind] | None = None) -> Kind:
        keywords = keywords or {}
        key = (id(func), tuple(map(repr, params)), id(parent), tuple(sorted((k, repr(v)) for k, v in keywords.items())))
        if key in self._memo:
            return self._memo[key]
        if self._depth >= self.MAX_DEPTH:
            raise Blocked(func.lineno, "calls nest too deep to follow")
        frame = Frame(dict(keywords), parent, func)
        args = func.args
        names = [a.arg for a in args.args if a.arg not in keywords]
        # (a default is a value of the function's own module: the same on every device)
        with_defaults = defaulted(args)
        if args.vararg or args.kwarg or any(a.arg not in keywords and a.arg not in with_defaults for a in args.kwonlyargs):
            raise Blocked(func.lineno, "a function with *args / **kwargs / keyword-only arguments is called "
                          "with per-device values")
        for a in args.kwonlyargs:
            frame.env.setdefault(a.arg, R)
        for i, name in enumerate(names):
            if i < len(params):
                frame.env[name] = params[i]
            elif name in with_defaults:
                frame.env[name] = R
            else:
                raise Blocked(func.lineno, f"a call of the function at line {func.lineno} has too few arguments")
        self._depth += 1
        try:
            if isinstance(func, ast.Lambda):
                out = self.expr(func.body, frame)
            else:
                out = self._body(func.body, frame)
        finally:
            self._depth -= 1
        self._memo[key] = out
        return out

    def _body(self, body: list[ast.stmt], frame: Frame) -> Kind:
        returned: Kind = BOT
        for stmt in body:
            returned = join(returned, self.stmt(stmt, frame))
        return returned

    # -- statements ------------------------------------------------------------------------

    def stmt(self, node: ast.stmt, frame: Frame) -> Kind:
        """Interpret one statement; returns the kind of what it returns (BOT: no return)."""
        if isinstance(node, ast.Return):
            return self.expr(node.value, frame) if node.value is not None else R
        if isinstance(node, ast.Assign):
            sizes = self._unpacked_shape(node, frame)
            kind = sizes if sizes is not None else self.expr(node.value, frame)
            for target in node.targets:
                self.bind(target, kind, frame)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.expr(node.value, frame), frame)
        elif isinstance(node, ast.AugAssign):
            kind = self.binop(self.expr(node.target, frame), node.op, self.expr(node.value, frame), node)
            self.bind(node.target, kind, frame)
        elif isinstance(node, ast.Expr):
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                self.expr(node.value, frame)
        elif isinstance(node, (ast.FunctionDef,)):
            frame.env[node.name] = self._decorated(node, frame) if node.decorator_list else Fn(node, frame)
        elif isinstance(node, ast.For):
            iterated = self.iterate(self.expr(node.iter, frame), node.iter)
            returned: Kind = BOT
            for _ in range(2):  # twice: values carried around the loop reach their final kind
                self.bind(node.target, iterated, frame)
                returned = join(returned, self._body(node.body, frame))
            return join(returned, self._body(node.orelse, frame))
        elif isinstance(node, ast.If):
            test = self.expr(node.test, frame)
            if flat(test) != R:
                raise Blocked(node.lineno, "a Python `if` on a per-device value")
            before = dict(frame.env)
            returned = self._body(node.body, frame)
            after_body, frame.env = frame.env, before
            returned = join(returned, self._body(node.orelse, frame))
            for name in set(after_body) | set(frame.env):
                frame.env[name] = join(after_body.get(name, BOT), frame.env.get(name, BOT))
            return returned
        elif isinstance(node, ast.With):
            for item in node.items:
                self._context(item, frame)
            return self._body(node.body, frame)
        elif isinstance(node, (ast.Pass, ast.Assert)):
            pass
        else:
            raise Blocked(node.lineno, f"a `{type(node).__name__}` statement is not followed")
        return BOT

    def _unpacked_shape(self, node: ast.Assign, frame: Frame) -> Seq | None:
        """``B, T, C = logits.shape`` of per-example ``logits``: the number of rows (this device's
        in pmap, the whole batch's in the global view, as ``x.shape[0]``), then feature sizes."""
        value = node.value
        if not (isinstance(value, ast.Attribute) and value.attr == "shape" and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Tuple) and node.targets[0].elts
                and all(isinstance(e, ast.Name) for e in node.targets[0].elts)):
            return None
        if flat(self.expr(value.value, frame)) != S:
            return None
        return Seq((ROWS,) + (R,) * (len(node.targets[0].elts) - 1))

    def _reshaped_rows(self, node: ast.Call, sizes: list[ast.expr], frame: Frame) -> Kind:
        """``x.reshape(-1, C)`` / ``x.reshape(B * T)`` of per-example ``x``: its rows merged with its
        next axes and split again by feature sizes alone. A device's slice is a run of the global
        rows, so its new rows are a run of the global array's new rows: per example still (rows,
        ``S``). The leading size must be ``-1`` or count the rows, which the global view has more of."""
        if len(sizes) == 1 and isinstance(sizes[0], (ast.Tuple, ast.List)):
            sizes = sizes[0].elts
        if not sizes or any(isinstance(size, ast.Starred) for size in sizes):
            return U("a reshape of per-example values this fix does not read", node.lineno)
        kinds = [flat(self.expr(size, frame), node.lineno) for size in sizes]
        unknown = next((kind for kind in kinds if isinstance(kind, U)), None)
        if unknown is not None:
            return unknown
        if not (literal_int(sizes[0]) == -1 or kinds[0] == ROWS) or any(kind != R for kind in kinds[1:]):
            return U("a reshape of per-example values that does not keep whole rows leading (`-1` or "
                     "the row count first, then feature sizes)", node.lineno)
        return S

    def _context(self, item: ast.withitem, frame: Frame) -> None:
        """``with jax.named_scope("loss"):``: a context made of values the same on every device
        sets the same thing for its body on each, and in the global view. One made of a
        per-device value (2020 flax's ``with nn.stochastic(dropout_rng):``) sets what code this
        analysis does not see reads (the keys its layers draw)."""
        kind = flat(self.expr(item.context_expr, frame), item.context_expr.lineno)
        if kind != R:
            what = f"a value not known the same on every device ({kind.why})" if isinstance(kind, U) else describe(kind)
            raise Blocked(item.context_expr.lineno,
                          f"a `with` over {what}: what it sets for its body is read by code not followed here")
        if item.optional_vars is not None:
            self.bind(item.optional_vars, R, frame)

    def bind(self, target: ast.expr, kind: Kind, frame: Frame) -> None:
        if isinstance(target, ast.Name):
            frame.env[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                raise Blocked(target.lineno, "starred unpacking is not followed")
            if isinstance(kind, Seq):
                if len(kind.items) != len(target.elts):
                    raise Blocked(target.lineno, "unpacking of a different length")
                for element, item in zip(target.elts, kind.items):
                    self.bind(element, item, frame)
            else:
                # A pytree unpacked into its parts: each part has the whole's kind.
                for element in target.elts:
                    self.bind(element, flat(kind, target.lineno), frame)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and self._item_of_one_kind(target, kind, frame):
            # `metrics["learning_rate"] = lr` (long-range-arena's step): the dict stays one kind,
            # so no other name for it (kinds are per name) can be read as another kind
            base = frame.env[target.value.id]
            if isinstance(base, Record):  # (keyed by a string constant: `_item_of_one_kind`)
                items = [item for item in base.items if item[0] != target.slice.value]
                frame.env[target.value.id] = Record((*items, (target.slice.value, flat(kind))))
        else:
            raise Blocked(target.lineno, "assignment to an attribute or item is not followed")

    def _item_of_one_kind(self, target: ast.Subscript, kind: Kind, frame: Frame) -> bool:
        """Whether an item assigned keeps a dict of one kind of leaf that kind (a key of its own)."""
        base = frame.env.get(target.value.id)
        new = flat(kind, target.lineno)
        if base is None or not isinstance(new, Atom) or new == BOT:
            return False
        if isinstance(base, Record) and not (isinstance(target.slice, ast.Constant)
                                             and isinstance(target.slice.value, str)):
            return False
        if not isinstance(base, (Record, Atom)) or flat(self.expr(target.slice, frame)) != R:
            return False
        return all(leaf == new for leaf in leaves(base))

    def iterate(self, kind: Kind, node: ast.expr) -> Kind:
        """The kind of the items of an iterable of ``kind``."""
        if isinstance(kind, Seq) and getattr(node, "_zip", False):
            return kind
        atom = flat(kind, node.lineno)
        if atom in (R, M, SUM):
            return atom  # the parts of a replicated value, or of a pytree of per-shard reductions
        raise Blocked(node.lineno, f"a loop over {describe(atom)} is not followed")

    # -- expressions -----------------------------------------------------------------------

    def expr(self, node: ast.expr, frame: Frame) -> Kind:
        if isinstance(node, ast.Constant):
            return R
        if isinstance(node, ast.Name):
            return self.name(node, frame)
        if isinstance(node, (ast.Tuple, ast.List)):
            return Seq(tuple(self.expr(e, frame) for e in node.elts))
        if isinstance(node, ast.Dict):
            if any(k is None or not isinstance(k, ast.Constant) for k in node.keys):
                return U("a dict display with computed keys", node.lineno)
            return Record(tuple((k.value, self.expr(v, frame)) for k, v in zip(node.keys, node.values)))
        if isinstance(node, ast.BinOp):
            return self.binop(self.expr(node.left, frame), node.op, self.expr(node.right, frame), node)
        if isinstance(node, ast.UnaryOp):
            kind = flat(self.expr(node.operand, frame), node.lineno)
            if isinstance(node.op, (ast.USub, ast.UAdd)) or kind in (R, S):
                return kind
            return U("a logical operation on a per-shard reduction", node.lineno)
        if isinstance(node, ast.Compare):
            return self.elementwise([self.expr(node.left, frame), *(self.expr(c, frame) for c in node.comparators)],
                                    node)
        if isinstance(node, ast.BoolOp):  # `len(x.shape) > 2 or x.ndim > 2`: Python's, on host values
            kinds = [flat(self.expr(value, frame), node.lineno) for value in node.values]
            unknown = next((kind for kind in kinds if isinstance(kind, U)), None)
            return unknown or (R if all(kind == R for kind in kinds) else
                               U(f"`{type(node.op).__name__.lower()}` of per-device values", node.lineno))
        if isinstance(node, ast.IfExp):
            if flat(self.expr(node.test, frame)) != R:
                raise Blocked(node.lineno, "a conditional expression on a per-device value")
            return join(self.expr(node.body, frame), self.expr(node.orelse, frame))
        if isinstance(node, ast.Attribute):
            return self.attribute(node, frame)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, frame)
        if isinstance(node, ast.Call):
            return self.call(node, frame)
        if isinstance(node, ast.Lambda):
            return Fn(node, frame)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self.comprehension(node, frame)
        return U(f"a `{type(node).__name__}` expression is not followed", node.lineno)

    def name(self, node: ast.Name, frame: Frame) -> Kind:
        kind = frame.lookup(node.id)
        if kind is not None:
            return kind
        bindings = self.names.bindings(node)
        if len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) and isinstance(
                bindings[0].node, ast.FunctionDef):
            return Fn(bindings[0].node, None)
        # Module-level constants, imported names, builtins: the same on every device. A local of
        # an enclosing function (a closure) may hold anything, pmap's device axis included, unless
        # that function is driving code the analysis read (``host_scopes``).
        for binding in bindings:
            if isinstance(binding, ValueBinding) and not self._module_level_value(binding) or \
                    isinstance(binding, OpaqueBinding) and not self._module_level(binding.node):
                bound = binding.value if isinstance(binding, ValueBinding) else binding.node
                # (module level inside a block, a script's `__main__`: read as driving code too)
                owner = self._function_of(bound) or self.module.tree
                if id(owner) not in self.host_scopes:
                    return U(f"`{node.id}` is bound outside what the analysis follows", node.lineno)
        return R

    def _function_of(self, node: ast.AST) -> ast.AST | None:
        """The def or lambda whose scope a binding at ``node`` is in."""
        parent = self.module.parent_of(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            parent = self.module.parent_of(parent)
        return parent

    def _module_level(self, node: ast.AST) -> bool:
        """Bound at module level: no function or lambda between ``node`` and the module."""
        parent = self.module.parent_of(node)
        while parent is not None and parent is not self.module.tree:
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return False
            parent = self.module.parent_of(parent)
        return True

    def _module_level_value(self, binding: ValueBinding) -> bool:
        parent = self.module.parent_of(binding.value)
        return parent is not None and self.module.parent_of(parent) is self.module.tree

    def binop(self, left: Kind, op: ast.operator, right: Kind, node: ast.AST) -> Kind:
        a, b = flat(left, node.lineno), flat(right, node.lineno)
        for side in (a, b):
            if isinstance(side, U):
                return side
        if a == BOT or b == BOT:
            return BOT
        if a == R and b == R:
            return R
        linear = isinstance(op, (ast.Add, ast.Sub))
        if isinstance(op, ast.MatMult):
            if a == S and b == R:
                return S
            if S in (a, b) and {a, b} <= {S, R} and self._batched_product(node, a, b):
                return S  # `q @ k.transpose(0, 1, 3, 2)`: the batch axis broadcast, not multiplied
            return U("a matrix product mixing per-example rows", node.lineno)
        if {a, b} <= {S, R}:
            return S
        if a == M and b == M and linear:
            return M
        if a == SUM and b == SUM and linear:
            return SUM
        if a == SUM and b == ROWS and isinstance(op, ast.Div):
            return M  # `jnp.sum(losses) / labels.shape[0]`: a mean written out
        if isinstance(op, ast.Mult) and {a, b} == {ROWS, R}:
            return ROWS  # `B * T` of `B, T, C = logits.shape`: a count of the rows' items
        scaled = isinstance(op, ast.Mult) or isinstance(op, ast.Div) and b == R  # never R / mean
        if M in (a, b) and R in (a, b) and (linear or scaled):
            return M
        if SUM in (a, b) and R in (a, b) and scaled:
            return SUM
        return U(f"`{_op(op)}` of {describe(a)} and {describe(b)} is not the same per shard and globally",
                 node.lineno)

    def _batched_product(self, node: ast.AST, a: Kind, b: Kind) -> bool:
        """``@`` (or ``jnp.matmul``, not ``jnp.dot``, which pairs every row of one with every row
        of the other) whose per-example operands have three axes or more (``ranks``): it
        multiplies their last two and broadcasts the others, the batch axis first."""
        if isinstance(node, ast.BinOp):
            operands = (node.left, node.right)
        elif isinstance(node, ast.Call) and self.names.qualified_name(node.func) == "jax.numpy.matmul" \
                and len(node.args) == 2:
            operands = tuple(node.args)
        else:
            return False
        return all(at_least(self.module, operand) >= 3 for operand, kind in zip(operands, (a, b)) if kind == S)

    def elementwise(self, kinds: list[Kind], node: ast.AST) -> Kind:
        atoms = [flat(k, node.lineno) for k in kinds]
        for atom in atoms:
            if isinstance(atom, U):
                return atom
        atoms = [a for a in atoms if a != BOT]
        if all(a == R for a in atoms):
            return R
        if all(a in (R, S) for a in atoms):
            return S
        if ROWS in atoms:
            return U(f"an operation on {describe(ROWS)}, which is all the batch's in the global view", node.lineno)
        return U("an elementwise operation on a per-shard reduction", node.lineno)

    def attribute(self, node: ast.Attribute, frame: Frame) -> Kind:
        qualified = self.names.qualified_name(node)
        if qualified is not None:
            return R
        raw = self.expr(node.value, frame)
        if isinstance(raw, Fields):
            return raw.field(node.attr)
        if isinstance(raw, Outputs):
            return S  # `outputs.logits`
        base = flat(raw, node.lineno)
        if base == S and node.attr == "ndim" or node.attr == "dtype" and base != BOT and not isinstance(base, U):
            return R  # (the rank: the device's slice has the global array's; the dtype: every device's)
        if base == S and node.attr in ("shape", "size", "T", "mT"):
            return U(f"`.{node.attr}` of a per-device slice of the batch is not its global `.{node.attr}`",
                     node.lineno)
        return base

    def subscript(self, node: ast.Subscript, frame: Frame) -> Kind:
        index = node.slice
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and _feature_axis(index) \
                and flat(self.expr(node.value.value, frame)) in (R, S):
            # `logits.shape[-1]`: a feature dimension, the same per device and globally (a negative
            # axis is a feature axis, as for reductions: the module docs' assumption)
            return R
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and is_zero(index) \
                and flat(self.expr(node.value.value, frame)) == S:
            return ROWS
        base = self.expr(node.value, frame)
        if isinstance(base, Outputs) and isinstance(index, ast.Constant) and type(index.value) in (int, str):
            return S  # `model(...)[0]`: a field of the outputs, not a row
        if isinstance(index, ast.Constant) and isinstance(base, Seq) and type(index.value) is int:
            try:
                return base.items[index.value]
            except IndexError:
                return U("an index past the end", node.lineno)
        if isinstance(index, ast.Constant) and isinstance(base, Record):
            return dict(base.items).get(index.value, U("a key that is not there", node.lineno))
        atom = flat(base, node.lineno)
        if atom == R:
            return self._replicated_indexed(index, node, frame)
        if atom == BOT or isinstance(atom, U):
            self.expr(index, frame) if not isinstance(index, ast.Slice) else None
            return atom
        if isinstance(index, ast.Constant) and isinstance(index.value, str):
            return atom  # a field of a batch pytree (batch["image"])
        if atom == S and isinstance(index, ast.Tuple) and index.elts and _whole(index.elts[0]):
            return S  # x[:, k] / x[..., k]: columns of every row
        return U(f"indexing {describe(atom)} along its first axis", node.lineno)

    def _replicated_indexed(self, index: ast.expr, node: ast.Subscript, frame: Frame) -> Kind:
        """A replicated array indexed: by values the same on every device, replicated still; by
        per-example indices first (an embedding's ``table[tokens]``), rows of those examples."""
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        kinds = [R if isinstance(part, ast.Slice) or isinstance(part, ast.Constant) and part.value is Ellipsis
                 else flat(self.expr(part, frame), node.lineno) for part in parts]
        for kind in kinds:
            if isinstance(kind, U):
                return kind
        if all(kind in (R, BOT) for kind in kinds):
            return BOT if BOT in kinds else R
        if kinds[0] == S and all(kind in (R, BOT) for kind in kinds[1:]):
            return S
        return U("a replicated value indexed by per-device values other than per-example indices first",
                 node.lineno)

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp, frame: Frame) -> Kind:
        """A filter the same on every device (``if x.ndim > 1`` over the parameters' leaves, a
        weight decay's) keeps the same items on each, and in the global view."""
        inner = Frame({}, frame, None)
        for generator in node.generators:
            if generator.is_async:
                return U("an async comprehension", node.lineno)
            self.bind(generator.target, self.iterate(self.expr(generator.iter, inner), generator.iter), inner)
            for test in generator.ifs:
                kind = flat(self.expr(test, inner), test.lineno)
                if kind != R:
                    return kind if isinstance(kind, U) else U(
                        f"a comprehension filtered on {describe(kind)}", test.lineno)
        return flat(self.expr(node.elt, inner), node.lineno)

    # -- calls ---------------------------------------------------------------------------

    def call(self, node: ast.Call, frame: Frame) -> Kind:
        qualified = self.names.qualified_name(node.func)
        if qualified in COLLECTIVES:
            return self.collective(node, qualified, frame)
        if qualified in GRADS:
            return self.grad_transform(node, GRADS[qualified], frame)
        if qualified in TREE_MAPS:
            return self.tree_map(node, frame)
        if qualified == "jax.random.fold_in" and len(node.args) == 2 and not node.keywords \
                and self._is_axis_index(node.args[1]):
            return self._unfold(node, frame)
        if qualified is not None and qualified.startswith("jax.random.") and node.args:
            first = flat(self.expr(node.args[0], frame), node.lineno)
            if first == KEY:
                return self.random(node, qualified, frame)
        builtin = self.names.builtin(node.func)
        if builtin == "zip":
            node._zip = True  # type: ignore[attr-defined]
            return Seq(tuple(flat(self.expr(a, frame), node.lineno) for a in node.args))
        if builtin == "len" and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Attribute) \
                and node.args[0].attr == "shape" and flat(self.expr(node.args[0].value, frame)) in (R, S):
            return R  # `len(x.shape)`: the rank, the same on each device's slice and globally
        if builtin == "len" and len(node.args) == 1 and not node.keywords \
                and flat(self.expr(node.args[0], frame)) == S:
            return ROWS
        if builtin == "sum" and len(node.args) in (1, 2) and not node.keywords:
            return self._sum(node, frame)
        if not qualified and self._model_call(node, frame):
            return self._apply_model(node, frame)
        stored = self._field_functions(node.func, frame)
        if stored is not None:
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                return U(f"`.{node.func.attr}(...)` is called with keyword or starred arguments", node.lineno)
            args = [self.expr(a, frame) for a in node.args]
            kind = BOT
            for fn in stored:  # any of them may be the one the state holds
                kind = join(kind, self._call_def(fn.node, args, fn.frame))
            return kind
        if isinstance(node.func, ast.Call) and self.names.qualified_name(node.func.func) == "jax.vmap":
            return self._vmapped(node, frame)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return self._opaque(node, frame)
        callee = self.expr(node.func, frame) if not qualified else None
        if isinstance(callee, Fn):
            return self._apply(callee, node, frame)
        if isinstance(callee, Grad):
            return self._apply_grad(callee, node, frame)
        if qualified is not None:
            other = program_modules.definition(qualified) if self._depth < self.MAX_DEPTH else None
            if other is not None and isinstance(other.binding, OpaqueBinding) \
                    and isinstance(other.binding.node, ast.FunctionDef):
                return self._call_other_module(other, node, frame)
            return self._library(node, qualified, frame)
        if isinstance(node.func, ast.Attribute):
            return self._method(node, frame)
        return self._opaque(node, frame)

    def _vmapped(self, node: ast.Call, frame: Frame) -> Kind:
        """``jax.vmap(f, in_axes=(0, None))(x, t)`` over per-example ``x`` (Equinox's idiom for a
        model of one example): each row of the result is ``f`` of one example's row, so it is per
        example. ``f`` is a replicated callable (a model: per example by the module docs'
        assumption), or a function of the module that, given replicated values, computes a
        replicated one with no collective (read so: it reads nothing per-device from around it).
        Only arguments mapped over their first axis may be per example."""
        vmap = node.func
        keywords = {k.arg: k.value for k in vmap.keywords}
        if not vmap.args or len(vmap.args) > 2 or None in keywords or set(keywords) - {"in_axes"} \
                or len(vmap.args) == 2 and "in_axes" in keywords or node.keywords \
                or any(isinstance(a, ast.Starred) for a in [*vmap.args, *node.args]):
            return U("a `jax.vmap` with options other than `in_axes=` (an axis name, `out_axes=`) or called "
                     "with keyword or starred arguments", node.lineno)
        given = vmap.args[1] if len(vmap.args) == 2 else keywords.get("in_axes")
        try:
            in_axes = 0 if given is None else ast.literal_eval(given)
        except ValueError:
            return U("`in_axes=` of a `jax.vmap` is not a literal", node.lineno)
        if in_axes == 0:
            in_axes = (0,) * len(node.args)
        if not (isinstance(in_axes, (tuple, list)) and len(in_axes) == len(node.args)
                and all(axis in (0, None) for axis in in_axes)):
            return U("`in_axes=` of a `jax.vmap` other than 0 or 0 / None per argument", node.lineno)
        kinds = [flat(self.expr(arg, frame), node.lineno) for arg in node.args]
        unknown = next((kind for kind in kinds if isinstance(kind, U)), None)
        if unknown is not None:
            return unknown
        if any(kind not in (R, BOT) and (axis is None or kind != S) for kind, axis in zip(kinds, in_axes)):
            return U("a `jax.vmap` given a per-device value other than per-example rows mapped over their "
                     "first axis", node.lineno)
        fn = self.expr(vmap.args[0], frame)
        if isinstance(fn, Fn):
            if any(isinstance(n, ast.Call) and self.names.qualified_name(n.func) in COLLECTIVES
                   for n in ast.walk(fn.node)):
                return U("a collective inside a `jax.vmap`ped function", node.lineno)
            inner = self._call_def(fn.node, [R] * len(node.args), fn.frame)
            if any(leaf != R for leaf in leaves(inner)):
                return U("a `jax.vmap`ped function that reads per-device values from around it", node.lineno)
        elif flat(fn, node.lineno) != R:
            return U("a `jax.vmap` of a function this analysis does not read", node.lineno)
        if BOT in kinds:
            return BOT
        return S if S in kinds else R

    def _sum(self, node: ast.Call, frame: Frame) -> Kind:
        """Python's ``sum``: of a list, tuple or comprehension, its items added (``sum([jnp.sum(x **
        2) for x in leaves])`` of replicated values is replicated); of an array, its rows added (of
        a per-example array, a per-shard sum)."""
        items, start = node.args[0], (self.expr(node.args[1], frame) if len(node.args) == 2 else R)
        if isinstance(items, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)):
            kind = self.expr(items, frame)
            parts = kind.items if isinstance(kind, Seq) else (flat(kind, node.lineno),)
            total = parts[0] if parts and len(node.args) == 1 else start
            for part in parts[1:] if parts and len(node.args) == 1 else parts:
                total = self.binop(total, ast.Add(), part, node)
            return total
        rows = flat(self.expr(items, frame), node.lineno)
        if rows == S:
            rows = SUM
        elif rows != R:
            return rows if isinstance(rows, U) else U(f"`sum` over {describe(rows)}", node.lineno)
        return self.binop(start, ast.Add(), rows, node) if len(node.args) == 2 else rows

    def _apply(self, fn: Fn, node: ast.Call, frame: Frame) -> Kind:
        given = self._arguments(node, frame)
        if isinstance(given, U):
            return given
        args, keywords = given
        return self._call_def(fn.node, args, fn.frame, keywords)

    def _arguments(self, node: ast.Call, frame: Frame) -> tuple[list[Kind], dict[str, Kind]] | U:
        """The kinds of a call's arguments, positional and by keyword (``loss_fn(params, batch,
        rng=key)``: ``_call_def`` gives each keyword to the parameter it names)."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return U(f"`{self.module.segment(node.func)}` is called with starred arguments", node.lineno)
        return [self.expr(a, frame) for a in node.args], {k.arg: self.expr(k.value, frame) for k in node.keywords}

    def grad_transform(self, node: ast.Call, with_value: bool, frame: Frame) -> Kind:
        if not node.args:
            return U("jax.grad without a function", node.lineno)
        fn = self.expr(node.args[0], frame)
        if not isinstance(fn, Fn):
            fn = self._other_module_function(node.args[0])
        if not isinstance(fn, Fn):
            return U("the differentiated function is not one this analysis can read", node.lineno)
        return self._grad_of(fn, with_value, node.keywords, node.lineno)

    def _decorated(self, node: ast.FunctionDef, frame: Frame) -> Kind:
        """An inner def under ``@jax.grad`` / ``@jax.value_and_grad``, or a ``partial`` of one
        (``@partial(jax.value_and_grad, has_aux=True)``): the gradient function it names."""
        decorator, keywords = (node.decorator_list[0] if len(node.decorator_list) == 1 else None), []
        if isinstance(decorator, ast.Call) and self.names.candidates(decorator.func) & PARTIAL \
                and len(decorator.args) == 1:
            decorator, keywords = decorator.args[0], decorator.keywords
        qualified = self.names.qualified_name(decorator) if decorator is not None else None
        made = self._grad_of(Fn(node, frame), GRADS[qualified], keywords, node.lineno) if qualified in GRADS else None
        if not isinstance(made, Grad):
            raise Blocked(node.lineno, f"the decorated inner function `{node.name}` is not followed")
        return made

    def _grad_of(self, fn: Fn, with_value: bool, keywords: list[ast.keyword], line: int) -> Kind:
        has_aux, argnums = False, (0,)
        for kw in keywords:
            if kw.arg == "has_aux" and isinstance(kw.value, ast.Constant):
                has_aux = bool(kw.value.value)
            elif kw.arg == "argnums":
                try:
                    value = ast.literal_eval(kw.value)
                except ValueError:
                    return U("`argnums=` is not a literal", line)
                argnums = (value,) if isinstance(value, int) else tuple(value)
            else:
                return U(f"`{kw.arg}=` of the gradient transform is not followed", line)
        return Grad(fn, with_value, has_aux, argnums)

    def _apply_grad(self, grad: Grad, node: ast.Call, frame: Frame) -> Kind:
        given = self._arguments(node, frame)
        if isinstance(given, U):
            return given
        args, keywords = given  # (jax differentiates positional arguments only: `argnums` counts those)
        for i in grad.argnums:
            if i >= len(args) or flat(args[i]) != R:
                unknown = flat(args[i]) if i < len(args) else None
                return unknown if isinstance(unknown, U) else U(
                    "a gradient with respect to a value that is not replicated", node.lineno)
        out = self._run_elsewhere(grad.fn.elsewhere, args, keywords, node) if grad.fn.elsewhere is not None else \
            self._call_def(grad.fn.node, args, grad.fn.frame, keywords)
        value, aux = (out.items if isinstance(out, Seq) and grad.has_aux and len(out.items) == 2 else (out, None))
        if grad.has_aux and aux is None:
            return U("`has_aux=True` with a function that does not return a pair", node.lineno)
        loss = flat(value, node.lineno)
        if loss in (M, SUM):
            grads: Kind = loss
        elif loss == R:
            grads = R
        else:
            why = f" ({loss.why})" if isinstance(loss, U) else ""
            grads = U(f"the gradient of {describe(loss)}{why} (line {node.lineno}), not of a per-shard mean or sum",
                      node.lineno if not isinstance(loss, U) else loss.line)
        if len(grad.argnums) > 1:
            grads = Seq((grads,) * len(grad.argnums))
        head = Seq((value, aux)) if grad.has_aux else value
        return Seq((head, grads)) if grad.with_value else (Seq((grads, aux)) if grad.has_aux else grads)

    def random(self, node: ast.Call, qualified: str, frame: Frame) -> Kind:
        """pmap gave every device its own key; the global view has one. A draw shaped like the
        batch (``x.shape`` of per-example ``x``, or an array of per-example probabilities) is per
        example either way: the values differ (the finding says the streams change), their
        meaning does not. A draw of a fixed shape was one per device, and is one in all now."""
        rest = [self.expr(a, frame) for a in node.args[1:] if not _is_shape_of_rows(a, self, frame)]
        rest += [self.expr(k.value, frame) for k in node.keywords if k.arg != "shape"]
        if any(flat(k) not in (R, S, BOT) for k in rest):  # (BOT: `()`, a scalar's shape)
            return U(f"`{qualified}` with a per-device argument", node.lineno)
        if qualified in KEY_OPS:
            return KEY if all(flat(k) == R for k in rest) else U("a key folded with per-example data", node.lineno)
        short = qualified.rsplit(".", 1)[1]
        position = SAMPLERS.get(short)
        if position is None:
            return U(f"`{qualified}` with a per-device key", node.lineno)
        shape = node.args[position] if len(node.args) > position else next(
            (k.value for k in node.keywords if k.arg == "shape"), None)
        if shape is not None and _is_shape_of_rows(shape, self, frame) or shape is None and any(
                flat(k) == S for k in rest):  # (shaped like its per-example arguments)
            self.result.draws.add(node.lineno)
            return S
        return U(f"`{short}` draws one value per device under pmap, one in all in the global view", node.lineno)

    def tree_map(self, node: ast.Call, frame: Frame) -> Kind:
        if not node.args or node.keywords:
            return U("a tree map this analysis cannot read", node.lineno)
        fn = self.expr(node.args[0], frame)
        trees = [flat(self.expr(a, frame), node.lineno) for a in node.args[1:]]
        if not isinstance(fn, Fn):
            return self.elementwise(trees, node) if all(t == R for t in trees) else U(
                "a tree map of a function this analysis cannot read", node.lineno)
        return flat(self._call_def(fn.node, trees, fn.frame), node.lineno)

    def collective(self, node: ast.Call, qualified: str, frame: Frame) -> Kind:
        short = qualified.rsplit(".", 1)[1]
        axis = self._axis_argument(node)
        if short in ("pmean", "psum") and axis is not None and axis == self.axis and node.args:
            arg = node.args[0]
            kind = self.expr(arg, frame)
            atom = flat(kind, node.lineno)
            if short == "pmean" and (atom in (M, R) or all(leaf in (M, R) for leaf in leaves(kind))):
                # (a tree of per-shard means and replicated values, `{"loss": loss, "lr": lr}`: the
                # mean of equal copies is the copy)
                return self._edit(node, arg, "drop", kind)
            if short == "psum" and atom in (SUM, ROWS):  # (the devices' counts: the global count)
                return self._edit(node, arg, "drop", kind)
            if short == "psum" and atom in (M, R):
                return self._edit(node, arg, "scale", kind)
            why = f"; it is {atom.why} (line {atom.line})" if isinstance(atom, U) and atom.line else (
                f"; it is {atom.why}" if isinstance(atom, U) else f"; it is {describe(atom)}")
            what = "a per-shard mean" if short == "pmean" else "a per-shard sum or mean"
            raise Blocked(node.lineno, f"`{short}` of a value not proven {what}{why}")
        if axis is not None and self.axis is not None and axis != self.axis:
            raise Blocked(node.lineno, f"`{short}` over axis {axis!r}, not the pmap's axis {self.axis!r}")
        raise Blocked(node.lineno, f"`{short}` has no global-view equivalent GSPMD inserts by itself")

    def _is_axis_index(self, node: ast.expr) -> bool:
        """``jax.lax.axis_index(axis)`` of the step's own axis: the device's position under pmap."""
        return isinstance(node, ast.Call) and self.names.qualified_name(node.func) == "jax.lax.axis_index" \
            and self.axis is not None and (
                len(node.args) == 1 and not node.keywords and self.literal_string(node.args[0]) == self.axis
                or not node.args and len(node.keywords) == 1 and node.keywords[0].arg == "axis_name"
                and self.literal_string(node.keywords[0].value) == self.axis)

    def _unfold(self, node: ast.Call, frame: Frame) -> Kind:
        """``fold_in(key, axis_index(axis))``: under pmap one key per device; in the global view
        the one key it was folded from draws for the whole batch (as a key split per device at the
        call site becomes the key it was split from): the random streams change, their meaning
        (draws shaped like the rows, ``random``) does not."""
        key = flat(self.expr(node.args[0], frame), node.lineno)
        if key not in (R, KEY):
            return U(f"`fold_in` of {describe(key)} with the device's index", node.lineno)
        new = CollectiveEdit(node, node.args[0], "unfold")
        old = self.result.edits.get(id(node))
        if old is not None and old.action != new.action:
            raise Blocked(node.lineno, "this fold_in is reached with values of different kinds")
        self.result.edits[id(node)] = new
        return KEY

    def _edit(self, node: ast.Call, arg: ast.expr, action: str, kind: Kind) -> Kind:
        tree = not (flat(kind) != BOT and not isinstance(kind, (Seq, Record)) and not self._tree_valued(arg))
        new = CollectiveEdit(node, arg, action, tree)
        old = self.result.edits.get(id(node))
        if old is not None and (old.action, old.tree) != (new.action, new.tree):
            raise Blocked(node.lineno, "this collective is reached with values of different kinds")
        self.result.edits[id(node)] = new
        return R

    def _tree_valued(self, arg: ast.expr) -> bool:
        """Whether a collective's argument may be a pytree (then scaling needs a tree map): not a
        constant, a jax.numpy reduction, or a name bound once to one or to the value
        ``jax.value_and_grad`` returns (an array: grad takes scalar functions only)."""
        if isinstance(arg, ast.Constant) or self._reduction_call(arg):
            return False
        if not isinstance(arg, ast.Name):
            return True
        bindings = self.names.bindings(arg)
        if len(bindings) != 1:
            return True
        binding = bindings[0]
        if isinstance(binding, ValueBinding):
            return not self._reduction_call(binding.value)
        target = getattr(binding, "node", None)
        return not (isinstance(target, ast.Name) and self._value_of_value_and_grad(target))

    def _reduction_call(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and self.names.qualified_name(node.func) in {
            f"jax.numpy.{r}" for r in (*REDUCTIONS, *OTHER_REDUCTIONS)}

    def _value_of_value_and_grad(self, target: ast.Name) -> bool:
        """``loss`` of ``loss, grads = jax.value_and_grad(f)(...)`` (``(loss, aux), grads = ...``
        with ``has_aux=True``)."""
        inner = self.module.parent_of(target)
        outer = self.module.parent_of(inner)
        if isinstance(outer, ast.Tuple) and outer.elts[0] is inner and isinstance(inner, ast.Tuple) \
                and inner.elts[0] is target:
            has_aux, pair = True, outer
        elif isinstance(inner, ast.Tuple) and inner.elts[0] is target:
            has_aux, pair = False, inner
        else:
            return False
        statement = self.module.parent_of(pair)
        if not (isinstance(statement, ast.Assign) and statement.targets == [pair] and len(pair.elts) == 2):
            return False
        call = statement.value
        made = call.func if isinstance(call, ast.Call) else None
        if not (isinstance(made, ast.Call) and self.names.qualified_name(made.func) == "jax.value_and_grad"):
            return False
        aux = next((k.value for k in made.keywords if k.arg == "has_aux"), None)
        given = isinstance(aux, ast.Constant) and aux.value is True
        return given == has_aux and (aux is None or isinstance(aux, ast.Constant))

    def _axis_argument(self, node: ast.Call) -> str | None:
        value = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg in ("axis_name",)), None)
        if value is None:
            return None
        return self.literal_string(value)

    def literal_string(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            # A name bound once, to a string: a module constant (`AXIS = "batch"`) or a local
            # (brax's `axis_name = 'x'` beside the pmap that names it); read before that one
            # binding, it would raise under pmap too.
            bindings = self.names.bindings(node)
            if len(bindings) == 1 and isinstance(bindings[0], ValueBinding):
                value = bindings[0].value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return value.value
        return None

    def _axis(self, node: ast.Call, name: str = "axis", position: int | None = 1) -> tuple[bool, object]:
        """(given, value) of a reduction's axis argument; value None for all axes."""
        value = node.args[position] if position is not None and len(node.args) > position else next(
            (k.value for k in node.keywords if k.arg == name), None)
        if value is None:
            return False, None
        if self._past_the_first(isinstance(value, ast.Name) and single_value(self.names, value) or value):
            return True, (1,)  # `axis=tuple(range(1, x.ndim))`: every axis but the batch's (feature axes)
        try:
            return True, ast.literal_eval(value)
        except ValueError:
            return True, "?"

    def _past_the_first(self, node: ast.expr) -> bool:
        """``tuple(range(1, n))`` (or ``list(...)``, or the range itself): axes that skip the first."""
        if isinstance(node, ast.Call) and self.names.builtin(node.func) in ("tuple", "list") \
                and len(node.args) == 1 and not node.keywords:
            node = node.args[0]
        return isinstance(node, ast.Call) and self.names.builtin(node.func) == "range" and len(node.args) == 2 \
            and not node.keywords and isinstance(node.args[0], ast.Constant) and type(node.args[0].value) is int \
            and node.args[0].value >= 1

    def _library(self, node: ast.Call, qualified: str, frame: Frame) -> Kind:
        module, _, short = qualified.rpartition(".")
        args = [self.expr(a, frame) for a in node.args]
        for kw in node.keywords:
            if kw.arg not in ("axis", "keepdims", "dtype", "num_classes", "where_"):
                args.append(self.expr(kw.value, frame))
        unknown = next((leaf for kind in args for leaf in leaves(kind) if isinstance(leaf, U)), None)
        if unknown is not None:
            return unknown  # the first reason it is unknown is the one to tell
        first = flat(args[0], node.lineno) if args else R
        if qualified == "jax.numpy.reshape" and first == S and len(node.args) >= 2 and not node.keywords:
            return self._reshaped_rows(node, node.args[1:], frame)  # `jnp.reshape(logits, (-1, C))`
        if is_layout_op(qualified) and not all(flat(a) == R for a in args):
            if any(flat(kind) != R for kind in args[len(node.args):]):  # (keyword arguments but the axis)
                return U(f"`{short}` given per-device options", node.lineno)
            return layout_op(node, qualified, args[:len(node.args)],
                             at_least(self.module, node.args[0]) if node.args else 0)
        if module == "jax.numpy" and short in REDUCTIONS or module in ("jax.numpy", "jax.nn", "jax.scipy.special") \
                and short in OTHER_REDUCTIONS and qualified not in AXIS_ARGUMENT:
            return self._reduction(node, short, first, args[1:], axis_position=1)
        if qualified in _CONVOLUTIONS and first == S and len(args) >= 2 and all(flat(a) == R for a in args[1:]):
            # (the kernel and the options the same everywhere)
            return S if self._batch_first(node, qualified) else U(
                f"`{short}` whose batch is not the first axis of its input and output, or is grouped", node.lineno)
        if qualified in ROWWISE:
            if qualified in ("jax.numpy.dot", "jax.numpy.matmul"):
                return self.binop(args[0], ast.MatMult(), args[1], node) if len(args) == 2 else U(
                    "a product of more than two values", node.lineno)
            if qualified in AXIS_ARGUMENT:
                given, axis = self._axis(node, position=AXIS_ARGUMENT[qualified])
                if given and not off_the_batch_axis(axis):
                    return U(f"`{short}` along the batch axis", node.lineno)
            return self.elementwise(args, node)
        if all(flat(a) == R for a in args):
            return R
        return U(f"`{qualified}` of per-device values is not known to treat examples independently",
                 node.lineno)

    @staticmethod
    def _batch_first(node: ast.Call, qualified: str) -> bool:
        """A convolution that takes each example alone: its input's and output's batch dimension
        the first (``dimension_numbers`` absent, None, or specs written ``("NHWC", "HWIO", "NHWC")``),
        and no ``batch_group_count`` but 1, which would convolve groups of examples together."""
        numbers_at, groups_at = _CONVOLUTIONS[qualified]
        def argument(position, name):
            given = node.args[position] if position is not None and len(node.args) > position else None
            return given if given is not None else next((k.value for k in node.keywords if k.arg == name), None)
        groups = argument(groups_at, "batch_group_count")
        if groups is not None and not (isinstance(groups, ast.Constant) and groups.value == 1):
            return False
        numbers = argument(numbers_at, "dimension_numbers")
        if numbers is None or isinstance(numbers, ast.Constant) and numbers.value is None:
            return True  # (lax's default, NCHW: the batch first)
        specs = numbers.elts if isinstance(numbers, (ast.Tuple, ast.List)) and len(numbers.elts) == 3 else []
        return bool(specs) and all(isinstance(spec, ast.Constant) and isinstance(spec.value, str) for spec in specs) \
            and specs[0].value[:1] == "N" and specs[2].value[:1] == "N"

    def _reduction(self, node: ast.Call, short: str, first: Kind, rest: list[Kind], axis_position: int) -> Kind:
        for other in rest:
            if flat(other) not in (R, BOT):
                return U(f"`{short}` with per-device extra arguments", node.lineno)
        given, axis = self._axis(node, position=axis_position)
        if first in (R, BOT) or isinstance(first, U):
            return first
        if first != S:
            return U(f"`{short}` of {describe(first)}", node.lineno)
        axes = axis if isinstance(axis, tuple) else (axis,)
        if given and axis is not None and off_the_batch_axis(axis):
            return S  # over feature axes only: each row stays a row
        if not given or axis is None or 0 in axes:
            if short in REDUCTIONS and (not given or axis is None or axes == (0,)):
                return REDUCTIONS[short]
        return U(f"`{short}` over the batch axis", node.lineno)

    def _method(self, node: ast.Call, frame: Frame) -> Kind:
        func = node.func
        assert isinstance(func, ast.Attribute)
        raw = self.expr(func.value, frame)
        if func.attr in _STATE_UPDATES and not node.args and (raw == R or isinstance(raw, Fields)):
            return self._state_update(raw, node, frame)
        base = flat(raw, node.lineno)
        if isinstance(base, U):
            return base  # the first reason it is unknown is the one to tell
        args = [self.expr(a, frame) for a in node.args]
        kwargs = [self.expr(k.value, frame) for k in node.keywords if k.arg not in ("axis", "keepdims", "dtype")]
        if func.attr in REDUCTIONS or func.attr in OTHER_REDUCTIONS:
            if base == S or base in (R, BOT):
                return self._reduction(node, func.attr, base, [*args[1:], *kwargs], axis_position=0)
        if func.attr in ("pop", "get") and base == S and all(flat(a) == R for a in args):
            return S  # `batch.pop("labels")`: an entry of a batch pytree
        if func.attr == "astype":
            return base if all(flat(a) == R for a in args) else U("astype to a per-device dtype", node.lineno)
        if func.attr == "reshape" and base == S and not node.keywords:
            return self._reshaped_rows(node, node.args, frame)
        if base == S and method_layout(node, at_least(self.module, node.func.value)) \
                and all(flat(a) == R for a in args):
            return S  # `q.transpose(0, 2, 1, 3)`: the batch axis stays first
        if base == R and all(flat(a) == R for a in [*args, *kwargs]):
            return R
        return U(f"`.{func.attr}(...)` of per-device values is not known to treat examples independently",
                 node.lineno)

    def _state_update(self, state: Kind, node: ast.Call, frame: Frame) -> Kind:
        """``state.replace(f=...)`` / ``state.apply_gradients(grads=..., f=...)`` of a flax
        ``TrainState``: the state with those fields. The gradients update the parameters and the
        optimizer's state, which stay replicated only where they are."""
        fields = dict(state.items) if isinstance(state, Fields) else {}
        for keyword in node.keywords:
            kind = self.expr(keyword.value, frame)
            if keyword.arg is None or keyword.arg == "grads" and node.func.attr == "apply_gradients":
                if flat(kind, node.lineno) != R:
                    return U(f"`.{node.func.attr}(...)` of values that are not replicated", node.lineno)
                continue
            fields[keyword.arg] = kind
        kept = tuple((name, kind) for name, kind in sorted(fields.items()) if kind != R)
        return Fields(kept) if kept else R

    def _field_functions(self, func: ast.expr, frame: Frame) -> list[Fn] | None:
        """``state.loss_fn`` of a ``TrainState`` that keeps functions in static fields
        (``loss_fn: Callable = struct.field(pytree_node=False)``, the Hugging Face examples'): every
        function of the module the program stores there, where the one class declaring that field
        is made and replaced only in this module and each value is a def or lambda of it."""
        if not isinstance(func, ast.Attribute):
            return None
        state = self.expr(func.value, frame)
        if not (state == R or isinstance(state, Fields) and state.field(func.attr) == R):
            return None
        found = self.module.shared.get("static_function_fields")
        if found is None:
            found = self.module.shared["static_function_fields"] = _static_function_fields(self.module)
        return found.get(func.attr)

    def _model_call(self, node: ast.Call, frame: Frame) -> bool:
        """A model applied: flax's and haiku's ``model.apply(...)`` / ``state.apply_fn(...)``, or a
        Hugging Face model called as its examples call it, ``model(**batch, params=params,
        train=...)``: a replicated callable, not a function this analysis reads."""
        func = node.func
        model = isinstance(func, ast.Attribute) and func.attr in ("apply", "apply_fn") \
            or {"params", "train"} <= {k.arg for k in node.keywords}
        return model and flat(self.expr(func, frame)) == R  # (a def this analysis reads is an `Fn`)

    def _apply_model(self, node: ast.Call, frame: Frame) -> Kind:
        """``model.apply(variables, x, rngs={"dropout": key})``: per example, as the module docs
        assume, unless the model keeps statistics of its batch. A per-device key (flax's ``rngs=``,
        haiku's ``rng`` argument, a Hugging Face model's ``dropout_rng=``) draws per example, as
        ``random`` reads a draw shaped like the rows. A Hugging Face model returns ``Outputs``."""
        func = node.func
        mutable = next((k.value for k in node.keywords if k.arg == "mutable"), None)
        if mutable is not None and not (isinstance(mutable, ast.Constant) and mutable.value is False):
            return U("the model is applied with `mutable=` (batch statistics: per-shard, not global)", node.lineno)
        if isinstance(func, ast.Attribute) and self._haiku_with_state(func.value):
            return U("the model is a haiku `transform_with_state`: its state (BatchNorm's statistics) is computed "
                     "over each device's slice of the batch, not over the whole batch", node.lineno)
        if any(isinstance(a, ast.Starred) for a in node.args):
            return U("a model applied to `*args`", node.lineno)
        kinds = [self.expr(a, frame) for a in node.args]
        kinds += [self.expr(k.value, frame) for k in node.keywords if k.arg != "mutable"]
        if any(leaf == KEY for kind in kinds for leaf in leaves(kind)):
            kinds = [R if leaf_kinds and all(leaf in (KEY, R) for leaf in leaf_kinds) else kind
                     for kind, leaf_kinds in ((kind, leaves(kind)) for kind in kinds)]
        if any(k.arg in _MODEL_KEYS for k in node.keywords):  # (its dropout masks, drawn per example)
            self.result.draws.add(node.lineno)
        rows = self.elementwise(kinds, node)
        hugging_face = any(k.arg == "params" for k in node.keywords)
        return Outputs() if hugging_face and rows == S else rows

    def _haiku_with_state(self, model: ast.expr) -> bool:
        """Whether ``model`` is bound to ``hk.transform_with_state(f)`` (maybe in ``without_apply_rng``)."""
        if not isinstance(model, ast.Name):
            return False
        for binding in self.names.bindings(model):
            value = getattr(binding, "value", None)
            while isinstance(value, ast.Call) and value.args \
                    and self.names.qualified_name(value.func) == "haiku.without_apply_rng":
                value = value.args[0]
            if isinstance(value, ast.Call) and self.names.qualified_name(value.func) in _HAIKU_WITH_STATE:
                return True
        return False

    def _call_other_module(self, other: program_modules.Definition, node: ast.Call, frame: Frame) -> Kind:
        """A function of another module of the program (``losses.cross_entropy(logits, labels)``)."""
        given = self._arguments(node, frame)
        return given if isinstance(given, U) else self._run_elsewhere(other, *given, node)

    def _other_module_function(self, node: ast.expr) -> Fn | None:
        """``losses.loss_fn`` given to ``jax.grad``: a function of another module of the program."""
        qualified = self.names.qualified_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        other = program_modules.definition(qualified) if qualified is not None else None
        if other is not None and isinstance(other.binding, OpaqueBinding) \
                and isinstance(other.binding.node, ast.FunctionDef):
            return Fn(other.binding.node, None, other)
        return None

    def _run_elsewhere(self, other: program_modules.Definition, args: list[Kind], keywords: dict[str, Kind],
                       node: ast.Call) -> Kind:
        """The kind another module's function returns, read in that module with its own imports.
        It may not hold collectives: the fix edits only the file it checks, so a ``pmean`` there
        would stay, and stay wrong."""
        where = f"`{other.name}` ({other.path.name}, line {other.binding.node.lineno})"
        analyzer = StepAnalyzer(other.module, self.axis)
        analyzer._depth = self._depth + 1
        try:
            out = analyzer._call_def(other.binding.node, args, None, keywords)
        except Blocked as blocked:
            return U(f"{where}: line {blocked.line} there: {blocked.message}", node.lineno)
        if analyzer.result.edits:
            first = min(e.node.lineno for e in analyzer.result.edits.values())
            return U(f"{where} calls a collective (line {first} there), which this fix does not rewrite in "
                     "another module", node.lineno)
        if analyzer.result.draws:
            self.result.draws.add(node.lineno)  # (the lines there are another file's)
        return _relocated(out, where, node.lineno)

    def _opaque(self, node: ast.Call, frame: Frame) -> Kind:
        kinds = [self.expr(a.value if isinstance(a, ast.Starred) else a, frame) for a in node.args]
        kinds += [self.expr(k.value, frame) for k in node.keywords]
        if not isinstance(node.func, ast.Name):
            kinds.append(self.expr(node.func, frame))
        if all(flat(k) == R for k in kinds):
            return R
        unknown = next((flat(k) for k in kinds if isinstance(flat(k), U)), None)
        if unknown is not None:
            return unknown  # the first reason it is unknown is the one to tell
        return U("a call this analysis cannot follow receives per-device values", node.lineno)


def _relocated(kind: Kind, where: str, line: int) -> Kind:
    """A kind another module's analysis returned, told from the caller's line: its reasons name
    lines of that module, and a function of it cannot be called with this module's resolver."""
    if isinstance(kind, U):
        return U(f"{where}: line {kind.line} there: {kind.why}", line)
    if isinstance(kind, (Fn, Grad)):
        return U(f"{where} returns a function", line)
    if isinstance(kind, Seq):
        return Seq(tuple(_relocated(k, where, line) for k in kind.items))
    if isinstance(kind, Record):
        return Record(tuple((key, _relocated(k, where, line)) for key, k in kind.items))
    return kind


def _is_shape_of_rows(node: ast.expr, analyzer: "StepAnalyzer", frame: Frame) -> bool:
    """``x.shape`` of a per-example ``x``: the shape of the device's rows, of all rows globally."""
    return isinstance(node, ast.Attribute) and node.attr == "shape" and flat(analyzer.expr(node.value, frame)) == S


def _whole(index: ast.expr) -> bool:
    """``:`` or ``...``: an index that keeps every row."""
    if isinstance(index, ast.Slice):
        return index.lower is None and index.upper is None and index.step is None
    return isinstance(index, ast.Constant) and index.value is Ellipsis


def _op(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
            ast.FloorDiv: "//", ast.Mod: "%"}.get(type(op), type(op).__name__)


def _feature_axis(index: ast.expr) -> bool:
    """A literal axis that is not the batch axis (``off_the_batch_axis``)."""
    try:
        value = ast.literal_eval(index)
    except ValueError:
        return False
    return type(value) is int and off_the_batch_axis(value)


def _static_function_fields(module) -> dict[str, list[Fn]]:
    """Per field name, the functions the module stores in it, for each static field (``pytree_node=
    False``) one class of the module declares, whose every value given by a keyword of that name
    (to the class, its ``create`` or any ``replace``) is a def or lambda of the module. A class a
    module-level name of a module that is not a script offers to others is left out: they may
    store anything."""
    names = module.names
    declared: dict[str, list[ast.ClassDef]] = {}
    for cls in module.of_type(ast.ClassDef):
        for statement in cls.body:
            value = getattr(statement, "value", None)
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                    and isinstance(value, ast.Call) and names.qualified_name(value.func) == "flax.struct.field" \
                    and any(k.arg == "pytree_node" and isinstance(k.value, ast.Constant) and k.value.value is False
                            for k in value.keywords):
                declared.setdefault(statement.target.id, []).append(cls)
    script = is_script(module)
    fields: dict[str, list[Fn]] = {}
    for name, classes in declared.items():
        cls = classes[0]
        if len(classes) != 1 or module.parent_of(cls) is module.tree and not (script or cls.name.startswith("_")):
            continue
        stored: list[Fn] | None = []
        for call in module.of_type(ast.Call):
            for keyword in call.keywords:
                if keyword.arg != name:
                    continue
                value = keyword.value
                bindings = names.bindings(value) if isinstance(value, ast.Name) else []
                if isinstance(value, ast.Lambda):
                    stored.append(Fn(value, None))
                elif len(bindings) == 1 and isinstance(bindings[0], OpaqueBinding) \
                        and isinstance(bindings[0].node, ast.FunctionDef):
                    stored.append(Fn(bindings[0].node, None))
                else:
                    stored = None
                    break
            if stored is None:
                break
        if stored:
            fields[name] = stored
    return fields
