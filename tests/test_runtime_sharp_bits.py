"""The sharp bits the JM4xx/JM5xx rules explain, shown by real runs on 8 forced CPU devices.

Each `fixtures/runtime/sharp_*/program.py` prints one JSON object of facts; the tests assert
those facts and that the rule's docs quote the same error text, so an explanation that drifts
from what JAX really does fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.lint.registry import rule_by_code

pytestmark = [pytest.mark.runtime, pytest.mark.xdist_group("sharp_facts")]  # (one run of the programs)

PROGRAMS = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "runtime").glob("sharp_*/program.py"))


def test_every_program_ran(sharp_facts):
    assert set(sharp_facts) == {p.parent.name for p in PROGRAMS} and len(sharp_facts) >= 6


def test_committed_device_mismatch(sharp_facts):
    case = sharp_facts["sharp_committed_devices"]
    for key in ("two_devices_add", "device_vs_mesh_jit"):
        assert case[key].startswith("ValueError: Received incompatible devices for jitted computation."), case[key]
    assert "device ids [0, 1, 2, 3, 4, 5, 6, 7]" in case["device_vs_mesh_jit"]
    assert case["uncommitted_ok"] is None and case["same_device_ok"] is None
    docs = " ".join(rule_by_code("JM501").explanation().split())
    assert "ValueError: Received incompatible devices for jitted computation. Got argument x of add" in docs


def test_non_partitionable_rng(sharp_facts):
    case = sharp_facts["sharp_rng"]
    assert case["default_partitionable"] is True  # the 0.10 default the rule's version clause uses
    assert case["collective_permute_false"] is True and case["collective_permute_default"] is False
    assert case["values_differ"] is True
    docs = rule_by_code("JM502").explanation()
    for values in (case["first_false"], case["first_default"]):
        assert f"{values[0]:.3f}" in docs and f"{values[1]:.3f}" in docs


def test_per_device_keys(sharp_facts):
    case = sharp_facts["sharp_rng"]
    assert case["per_device_vs_global_differ"] is True
    assert case["per_device_equals_vmap"] is True  # the "Use instead" that keeps the streams


def test_mesh_axis_types(sharp_facts):
    case = sharp_facts["sharp_mesh_axis_types"]
    assert case["default_axis_types"] == ["AxisType.Explicit"]
    assert case["roll_auto_mesh"] is None
    error = case["roll_default_mesh"]
    assert error.startswith("ShardingTypeError: slicing on sharded dims where out dim (1) is not divisible")
    docs = " ".join(rule_by_code("JM506").explanation().split())
    assert error.split(". Got input")[0] in docs


def test_unbound_collective_axis(sharp_facts):
    case = sharp_facts["sharp_unbound_axis"]
    assert case["psum"] == (
        "NameError: Found an unbound axis name: batch. To fix this, please call psum under `jax.shard_map`."
    )
    assert case["axis_index"].startswith("NameError: Found an unbound axis name: i.")
    assert case["bound_by_pmap"] is None
    docs = " ".join(rule_by_code("JM401").explanation().split())
    assert "NameError: Found an unbound axis name: batch. To fix this, please call psum under" in docs


def test_partition_spec_axis_names(sharp_facts):
    from jaxmigrate.lint.checker import lint_text

    case = sharp_facts["sharp_unbound_axis"]
    assert case["spec_named_sharding"] == "ValueError: Resource axis: batch of P('batch',) is not found in mesh: ('data',)."
    assert case["spec_nested"].startswith("ValueError: Resource axis: model of P(None, ('data', 'model')) is not found")
    for side in ("in", "out"):
        assert case[f"spec_shard_map_{side}"].startswith(
            f"ValueError: shard_map {side}_specs argument must refer to an axis marked as manual"
        ), case[f"spec_shard_map_{side}"]
    assert case["spec_fits"] is None
    # The findings quote what JAX said, up to the part that names the (module's) mesh.
    source = (
        "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n"
        "mesh = jax.make_mesh((8,), ('data',))\n"
        "a = NamedSharding(mesh, P(None, ('data', 'model')))\n"
        "f = jax.shard_map(g, mesh=mesh, in_specs=P('batch'), out_specs=P('batch'))\n"
    )
    messages = [f.message for f in lint_text(source, "t.py", (rule_by_code("JM401"),), (0, 10))]
    assert len(messages) == 3
    assert case["spec_nested"].split(" is not found in mesh")[0] in messages[0]
    assert case["spec_shard_map_in"].split(" (frozenset")[0] in messages[1]
    assert case["spec_shard_map_out"].split(" (frozenset")[0] in messages[2]
    docs = " ".join(rule_by_code("JM401").explanation().split())
    assert case["spec_named_sharding"] in docs


def test_pmap_output_indexing(sharp_facts):
    case = sharp_facts["sharp_pmap_output_indexing"]
    assert case["pmap_indexed"] == case["jit_value"] == [0.0, 2.0, 4.0, 6.0]
    assert case["jit_indexed"] == 0.0  # same expression, silently a scalar once the producer is jit


def test_device_count_reshape(sharp_facts):
    case = sharp_facts["sharp_device_count_reshape"]
    assert case["reshaped_input_shape"] == [8, 2, 2]
    assert case["global_result_shape"] == [2] and case["reshaped_result_shape"] == [2, 2]
