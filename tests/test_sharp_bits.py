"""The sharp-bit rules (JM4xx/JM5xx) beyond their own VALID/INVALID examples: target-version
clauses, messages that quote the real run-time error, fixes and their idempotence."""

from __future__ import annotations

import textwrap

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.rules.committed_device_mismatch import CommittedDeviceMismatch
from jaxmigrate.lint.rules.device_count_reshape import DeviceCountReshape
from jaxmigrate.lint.rules.mesh_implicit_axis_types import MeshImplicitAxisTypes
from jaxmigrate.lint.rules.non_partitionable_rng import NonPartitionableRng
from jaxmigrate.lint.rules.per_device_rng_keys import PerDeviceRngKeys
from jaxmigrate.lint.rules.pmap_output_indexing import PmapOutputIndexing
from jaxmigrate.lint.rules.unbound_collective_axis import UnboundCollectiveAxis

SHARP = (CommittedDeviceMismatch, NonPartitionableRng, PerDeviceRngKeys, DeviceCountReshape,
         PmapOutputIndexing, MeshImplicitAxisTypes, UnboundCollectiveAxis)


def lint(rule, code: str, target=(0, 10)):
    return lint_text(textwrap.dedent(code).lstrip("\n"), "t.py", (rule,), target)


SAMPLING_UNDER_JIT = textwrap.dedent("""
    import jax
    from jax.sharding import NamedSharding

    mesh = jax.make_mesh((8,), ("data",))

    @jax.jit
    def f(key, x):
        return x + jax.random.uniform(key, x.shape)
""")


@pytest.mark.parametrize(
    "target, expected",
    [
        pytest.param((0, 4), 1, id="target 0.4: non-partitionable default, reported"),
        pytest.param((0, 5), 0, id="target 0.5: partitionable default, silent"),
    ],
)
def test_rng_sampling_clause_follows_target(target, expected):
    findings = lint(NonPartitionableRng, SAMPLING_UNDER_JIT, target)
    assert len(findings) == expected
    if expected:
        assert "collective-permute" in findings[0].message and findings[0].line == 8


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(SAMPLING_UNDER_JIT.replace('mesh = jax.make_mesh((8,), ("data",))', ""),
                     id="no mesh or sharding built in the module"),
        pytest.param(SAMPLING_UNDER_JIT + '\njax.config.update("jax_threefry_partitionable", True)\n',
                     id="module sets the flag itself"),
        pytest.param(SAMPLING_UNDER_JIT.replace("@jax.jit\n", ""), id="not jitted"),
        pytest.param(SAMPLING_UNDER_JIT.replace("jax.random.uniform(key, x.shape)", "jax.random.split(key)[0]"),
                     id="split is not sampling"),
    ],
)
def test_rng_sampling_clause_near_misses_at_old_target(code):
    assert lint(NonPartitionableRng, code, (0, 4)) == []


@pytest.mark.parametrize(
    "target, expected",
    [
        pytest.param((0, 8), 0, id="target 0.8: Auto default, silent"),
        pytest.param((0, 9), 1, id="target 0.9: Explicit default, reported"),
    ],
)
def test_mesh_axis_types_follows_target(target, expected):
    assert len(lint(MeshImplicitAxisTypes, "import jax\nm = jax.make_mesh((8,), ('d',))\n", target)) == expected


@pytest.mark.parametrize(
    "code, expected",
    [
        pytest.param("import jax\nm = jax.make_mesh((8,), ('d',))\n",
                     "import jax\nm = jax.make_mesh((8,), ('d',), axis_types=(jax.sharding.AxisType.Auto,))\n",
                     id="one axis"),
        pytest.param("import jax as J\nm = J.make_mesh(\n    (2, 4),\n    ('a', 'b'),  # axes\n)\n",
                     "import jax as J\nm = J.make_mesh(\n    (2, 4),\n    ('a', 'b'), axis_types=(J.sharding.AxisType.Auto,) * 2,  # axes\n)\n",
                     id="alias kept, trailing comma and comment kept"),
        pytest.param("import jax\nm = jax.make_mesh(axis_names=('a', 'b'), axis_shapes=s)\n",
                     "import jax\nm = jax.make_mesh(axis_names=('a', 'b'), axis_shapes=s, axis_types=(jax.sharding.AxisType.Auto,) * 2)\n",
                     id="keywords, count from the names"),
    ],
)
def test_mesh_axis_types_fix_is_idempotent(code, expected):
    first = fix_text(code, "t.py", (MeshImplicitAxisTypes,), (0, 10), from_jax=(0, 4))
    assert first.text == expected and first.fixed == 1
    second = fix_text(first.text, "t.py", (MeshImplicitAxisTypes,), (0, 10), from_jax=(0, 4))
    assert second.text == expected and second.fixed == 0 and second.findings == []


MESH = "import jax\nm = jax.make_mesh((8,), ('d',))\n"


