"""JM402 / JM507 / JM508 shown by real runs: each `fixtures/runtime/sharp_<case>/program.py` below
runs in a fresh interpreter on forced CPU devices and prints one JSON object of facts; the tests
assert those facts and that the rule's docs quote the same error text."""

from __future__ import annotations


import pytest

from jaxmigrate.lint.registry import rule_by_code
from jaxmigrate.lint.rules.host_local_batch_device_put import ERROR as JM509_ERROR

pytestmark = [pytest.mark.runtime, pytest.mark.xdist_group("sharp_facts")]  # (one run of the programs)

PROGRAMS = ("sharp_partition_spec_without_mesh", "sharp_collective_under_jit", "sharp_local_device_mesh")


def test_these_programs_ran(sharp_facts):
    assert set(PROGRAMS) <= set(sharp_facts)


def docs(code: str) -> str:
    return " ".join(rule_by_code(code).explanation().split())


WSC_ERROR = ("RuntimeError: with_sharding_constraint requires a non-empty mesh in context if you are passing"
             " `PartitionSpec`s to shardings. You can define a context mesh via `jax.set_mesh(mesh)`.")


@pytest.mark.parametrize(
    "key, expected",
    [
        pytest.param("wsc", WSC_ERROR, id="with_sharding_constraint"),
        pytest.param("jit_in", "RuntimeError: jit requires a non-empty mesh in context if you are passing"
                     " `PartitionSpec`s to in_shardings.", id="jit in_shardings (a tuple of specs)"),
        pytest.param("jit_out", "RuntimeError: jit requires a non-empty mesh in context if you are passing"
                     " `PartitionSpec`s to out_shardings.", id="jit out_shardings"),
        pytest.param("device_put", "ValueError: Please set a mesh via `jax.set_mesh` if a PartitionSpec is"
                     " passed to device_put", id="device_put"),
        pytest.param("with_mesh_jit_in", "RuntimeError: jit requires a non-empty mesh in context",
                     id="legacy `with mesh:` is not enough for jit"),
        pytest.param("with_mesh_jit_out", "RuntimeError: jit requires a non-empty mesh in context",
                     id="legacy `with mesh:` is not enough for jit out_shardings"),
        pytest.param("with_mesh_device_put", "ValueError: Please set a mesh via `jax.set_mesh` if a PartitionSpec is"
                     " passed to device_put", id="legacy `with mesh:` is not enough for device_put"),
    ],
)
def test_partition_spec_without_mesh_errors(sharp_facts, key, expected):
    error = sharp_facts["sharp_partition_spec_without_mesh"][key]
    assert error is not None and error.startswith(expected), error
    # The docs quote the in_shardings text and say out_shardings is the same.
    assert expected.split(" You can")[0].replace("out_shardings", "in_shardings") in docs("JM507")
    assert "(the same for `out_shardings`)" in docs("JM507")


def test_partition_spec_with_a_mesh_works(sharp_facts):
    case = sharp_facts["sharp_partition_spec_without_mesh"]
    ok = ("named_sharding", "set_mesh_wsc", "set_mesh_jit_in", "set_mesh_device_put", "with_mesh_wsc")
    assert {key: case[key] for key in ok} == dict.fromkeys(ok)


@pytest.mark.parametrize(
    "key, expected",
    [
        pytest.param("pmean", "NameError: Found an unbound axis name: data. To fix this, please call psum under"
                     " `jax.shard_map`.", id="pmean under @jax.jit"),
        pytest.param("pmean_set_mesh", "NameError: Found an unbound axis name: data. To fix this, please call"
                     " psum under `jax.shard_map`.", id="pmean under @jax.jit inside jax.set_mesh"),
        pytest.param("axis_index", "NameError: Found an unbound axis name: data. To fix this, please call"
                     " axis_index under `jax.shard_map`.", id="axis_index"),
        pytest.param("all_gather", "NameError: unbound axis name: data", id="all_gather"),
    ],
)
def test_mesh_axis_collective_under_jit_errors(sharp_facts, key, expected):
    assert sharp_facts["sharp_collective_under_jit"][key] == expected
    assert expected.replace("psum", "").replace("axis_index", "")[:40] in docs("JM402")


def test_mesh_axis_collective_under_shard_map_works(sharp_facts):
    case = sharp_facts["sharp_collective_under_jit"]
    assert case["under_shard_map"] is None
    assert case["under_shard_map_value"] == [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5]
    assert "NameError: Found an unbound axis name: data. To fix this, please call psum under" in docs("JM402")


def test_local_device_mesh_is_per_process(sharp_facts):
    first, second = sharp_facts["sharp_local_device_mesh"]["processes"]
    assert [first["process_index"], second["process_index"]] == [0, 1]
    assert first["device_count"] == 8 and first["local_device_count"] == 4
    # The same program, a different "global" mean on each process: nothing crossed processes.
    assert (first["local_mesh_mean"], second["local_mesh_mean"]) == (3.5, 103.5)
    # Over jax.devices() with make_array_from_process_local_data: one global batch and mean.
    assert first["global_shape"] == second["global_shape"] == [16]
    assert first["global_mesh_mean"] == second["global_mesh_mean"] == 53.5
    # pmap over local devices is global: why pmap code counts local devices and meshes must not.
    assert first["pmap_psum"] == second["pmap_psum"] == [8.0] * 4
    assert first["make_mesh_local_count_process_indices"] == second["make_mesh_local_count_process_indices"] == [0]
    text = docs("JM508")
    assert "3.5 on process 0 and 103.5 on process 1" in text and "53.5" in text


def test_local_batch_device_put_to_global_sharding_fails(sharp_facts):
    expected = "AssertionError: <class 'numpy.ndarray'> passed to device_put is not the same on each process."
    for process in sharp_facts["sharp_local_device_mesh"]["processes"]:
        assert process["device_put_local_batch_to_global"].startswith(expected)
    assert expected in docs("JM508") and expected in docs("JM509")
    assert JM509_ERROR == expected  # what JM509's message quotes
