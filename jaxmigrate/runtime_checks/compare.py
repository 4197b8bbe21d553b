"""Compare two sides' outputs: tree structure, then per leaf shape, dtype and values.

numpy is imported lazily: this module is imported by the CLI, which must load without the
``runtime`` extra installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# (rtol, atol) by dtype name. Float defaults allow for reassociated reductions (a pmap psum and
# a GSPMD all-reduce may sum in different orders): a few ulps scaled to each type's epsilon.
_FLOAT_TOLERANCES = {
    "float64": (1e-9, 1e-12), "complex128": (1e-9, 1e-12),
    "float32": (1e-5, 1e-6), "complex64": (1e-5, 1e-6),
    "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2),
}
_FP8_TOLERANCE = (1.25e-1, 1e-1)
EXACT = (0.0, 0.0)


# A default repr names the object's memory address (`<Config object at 0x7f3a...>`), which
# differs between two processes running the same program.
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")


def stable_form(printed: str) -> str:
    """A non-array leaf's printed form (or a tree structure's) without memory addresses: what two
    runs of the same program print alike. Non-array leaves compare by it."""
    return _ADDRESS.sub("0x...", printed)


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for a dtype name; integers, bools and PRNG keys compare exactly."""
    if dtype in _FLOAT_TOLERANCES:
        return _FLOAT_TOLERANCES[dtype]
    if dtype.startswith("float8") or dtype.startswith("float4") or dtype.startswith("float6"):
        return _FP8_TOLERANCE
    return EXACT


@dataclass(frozen=True)
class Leaf:
    """One output leaf as a worker saved it (value is None for non-array leaves)."""

    path: str
    dtype: str
    shape: tuple[int, ...] | None
    value: Any = None  # numpy array
    note: str = ""
    sharding: str | None = None


@dataclass(frozen=True)
class Outputs:
    treedef: str
    leaves: list[Leaf]


@dataclass
class LeafDiff:
    path: str
    equal: bool
    old_shape: tuple[int, ...] | None
    new_shape: tuple[int, ...] | None
    old_dtype: str | None
    new_dtype: str | None
    max_abs: float | None = None
    max_rel: float | None = None
    rtol: float = 0.0
    atol: float = 0.0
    reason: str = ""  # why not equal, in words; empty when equal
    unreplicated: str | None = None  # "old" / "new": that side's device axis was dropped

    @property
    def badness(self) -> float:
        """How far outside tolerance: orders the worst leaves first."""
        if self.max_abs is None:
            return float("inf")
        return self.max_abs / (self.atol + self.rtol + 1e-300)


@dataclass
class Comparison:
    equal: bool
    structure_equal: bool
    problems: list[str] = field(default_factory=list)
    leaves: list[LeafDiff] = field(default_factory=list)

    def worst(self, n: int = 5) -> list[LeafDiff]:
        bad = [leaf for leaf in self.leaves if not leaf.equal]
        return sorted(bad, key=lambda leaf: -leaf.badness)[:n]


def _errors(np: Any, old: Any, new: Any) -> tuple[float, float]:
    if old.size == 0:
        return 0.0, 0.0
    if old.dtype.kind in "biu":
        old, new = old.astype(np.float64), new.astype(np.float64)
    # Equal values (an infinity against the same infinity too) differ by 0; inf - inf would be
    # NaN, with numpy's "invalid value" warning.
    same = old == new
    if old.dtype.kind in "fc":
        same |= np.isnan(old) & np.isnan(new)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(new - old))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only is as bad as it gets
        scale = np.maximum(np.abs(old), np.finfo(np.float64).tiny)
        # A difference where old is 0 is an infinite relative error; one where old is infinite
        # (inf / inf) is too.
        relative = np.where(np.isinf(diff), np.inf, diff / scale)
    return float(diff.max()), float(relative.max())


def _values_equal(np: Any, old: Any, new: Any, rtol: float, atol: float) -> bool:
    if (rtol, atol) == EXACT or old.dtype.kind not in "fc":
        return bool(np.array_equal(old, new, equal_nan=old.dtype.kind in "fc"))
    return bool(np.allclose(new, old, rtol=rtol, atol=atol, equal_nan=True))


