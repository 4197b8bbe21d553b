"""hlo.py on HLO text samples dumped by jax 0.10.2 and 0.4.30, and a hand-written GPU-style one."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.runtime_checks import hlo

HLO_SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "hlo"


def _summary(name: str) -> hlo.CollectiveSummary:
    return hlo.summarize_modules([(name, (HLO_SAMPLES / name).read_text())])


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        # psum of an f32[] per device: one 4-byte all-reduce, printed with % names (0.10.2) ...
        pytest.param("jax0102_pmap_psum.txt", {"all-reduce": (1, 4)}, id="0.10.2 pmap psum"),
        # ... and without them (0.4.30).
        pytest.param("jax0430_pmap_psum.txt", {"all-reduce": (1, 4)}, id="0.4.30 pmap psum"),
        pytest.param("jax0430_gspmd_reduce_sum.txt", {"all-reduce": (1, 8)}, id="0.4.30 GSPMD sum f32[2]"),
        pytest.param("jax0102_gspmd_reduce_sum_mesh_groups.txt", {"all-reduce": (1, 8)},
                     id="0.10.2 GSPMD sum, mesh-style replica groups"),
        # shard_map on f32[1,2] per device: gather to [8,1,2], scatter [8,2] -> [1,2], permute [1,2],
        # all-to-all over a tuple of eight [1,2]: 64, 64, 8, 64 bytes.
        pytest.param("jax0102_shard_map_all_kinds.txt",
                     {"all-gather": (1, 64), "reduce-scatter": (1, 64), "collective-permute": (1, 8),
                      "all-to-all": (1, 64)}, id="0.10.2 all five kinds but all-reduce"),
        # async -start ops counted under their kind (the -done halves not at all), the async-wrapped
        # all-to-all found in its computation, the while-body all-reduce counted once.
        pytest.param("gpu_style_async_collectives.txt",
                     {"all-reduce": (2, 1024 * 512 * 2 + 64 * 4), "all-gather": (1, 512 * 4),
                      "collective-permute": (1, 16 * 4), "all-to-all": (1, 8 * 8 * 4), "reduce-scatter": (1, 64 * 4)},
                     id="GPU-style async pairs"),
    ],
)
def test_counts_and_bytes_per_kind(sample: str, expected: dict[str, tuple[int, int]]) -> None:
    summary = _summary(sample)
    got = {kind: (t.count, t.bytes) for kind, t in summary.totals.items()}
    assert got == expected


def test_replica_groups_kept_as_printed_and_parsed() -> None:
    ops = {op.name: op for op in _summary("gpu_style_async_collectives.txt").ops}
    assert ops["all-reduce-start"].is_async
    assert hlo.parse_groups(ops["all-reduce-start"].groups) == [list(range(8))]
    assert hlo.parse_groups(ops["all-to-all.1"].groups) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert hlo.parse_groups(ops["loop-ar"].groups) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert ops["loop-ar"].computation == "body"
    assert hlo.parse_groups(ops["collective-permute-start"].groups) == [[0, 1], [1, 0], [2, 3], [3, 2]]
    mesh_style = _summary("jax0102_gspmd_reduce_sum_mesh_groups.txt").ops[0].groups
    assert mesh_style.startswith("mesh[") and hlo.parse_groups(mesh_style) is None


@pytest.mark.parametrize(
    ("shape", "nbytes"),
    [
        pytest.param("bf16[3,5]{1,0}", 30, id="bf16"),
        pytest.param("pred[7]", 7, id="pred is a byte"),
        pytest.param("s4[3]", 2, id="int4 packed, rounded up"),
        pytest.param("(f32[2], c64[1], f8e4m3fn[4])", 8 + 8 + 4, id="tuple of mixed types"),
        pytest.param("f32[<=6]", 24, id="dynamic dim uses its bound"),
        pytest.param("f32[]", 4, id="scalar"),
    ],
)
def test_shape_bytes(shape: str, nbytes: int) -> None:
    assert hlo.shape_bytes(shape) == nbytes


def test_non_collective_module_has_none() -> None:
    text = "HloModule m\n\nENTRY %main (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4]{0} parameter(0)\n}\n"
    assert hlo.parse_collectives(text) == []
