"""compare.py: structure, dtype/shape, tolerances by dtype, unreplicate."""

from __future__ import annotations

import numpy as np
import pytest

from jaxmigrate.runtime_checks.compare import Leaf, Outputs, compare_leaf, compare_outputs, default_tolerance


def leaf(path: str, value: np.ndarray, dtype: str | None = None) -> Leaf:
    return Leaf(path, dtype or str(value.dtype), tuple(value.shape), value)


def test_float32_within_default_tolerance_is_equal() -> None:
    a = np.linspace(0, 1, 10, dtype=np.float32)
    assert compare_leaf(leaf("x", a), leaf("x", a * (1 + 1e-7))).equal
    far = compare_leaf(leaf("x", a), leaf("x", a + 1e-3))
    assert not far.equal and far.reason == "values differ"
    assert far.max_abs == pytest.approx(1e-3, rel=1e-3)


def test_ints_and_bools_are_exact() -> None:
    assert default_tolerance("int32") == (0.0, 0.0) and default_tolerance("bool") == (0.0, 0.0)
    a = np.arange(5, dtype=np.int32)
    assert not compare_leaf(leaf("k", a), leaf("k", a + np.array([0, 0, 0, 0, 1], np.int32)), rtol=1, atol=1).equal
    assert not compare_leaf(leaf("b", a > 2), leaf("b", a > 1)).equal


def test_bfloat16_saved_as_float32_uses_bfloat16_tolerance() -> None:
    a = np.array([1.0, 2.0], np.float32)
    assert compare_leaf(leaf("l", a, "bfloat16"), leaf("l", a + 5e-3, "bfloat16")).equal
    assert not compare_leaf(leaf("l", a, "float32"), leaf("l", a + 5e-3, "float32")).equal


def test_dtype_and_shape_mismatch_named_with_unreplicate_hint() -> None:
    a = np.ones((2,), np.float32)
    assert "dtype float32 vs float64" in compare_leaf(leaf("x", a), leaf("x", a.astype(np.float64))).reason
    reason = compare_leaf(leaf("x", np.ones((8, 2), np.float32)), leaf("x", a)).reason
    assert "shape (8, 2) vs (2,)" in reason and "unreplicate='old'" in reason


def test_nan_in_same_place_is_equal_but_one_sided_nan_is_not() -> None:
    a = np.array([1.0, np.nan], np.float32)
    assert compare_leaf(leaf("x", a), leaf("x", a.copy())).equal
    one_sided = compare_leaf(leaf("x", np.array([1.0, 2.0], np.float32)), leaf("x", a))
    assert not one_sided.equal and one_sided.max_abs == float("inf")


def test_unreplicate_drops_equal_device_slices_only() -> None:
    glob = np.arange(3, dtype=np.float32)
    replicated = np.stack([glob] * 8)
    dropped = compare_leaf(leaf("p", replicated), leaf("p", glob), unreplicate="old")
    assert dropped.equal and dropped.unreplicated == "old" and dropped.old_shape == (3,)
    skewed = replicated.copy()
    skewed[5, 0] += 1
    bad = compare_leaf(leaf("p", skewed), leaf("p", glob), unreplicate="old")
    assert not bad.equal and "slice 5" in bad.reason
    assert compare_leaf(leaf("p", glob), leaf("p", replicated), unreplicate="new").equal
    # A leaf that already matches is left alone.
    same = compare_leaf(leaf("q", glob), leaf("q", glob), unreplicate="old")
    assert same.equal and same.unreplicated is None


@pytest.mark.parametrize("side", ["old", "new"])
def test_unreplicate_leaves_scalars_alone(side) -> None:
    # A scalar on both sides has no leading axis to drop (it used to raise IndexError).
    loss = np.float32(0.25)
    same = compare_leaf(leaf("loss", np.asarray(loss)), leaf("loss", np.asarray(loss)), unreplicate=side)
    assert same.equal and same.unreplicated is None
    other = compare_leaf(leaf("loss", np.asarray(loss)), leaf("loss", np.asarray(loss + 1)), unreplicate=side)
    assert not other.equal and other.reason == "values differ"


