"""The kinds of values a pmapped step computes, device by device, and what jax functions do to them.

See ``step`` for what the kinds mean and how the step is read.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

# -- kinds -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Atom:
    name: str  # R | S | M | SUM | BOT

    def __repr__(self) -> str:
        return self.name


R, S, M, SUM, BOT = Atom("R"), Atom("S"), Atom("M"), Atom("SUM"), Atom("BOT")
# A per-device RNG key under pmap (``random.split(key, n)`` at the call site), one key in the global view.
KEY = Atom("KEY")
# How many examples the device holds (``x.shape[0]`` or ``len(x)`` of a per-example ``x``): all the
# batch's in the global view. A per-shard sum divided by it is a per-shard mean (a mean written
# out), and its ``psum`` is the global count; anything else computed from it is not known.
ROWS = Atom("ROWS")


@dataclass(frozen=True)
class U:
    """Not provably any of the kinds above; ``why`` says what made it so (for the finding)."""

    why: str
    line: int


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Record:
    items: tuple  # ((key, kind), ...)


@dataclass(frozen=True)
class Fields:
    """A replicated object (a flax ``TrainState``) but for these fields: the Hugging Face examples
    keep one dropout key per device in theirs. Every other field is ``R``."""

    items: tuple  # ((name, kind), ...)

    def field(self, name: str) -> "Kind":
        return dict(self.items).get(name, R)


@dataclass(frozen=True)
class Outputs:
    """What a Hugging Face model returns: a ``ModelOutput`` (or tuple) of per-example values, read
    by position (``outputs[0]``) or by name (``outputs.logits``)."""


@dataclass(frozen=True, eq=False)
class Fn:
    node: ast.AST  # FunctionDef or Lambda
    frame: object  # the step.Frame it closes over, or None
    elsewhere: object = None  # the program_modules.Definition of a function of another module


@dataclass(frozen=True, eq=False)
class Grad:
    fn: Fn
    with_value: bool
    has_aux: bool
    argnums: tuple[int, ...]


Kind = Atom | U | Seq | Record | Fields | Outputs | Fn | Grad


class Blocked(Exception):
    """The global view cannot be proven; ``line`` is where, the message says why."""

    def __init__(self, line: int, message: str, argument: tuple | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        # (step, position) of a step's argument the driving code's analysis does not recognise:
        # what the step would do with it laid out as a batch is worth telling too.
        self.argument = argument


def join(a: Kind, b: Kind) -> Kind:
    if a == BOT:
        return b
    if b == BOT or a == b:
        return a
    if isinstance(a, Seq) and isinstance(b, Seq) and len(a.items) == len(b.items):
        return Seq(tuple(join(x, y) for x, y in zip(a.items, b.items)))
    if isinstance(a, U):
        return a
    if isinstance(b, U):
        return b
    return U("it holds different kinds of values on different paths", 0)


def leaves(kind: Kind) -> list[Kind]:
    if isinstance(kind, Seq):
        return [leaf for item in kind.items for leaf in leaves(item)]
    if isinstance(kind, Record):
        return [leaf for _, item in kind.items for leaf in leaves(item)]
    if isinstance(kind, Fields):
        return [R, *(leaf for _, item in kind.items for leaf in leaves(item))]
    if isinstance(kind, Outputs):
        return [S]
    return [kind]


def flat(kind: Kind, line: int = 0) -> Kind:
    """One atom for a whole pytree (its leaves' common kind), else U."""
    found = [leaf for leaf in leaves(kind) if leaf != BOT]
    if not found:
        return BOT
    unknown = next((leaf for leaf in found if isinstance(leaf, U)), None)
    if unknown is not None:
        return unknown
    if all(leaf == found[0] for leaf in found):
        return found[0]
    if all(leaf in (R, found[0]) for leaf in found) and found[0] in (M, SUM):
        return U("a pytree mixing per-shard reductions with replicated values", line)
    return U("a pytree mixing per-example and other values", line)


def describe(kind: Kind) -> str:
    return {
        "R": "a replicated value", "S": "a per-example (batch-sharded) value", "M": "a per-shard mean",
        "SUM": "a per-shard sum", "BOT": "nothing", "KEY": "a per-device RNG key",
        "ROWS": "the number of the device's examples",
    }.get(getattr(kind, "name", ""), "a value of unknown kind")


# -- what jax functions do to rows -----------------------------------------------------------

ROWWISE = frozenset(
    f"jax.numpy.{name}" for name in (
        "exp", "log", "log1p", "expm1", "tanh", "sin", "cos", "abs", "square", "sqrt", "rsqrt", "sign",
        "maximum", "minimum", "where", "clip", "equal", "not_equal", "greater", "greater_equal", "less",
        "less_equal", "logical_and", "logical_or", "logical_not", "negative", "reciprocal", "power",
        "multiply", "add", "subtract", "divide", "true_divide", "floor", "ceil", "round", "isnan",
        "isfinite", "nan_to_num", "float32", "int32", "asarray", "array", "dot", "matmul",
        "argmax", "argmin", "take_along_axis", "logaddexp", "ones_like", "zeros_like",
        # (elementwise too: each element of the result is of the elements at its place)
        "real", "imag", "conj", "conjugate", "angle", "exp2", "log2", "log10", "sinh", "cosh", "tan",
        "arcsin", "arccos", "arctan", "arctan2", "arcsinh", "arccosh", "arctanh", "hypot", "floor_divide",
        "remainder", "mod", "fmod", "logaddexp2", "cbrt", "deg2rad", "rad2deg", "positive", "fabs",
        "copysign", "signbit", "isinf",
    )
) | frozenset(
    f"jax.nn.{name}" for name in (
        "relu", "gelu", "sigmoid", "silu", "swish", "softplus", "elu", "leaky_relu", "tanh", "softmax",
        "log_softmax", "one_hot", "logsumexp", "log_sigmoid", "relu6", "selu", "celu", "hard_tanh",
        "hard_sigmoid", "hard_silu", "hard_swish", "mish", "soft_sign",
    )
) | frozenset({
    "jax.scipy.special.logsumexp", "jax.lax.stop_gradient", "flax.training.common_utils.onehot",
})
# optax's losses (each example's own loss; named at the top level and in `optax.losses`), by the
# position of their `axis` argument (None: keyword only; absent: they take none).
OPTAX_LOSSES = {"softmax_cross_entropy": 2, "softmax_cross_entropy_with_integer_labels": 2, "kl_divergence": 2,
                "convex_kl_divergence": 2, "smooth_labels": None, "cosine_similarity": None,
                "cosine_distance": None, "poly_loss_cross_entropy": None, "sigmoid_binary_cross_entropy": False,
                "sigmoid_focal_loss": False, "safe_softmax_cross_entropy": False, "l2_loss": False,
                "squared_error": False, "huber_loss": False, "log_cosh": False, "hinge_loss": False}
ROWWISE |= {f"{module}.{name}" for name in OPTAX_LOSSES for module in ("optax", "optax.losses")}
# Functions that reduce over ``axis`` (all axes when it is absent), and what they make of rows.
REDUCTIONS = {"mean": M, "average": M, "sum": SUM}
OTHER_REDUCTIONS = frozenset({"max", "min", "prod", "std", "var", "median", "any", "all", "argmax", "argmin",
                               "logsumexp", "count_nonzero", "nanmean", "nansum"})
# Row-wise functions with an axis argument (its position; None: keyword only) that must not be 0.
AXIS_ARGUMENT = {"jax.nn.softmax": 1, "jax.nn.log_softmax": 1, "jax.numpy.take_along_axis": 2, "jax.nn.one_hot": None,
                 **{f"{module}.{name}": position for name, position in OPTAX_LOSSES.items() if position is not False
                    for module in ("optax", "optax.losses")}}


def off_the_batch_axis(axis) -> bool:
    """An ``axis=`` that is not the batch's first: a positive position, or -1 (the last, as the
    default is: the analysis reads arrays of rows as having more axes than one), or a tuple of those."""
    if isinstance(axis, tuple):
        return bool(axis) and all(off_the_batch_axis(a) for a in axis)
    return type(axis) is int and (axis > 0 or axis == -1)

COLLECTIVES = frozenset(f"jax.lax.{name}" for name in (
    "psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "pshuffle", "pswapaxes", "all_to_all",
    "axis_index", "axis_size", "psum_scatter", "pbroadcast", "pcast", "pvary", "ragged_all_to_all",
)) | frozenset({"flax.jax_utils.pmean"})

# jax.random samplers: where their shape argument is (they draw per example when it is a batch's shape).
SAMPLERS = {"normal": 1, "uniform": 1, "bernoulli": 2, "truncated_normal": 3, "randint": 1, "gumbel": 1,
            "exponential": 1, "laplace": 1, "logistic": 1}
KEY_OPS = frozenset({"jax.random.split", "jax.random.fold_in"})

# (Equinox's differentiate with respect to the first argument's arrays, as `argnums=0` does.)
GRADS = {"jax.grad": False, "jax.value_and_grad": True, "equinox.filter_grad": False,
         "equinox.filter_value_and_grad": True}
