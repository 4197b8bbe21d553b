"""JM402 / JM507 / JM508 beyond their own VALID/INVALID examples: messages that quote the real
run-time error, near misses, and how JM402 and JM401 split the unbound-axis cases."""

from __future__ import annotations

import textwrap

import pytest

from jaxmigrate.lint.checker import lint_text
from jaxmigrate.lint.rules.local_device_mesh import LocalDeviceMesh
from jaxmigrate.lint.rules.mesh_axis_collective_under_jit import MeshAxisCollectiveUnderJit
from jaxmigrate.lint.rules.partition_spec_without_mesh import PartitionSpecWithoutMesh
from jaxmigrate.lint.rules.unbound_collective_axis import UnboundCollectiveAxis

MORE = (MeshAxisCollectiveUnderJit, PartitionSpecWithoutMesh, LocalDeviceMesh)


def lint(rules, code: str):
    return lint_text(textwrap.dedent(code).lstrip("\n"), "t.py", rules, (0, 10))


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.code) for r in MORE])
def test_documents_confidence_and_prefilter_passes_invalid_examples(rule):
    assert rule.code[:3] in ("JM4", "JM5") and "## Confidence" in rule.explanation()
    for example in rule.INVALID:
        assert lint_text(example.code, "t.py", (rule,), (0, 10)), example.code


MESH = 'import jax\nfrom jax import lax\nfrom jax.sharding import PartitionSpec as P\nmesh = jax.make_mesh((8,), ("data",))\n'


@pytest.mark.parametrize(
    "code, codes",
    [
        pytest.param(MESH + 'f = jax.jit(lambda v: lax.psum(v, "data"))\n', ["JM402"], id="mesh axis: JM402 only"),
        pytest.param(MESH + 'f = jax.jit(lambda v: lax.psum(v, "batch"))\n', ["JM401"], id="undefined axis: JM401 only"),
        pytest.param(MESH + 'f = jax.pmap(lambda v: lax.psum(v, "data"), axis_name="data")\n', [],
                     id="bound by pmap: neither"),
    ],
)
def test_jm402_and_jm401_split_the_cases(code, codes):
    found = lint((MeshAxisCollectiveUnderJit, UnboundCollectiveAxis), code)
    assert [f.code for f in found] == codes


def test_jm402_message_quotes_error_and_points_at_the_jit():
    (finding,) = lint((MeshAxisCollectiveUnderJit,), MESH + "def f(x):\n    return lax.pmean(x, 'data')\ng = jax.jit(f)\n")
    assert "NameError: Found an unbound axis name: data" in finding.message
    assert "(line 7)" in finding.message and "shard_map" in finding.message
    assert (finding.line, finding.column) == (6, 12)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("@jax.jit\ndef f(x):\n    return lax.psum(x, 'data')\ng = jax.shard_map(f, mesh=mesh, in_specs=P(), out_specs=P())\n",
                     id="shard_map anywhere in the module"),
        pytest.param("from jax.experimental.shard_map import shard_map as sm\n@jax.jit\ndef f(x):\n    return lax.psum(x, 'data')\n",
                     id="shard_map imported under an alias"),
        pytest.param("@jax.jit\ndef f(x):\n    return lax.psum(x, 'data')\ng = jax.vmap(f, axis_name=AXIS)\n",
                     id="computed axis_name may bind it"),
        pytest.param("@jax.jit\n@other\ndef f(x):\n    return lax.psum(x, 'data')\n", id="another decorator"),
        pytest.param("@jax.jit\ndef f(x):\n    def inner(y):\n        return lax.psum(y, 'data')\n    return inner\n",
                     id="collective in a nested def, not in the jitted body"),
        pytest.param("def psum(x, a):\n    return x\nf = jax.jit(lambda v: psum(v, 'data'))\n", id="a local psum"),
    ],
)
def test_jm402_near_misses(tail):
    assert lint((MeshAxisCollectiveUnderJit,), MESH + tail) == []