@pytest.mark.parametrize(
    "from_jax, reported, safety",
    [
        pytest.param((0, 4), True, "safe", id="written for 0.4: Auto is what it meant, safe fix"),
        pytest.param((0, 8), True, "safe", id="written for 0.8: still Auto"),
        pytest.param((0, 9), False, None, id="written for 0.9: Explicit is the intended default"),
        pytest.param((0, 10), False, None, id="written for 0.10: modern code, never nagged"),
        pytest.param(None, True, "unsafe", id="not known: reported, the fix is unsafe"),
    ],
)
def test_mesh_axis_types_fires_only_for_code_written_before_0_9(from_jax, reported, safety):
    findings = lint_text(MESH, "t.py", (MeshImplicitAxisTypes,), (0, 10), from_jax)
    assert bool(findings) == reported
    if reported:
        (finding,) = findings
        assert finding.fix.safety.value == safety
        # Only the unknown case tells how to say which JAX the code was written for.
        assert ("`from-jax`" in finding.message) == (from_jax is None)


def test_mesh_axis_types_unknown_origin_is_not_fixed_by_safe_fixes():
    assert fix_text(MESH, "t.py", (MeshImplicitAxisTypes,), (0, 10)).text == MESH
    fixed = fix_text(MESH, "t.py", (MeshImplicitAxisTypes,), (0, 10), unsafe=True)
    assert "axis_types=(jax.sharding.AxisType.Auto,)" in fixed.text


def test_mesh_axis_types_no_fix_without_module_alias_or_count():
    for code in ("from jax import make_mesh\nm = make_mesh((8,), ('d',))\n",
                 "import jax\nm = jax.make_mesh(shape, names)\n"):
        (finding,) = lint(MeshImplicitAxisTypes, code)
        assert finding.fix is None


def test_committed_mismatch_message_names_both_placements_and_the_error():
    (finding,) = lint(CommittedDeviceMismatch, """
        import jax
        a = jax.device_put(1.0, jax.devices()[0])
        b = jax.device_put(2.0, jax.devices()[1])
        c = jax.numpy.add(a, b)
    """)
    assert "`jax.devices()[0]`" in finding.message and "`jax.devices()[1]`" in finding.message
    assert "Received incompatible devices for jitted computation" in finding.message
    assert (finding.line, finding.column) == (4, 5)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("a = jax.device_put(x, jax.devices()[0])\nb = jax.device_put(x, jax.local_devices()[1])\nc = a + b\n",
                     id="devices() vs local_devices() indices are not compared"),
        pytest.param("a = jax.device_put(x, jax.devices()[i])\nb = jax.device_put(x, jax.devices()[1])\nc = a + b\n",
                     id="computed index"),
        pytest.param("a = jax.device_put(x, jax.devices()[0])\nb = jax.device_put(x, jax.devices()[1])\na, b = b, a\nc = a + b\n",
                     id="tuple rebinding forgets"),
        pytest.param("a = jax.device_put(x, jax.devices()[0])\nc = a + jax.device_put(x)\n",
                     id="device_put without a device is uncommitted"),
    ],
)
def test_committed_mismatch_near_misses(code):
    assert lint(CommittedDeviceMismatch, "import jax\n" + code) == []


def test_committed_mismatch_order_matters():
    code = """
        import jax
        a = jax.device_put(1.0, jax.devices()[0])
        c = a + b
        b = jax.device_put(2.0, jax.devices()[1])
    """
    assert lint(CommittedDeviceMismatch, code) == []


@pytest.mark.parametrize(
    "code, line",
    [
        pytest.param("""
            import jax
            def outer():
                a = jax.device_put(1.0, jax.devices()[0])
                def inner():
                    return jax.device_put(2.0, jax.devices()[1])
                b = jax.device_put(2.0, jax.devices()[1])
                return a + b
            """, 7, id="two puts in the outer scope, one in a nested def"),
        pytest.param("""
            import jax
            def f(x=jax.device_put(1.0, jax.devices()[0])):
                return x
            a = jax.device_put(1.0, jax.devices()[0])
            b = jax.device_put(2.0, jax.devices()[1])
            c = [lambda: 0, a * b]
            """, 6, id="module scope: puts counted past a def and a lambda"),
    ],
)
def test_committed_devices_are_found_in_the_scope_that_holds_both_puts(code, line):
    # Only scopes with two device_put calls of their own are walked; a call counts for the
    # innermost def around it, so a nested def's puts neither hide nor stand in for its parent's.
    (finding,) = lint(CommittedDeviceMismatch, code)
    assert finding.line == line


def test_unbound_axis_message_quotes_runtime_error():
    (finding,) = lint(UnboundCollectiveAxis, """
        import jax
        from jax import lax
        mesh = jax.make_mesh((8,), ("data",))
        y = lax.psum(x, "batch")
    """)
    assert "NameError: Found an unbound axis name: batch" in finding.message
    assert "'data'" in finding.message


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.code) for r in SHARP])
def test_sharp_rules_document_confidence_and_stay_in_their_range(rule):
    assert rule.code[:3] in ("JM4", "JM5")
    assert "## Confidence" in rule.explanation()
    for example in rule.INVALID:  # the pre-filter must let every flagged example through
        assert lint_text(example.code, "t.py", (rule,), (0, 10)), example.code


def test_per_device_keys_and_reshape_follow_single_bindings():
    code = """
        import jax
        n = jax.local_device_count()
        if wide:
            n = 2 * n
        keys = jax.random.split(key, n)
        y = x.reshape(n, -1)
    """
    assert lint(PerDeviceRngKeys, code) == [] and lint(DeviceCountReshape, code) == []


def test_pmap_output_indexing_direct_call():
    (finding,) = lint(PmapOutputIndexing, "import jax\nout = jax.pmap(f)(x)\ny = out[0, :]\n")
    assert finding.line == 3