def _unreplicate(np: Any, leaf: Leaf, other: Leaf, rtol: float, atol: float) -> tuple[Leaf, str]:
    """Drop ``leaf``'s leading device axis when its slices agree; else say why not."""
    shape, value = leaf.shape, leaf.value
    if value is None or shape is None or other.shape is None:
        return leaf, ""
    # Only a leaf with exactly one more (leading) axis than the other side's can carry a device
    # axis: a scalar on both sides (shape () and ()[1:] == ()) has none to drop.
    if len(shape) != len(other.shape) + 1 or tuple(shape[1:]) != tuple(other.shape):
        return leaf, ""
    if shape[0] == 0:
        return leaf, "cannot unreplicate an empty leading axis"
    first = value[0]
    for i in range(1, shape[0]):
        if not _values_equal(np, first, value[i], rtol, atol):
            return leaf, f"slice {i} of the leading (device) axis differs from slice 0: not replicated"
    return Leaf(leaf.path, leaf.dtype, tuple(shape[1:]), first, leaf.note, leaf.sharding), ""


def _unreplicate_hint(old: tuple[int, ...] | None, new: tuple[int, ...] | None) -> str:
    """pmap-era outputs carry a leading device axis the global version lacks: say so."""
    if old is not None and new is not None:
        if old[1:] == new:
            return " (a leading device axis on old: try unreplicate='old')"
        if new[1:] == old:
            return " (a leading device axis on new: try unreplicate='new')"
    return ""


def compare_leaf(
    old: Leaf, new: Leaf, *, rtol: float | None = None, atol: float | None = None,
    unreplicate: str | None = None,
) -> LeafDiff:
    import numpy as np

    default_rtol, default_atol = default_tolerance(old.dtype)
    if (default_rtol, default_atol) != EXACT:
        default_rtol = default_rtol if rtol is None else rtol
        default_atol = default_atol if atol is None else atol
    rtol, atol = default_rtol, default_atol

    dropped, reason = None, ""
    if unreplicate == "old":
        kept, reason = _unreplicate(np, old, new, rtol, atol)
        dropped, old = ("old" if kept is not old else None), kept
    elif unreplicate == "new":
        kept, reason = _unreplicate(np, new, old, rtol, atol)
        dropped, new = ("new" if kept is not new else None), kept
    diff = LeafDiff(old.path, False, old.shape, new.shape, old.dtype, new.dtype, rtol=rtol, atol=atol,
                    unreplicated=dropped)
    if reason:
        diff.reason = reason
        return diff
    if old.dtype != new.dtype:
        diff.reason = f"dtype {old.dtype} vs {new.dtype}"
    elif old.shape != new.shape:
        diff.reason = f"shape {old.shape} vs {new.shape}" + _unreplicate_hint(old.shape, new.shape)
        # With several processes a saved leaf may be one process's part of a global array.
        notes = [f"{label}: {leaf.note}" for label, leaf in (("old", old), ("new", new))
                 if leaf.note.startswith("process-local")]
        if notes:
            diff.reason += f" ({'; '.join(notes)})"
    elif old.value is None or new.value is None:
        diff.equal = old.value is None and new.value is None and stable_form(old.note) == stable_form(new.note)
        diff.reason = "" if diff.equal else f"non-array leaves differ: {old.note!r} vs {new.note!r}"
    else:
        diff.max_abs, diff.max_rel = _errors(np, old.value, new.value)
        diff.equal = _values_equal(np, old.value, new.value, rtol, atol)
        diff.reason = "" if diff.equal else "values differ"
    return diff


def compare_outputs(
    old: Outputs, new: Outputs, *, rtol: float | None = None, atol: float | None = None,
    unreplicate: str | None = None, same_jax: bool = True,
) -> Comparison:
    """Structure first (key paths; treedef text too when both sides run the same JAX, since
    its printed form may change between versions), then every leaf present on both sides."""
    problems = []
    old_paths = [leaf.path for leaf in old.leaves]
    new_paths = [leaf.path for leaf in new.leaves]
    if old_paths != new_paths:
        missing = [p for p in old_paths if p not in new_paths]
        extra = [p for p in new_paths if p not in old_paths]
        if missing:
            problems.append(f"leaves only in old: {', '.join(missing[:8])}")
        if extra:
            problems.append(f"leaves only in new: {', '.join(extra[:8])}")
        if not missing and not extra:
            problems.append("same leaves in a different order")
    elif same_jax and stable_form(old.treedef) != stable_form(new.treedef):
        problems.append(f"tree structure {old.treedef} vs {new.treedef}")

    new_by_path = {leaf.path: leaf for leaf in new.leaves}
    diffs = [
        compare_leaf(leaf, new_by_path[leaf.path], rtol=rtol, atol=atol, unreplicate=unreplicate)
        for leaf in old.leaves if leaf.path in new_by_path
    ]
    equal = not problems and all(d.equal for d in diffs)
    return Comparison(equal=equal, structure_equal=not problems, problems=problems, leaves=diffs)