@pytest.mark.parametrize(
    "call, error",
    [
        pytest.param("jax.lax.with_sharding_constraint(x, P('data'))",
                     "RuntimeError: with_sharding_constraint requires a non-empty mesh in context", id="wsc"),
        pytest.param("jax.jit(f, out_shardings=P())",
                     "RuntimeError: jit requires a non-empty mesh in context if you are passing `PartitionSpec`s to"
                     " out_shardings", id="jit out_shardings"),
        pytest.param("jax.device_put(x, device=P('data'))",
                     "ValueError: Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to device_put",
                     id="device_put keyword"),
    ],
)
def test_jm507_message_quotes_the_error_of_each_api(call, error):
    (finding,) = lint((PartitionSpecWithoutMesh,), MESH + f"y = {call}\n")
    assert error in finding.message and "NamedSharding(mesh, spec)" in finding.message


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("with mesh:\n    y = lax.with_sharding_constraint(x, P('data'))\n",
                     id="legacy with mesh: enough for with_sharding_constraint"),
        pytest.param("with mesh:\n    pass\nwith jax.set_mesh(mesh):\n    y = jax.jit(f, in_shardings=P('data'))(x)\n",
                     id="legacy with mesh, and set_mesh too"),
        pytest.param("jax.set_mesh(mesh)\ny = jax.device_put(x, P('data'))\n", id="global set_mesh"),
        pytest.param("with self.mesh, open(p):\n    pass\ny = jax.device_put(x, P('data'))\n", id="with an attribute"),
        pytest.param("y = jax.device_put(x, SPECS)\n", id="computed sharding"),
        pytest.param("y = jax.jit(f, in_shardings=None, out_shardings=(None,))\n", id="no spec at all"),
        pytest.param("y = jax.jit(f, **kw)\n", id="unpacked keywords"),
    ],
)
def test_jm507_near_misses(tail):
    assert lint((PartitionSpecWithoutMesh,), MESH + tail) == []


@pytest.mark.parametrize(
    "tail, error",
    [
        pytest.param("with mesh:\n    y = jax.jit(f, in_shardings=P('data'))(x)\n",
                     "RuntimeError: jit requires a non-empty mesh in context if you are passing `PartitionSpec`s to"
                     " in_shardings", id="jit in_shardings"),
        pytest.param("m2 = mesh\nwith m2:\n    y = jax.device_put(x, P('data'))\n",
                     "ValueError: Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to device_put",
                     id="device_put, the mesh through a second name"),
    ],
)
def test_jm507_legacy_with_mesh_does_not_cover_jit_or_device_put(tail, error):
    # Checked on jax 0.10.2 (fixtures/runtime/sharp_partition_spec_without_mesh): a legacy
    # `with mesh:` serves with_sharding_constraint only; jit's shardings and device_put raise.
    (finding,) = lint((PartitionSpecWithoutMesh,), MESH + tail)
    assert error in finding.message and "legacy `with mesh:`" in finding.message


def test_jm507_ignores_known_non_mesh_contexts():
    code = MESH + "import contextlib\nwith contextlib.suppress(KeyError), jax.named_scope('s'), open(p):\n" \
        "    y = jax.device_put(x, P('data'))\n"
    (finding,) = lint((PartitionSpecWithoutMesh,), code)
    assert finding.line == 7


LOCAL = "import jax\nimport numpy as np\nfrom jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"


@pytest.mark.parametrize(
    "tail, expected",
    [
        pytest.param("m = Mesh(jax.local_devices(), ('d',))\ns = NamedSharding(m, P('d'))\n", 1, id="NamedSharding"),
        pytest.param("m = Mesh(jax.local_devices(), ('d',))\nwith m:\n    pass\n", 1, id="with mesh"),
        pytest.param("m = jax.make_mesh((jax.local_device_count(),), ('d',))\n"
                     "f = jax.shard_map(g, mesh=m, in_specs=P('d'), out_specs=P())\n", 1, id="shard_map mesh="),
        pytest.param("m = Mesh(jax.local_devices(), ('d',))\nprint(m)\n", 0, id="mesh not used for sharding"),
        pytest.param("m = jax.make_mesh((2 * jax.local_device_count(),), ('d',))\ns = NamedSharding(m, P())\n", 0,
                     id="computed size"),
        pytest.param("m = Mesh(np.array([d for d in jax.devices() if d in jax.local_devices()]), ('d',))\n"
                     "s = NamedSharding(m, P())\n", 0, id="reads jax.devices() too"),
        pytest.param("m = Mesh(jax.local_devices(), ('d',))\nif c:\n    m = Mesh(jax.devices(), ('d',))\n"
                     "s = NamedSharding(m, P())\n", 0, id="name bound twice"),
    ],
)
def test_jm508_uses_and_near_misses(tail, expected):
    findings = lint((LocalDeviceMesh,), LOCAL + tail)
    assert len(findings) == expected
    if expected:
        assert "jax.make_array_from_process_local_data" in findings[0].message and findings[0].line == 4