def test_structure_mismatch_lists_missing_and_extra_leaves() -> None:
    a = np.zeros(2, np.float32)
    old = Outputs("T", [leaf("['a']", a), leaf("['b']", a)])
    new = Outputs("T", [leaf("['a']", a), leaf("['c']", a)])
    result = compare_outputs(old, new)
    assert not result.equal and not result.structure_equal
    assert result.problems == ["leaves only in old: ['b']", "leaves only in new: ['c']"]
    assert [d.path for d in result.leaves] == ["['a']"]


def test_treedef_text_compared_only_within_one_jax_version() -> None:
    a = np.zeros(2, np.float32)
    old, new = Outputs("PyTreeDef([*])", [leaf("[0]", a)]), Outputs("PyTreeDef((*,))", [leaf("[0]", a)])
    assert not compare_outputs(old, new, same_jax=True).equal
    assert compare_outputs(old, new, same_jax=False).equal


def test_worst_orders_by_distance_outside_tolerance() -> None:
    a = np.zeros(3, np.float32)
    old = Outputs("T", [leaf("x", a), leaf("y", a), leaf("z", a)])
    new = Outputs("T", [leaf("x", a + 1e-3), leaf("y", a + 1.0), leaf("z", a)])
    assert [d.path for d in compare_outputs(old, new).worst()] == ["y", "x"]


def test_a_difference_where_old_is_zero_is_an_infinite_relative_error_without_a_warning():
    import warnings

    import numpy as np

    from jaxmigrate.runtime_checks.compare import _errors

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _errors(np, np.array([0.0, 1.0]), np.array([5.0, 1.0])) == (5.0, float("inf"))


@pytest.mark.parametrize(
    ("old", "new", "rtol", "atol", "equal"),
    [
        # |new - old| <= atol + rtol * |old|: each case flips when rtol and atol are swapped.
        pytest.param(1000.0, 1000.005, None, None, True, id="float32 default: relative part at 1e3"),
        pytest.param(0.0, 5e-6, None, None, False, id="float32 default: absolute part at zero"),
        pytest.param(100.0, 105.0, 0.1, 0.0, True, id="given rtol only"),
        pytest.param(0.0, 0.05, 0.0, 0.1, True, id="given atol only"),
        pytest.param(100.0, 105.0, 0.0, 0.1, False, id="given atol is not relative"),
    ],
)
def test_rtol_scales_with_the_old_value_and_atol_does_not(old, new, rtol, atol, equal) -> None:
    a, b = np.array([old], np.float32), np.array([new], np.float32)
    diff = compare_leaf(leaf("x", a), leaf("x", b), rtol=rtol, atol=atol)
    assert diff.equal is equal
    expected = default_tolerance("float32") if rtol is None else (rtol, atol)
    assert (diff.rtol, diff.atol) == expected


def test_non_array_leaves_compare_by_their_printed_form_without_memory_addresses() -> None:
    # Identical programs returning an object print it with each process's own address.
    old = Leaf("<root>", "Config", None, None, "<__main__.Config object at 0x7f3a12c4be50>")
    same = Leaf("<root>", "Config", None, None, "<__main__.Config object at 0x7fd0a4e11b90>")
    other = Leaf("<root>", "Config", None, None, "<__main__.Other object at 0x7fd0a4e11b90>")
    assert compare_leaf(old, same).equal
    assert not compare_leaf(old, other).equal
    tree = "PyTreeDef(CustomNode(Box[<function f at 0x7f01>], [*]))"
    moved = tree.replace("0x7f01", "0x7e99")
    assert compare_outputs(Outputs(tree, [old]), Outputs(moved, [same])).equal
