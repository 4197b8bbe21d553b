"""Sharding-API codemods: fixture pairs, idempotence, kept sites with reasons, lint positions.

Regenerate the expected outputs with
``JAXMIGRATE_UPDATE_FIXTURES=1 pytest tests/test_migrate_sharding_apis.py`` and review the diff
like code. In an ``.in.py`` a ``# kept: <part of the reason>`` comment marks a line with a site
that must stay as it is, for that reason; every other reported site must be rewritable.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.migrate.sharding_apis import (
    analyse_create_device_mesh, analyse_flax_replication, analyse_legacy_device_put, analyse_mesh_context_manager,
    analyse_positional_sharding, rewrite_all, rewrite_create_device_mesh,
    rewrite_flax_replication, rewrite_legacy_device_put, rewrite_mesh_context_manager,
    rewrite_positional_sharding,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "sharding_apis"
CASES = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("JAXMIGRATE_UPDATE_FIXTURES") == "1"
KEPT = re.compile(r"#\s*kept:\s*(?P<reason>.+)$")
TEMPLATES = {
    "JM102": (analyse_flax_replication, rewrite_flax_replication),
    "JM301": (analyse_positional_sharding, rewrite_positional_sharding),
    "JM302": (analyse_legacy_device_put, rewrite_legacy_device_put),
    "JM307": (analyse_create_device_mesh, rewrite_create_device_mesh),
    "JM308": (analyse_mesh_context_manager, rewrite_mesh_context_manager),
}
TARGET = (0, 10)


def _sites(text):
    return {code: analyse(text) for code, (analyse, _) in TEMPLATES.items()}


def test_every_case_has_a_fixture_pair():
    outs = sorted(p.name.removesuffix(".out.py") for p in FIXTURES.glob("*.out.py"))
    assert CASES and outs == CASES


@pytest.mark.parametrize("case", CASES)
def test_fixture(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected = FIXTURES / f"{case}.out.py"
    result = rewrite_all(source)
    if UPDATE:
        expected.write_text(result)
    assert result == expected.read_text()
    ast.parse(result)
    assert rewrite_all(result) == result, "not idempotent"

    lines = source.splitlines()
    kept_lines = {i + 1: m["reason"].strip() for i, line in enumerate(lines) if (m := KEPT.search(line))}
    seen_kept = set()
    for code, sites in _sites(source).items():
        for site in sites:
            if site.line in kept_lines and not site.rewritable:
                assert kept_lines[site.line] in site.reason, (code, site)
                seen_kept.add(site.line)
            elif code != "JM307" or "used other than" not in (site.reason or ""):
                # A create_device_mesh kept for its other uses is fine where no line is marked:
                # it still exists in JAX 0.10.
                assert site.rewritable, (code, site)
    assert seen_kept == set(kept_lines), sorted(set(kept_lines) - seen_kept)


@pytest.mark.parametrize("case", CASES)
def test_sites_are_where_the_lint_rules_report(case):
    """Every finding of JM301/302/307/308 is a site the codemod knows (rewritable or with a reason)."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    rules = tuple(r for r in all_rules() if r.code in TEMPLATES)
    sites = _sites(source)
    for finding in lint_text(source, f"{case}.py", rules, TARGET):
        positions = {(s.line, s.column) for s in sites[finding.code]}
        assert (finding.line, finding.column) in positions, finding


@pytest.mark.parametrize("code", sorted(TEMPLATES))
@pytest.mark.parametrize("case", CASES)
def test_selecting_every_reported_site_is_rewriting_all(case, code):
    source = (FIXTURES / f"{case}.in.py").read_text()
    analyse, rewrite = TEMPLATES[code]
    chosen = frozenset((s.line, s.column) for s in analyse(source))
    assert rewrite(source, chosen) == rewrite(source)


def test_only_the_selected_site_is_rewritten():
    text = (
        "import jax\n"
        "a = jax.device_put_replicated(1.0, jax.devices())\n"
        "b = jax.device_put_replicated(2.0, jax.devices())\n"
    )
    out = rewrite_legacy_device_put(text, frozenset({(3, 5)}))
    assert "a = jax.device_put_replicated(1.0" in out
    assert re.search(r"b = jax.device_put\(\s+jax.tree.map\(", out)
    assert rewrite_legacy_device_put(text, frozenset()) == text


def test_positional_sharding_variables_move_together():
    text = (
        "import jax\n"
        "from jax.sharding import PositionalSharding\n"
        "s = jax.sharding.PositionalSharding(jax.devices())\n"
        "t = s.reshape(4, 2)\n"
        "u = PositionalSharding(jax.devices()).reshape(8, 1)\n"
    )
    # Selecting only line 3's mention rewrites s and t (t is derived from s), not u.
    out = rewrite_positional_sharding(text, frozenset({(3, 5)}))
    assert "t = NamedSharding(s.mesh, P(\"x\", \"y\"))" in out
    assert "u = PositionalSharding(jax.devices()).reshape(8, 1)" in out
    assert re.search(r"from jax.sharding import .*PositionalSharding", out)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import jax\nx = jax.device_put(1, jax.devices()[0])\n", id="nothing legacy"),
        pytest.param("import jax\ns = 'jax.sharding.PositionalSharding(d)'  # with mesh:\n", id="strings and comments"),
        pytest.param("import jax\nwith jax.sharding.PositionalSharding(\n", id="syntax error"),
    ],
)
def test_untouched(code):
    assert rewrite_all(code) == code
    assert all(not sites for sites in _sites(code).values()) or "syntax" in code


@pytest.mark.parametrize("case", CASES)
def test_fixing_the_findings_is_running_the_codemods(case):
    """`jaxmigrate --fix --unsafe-fixes` (the rules' fixes, in the fix loop's order) writes what
    the templates write, and a second run finds nothing more to fix."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    rules = tuple(r for r in all_rules() if r.code in TEMPLATES)
    result = fix_text(source, f"{case}.py", rules, TARGET, unsafe=True)
    assert result.text == rewrite_all(source)
    assert not result.errors
    assert all(f.fix is None for f in result.findings), result.findings
    assert fix_text(result.text, f"{case}.py", rules, TARGET, unsafe=True).fixed == 0


def test_kept_sites_say_why_in_the_finding():
    source = (FIXTURES / "positional_kept.in.py").read_text()
    rules = tuple(r for r in all_rules() if r.code == "JM301")
    findings = lint_text(source, "positional_kept.py", rules, TARGET)
    assert findings and all("; not rewritten: " in f.message and f.fix is None for f in findings)


def test_only_the_replication_placements_can_be_safe_fixes():
    rules = {r.code: r for r in all_rules()}
    assert {rules[c].fixable.value for c in ("JM102", "JM302")} == {"safe"}
    assert {rules[c].fixable.value for c in ("JM301", "JM307", "JM308")} == {"unsafe"}


# -- device_put_replicated / device_put_sharded / flax replicate: placements, safe where exact ----

REPLICATION = (r for r in all_rules() if r.code in ("JM102", "JM302"))
PLACEMENT_RULES = tuple(REPLICATION)


def _fixes(source):
    return {(f.line, f.code): f for f in lint_text(source, "m.py", PLACEMENT_RULES, TARGET)}


@pytest.mark.parametrize(
    ("code", "safety", "why"),
    [
        # numpy leaves are never weakly typed: the placement is exactly device_put_replicated.
        pytest.param("x = jax.device_put_replicated(np.zeros(3), jax.local_devices())", "safe", None,
                     id="numpy leaves"),
        pytest.param("x = jax.device_put_sharded([np.ones(2), np.zeros(2)], jax.local_devices()[:2])", "safe",
                     None, id="sharded numpy shards"),
        pytest.param("x = jax.device_put_replicated({'a': jnp.zeros(3), 'b': (np.int32(1),)}, devs)", "safe",
                     None, id="strong jnp constructors in a dict"),
        # A Python scalar (or anything not known) may be weakly typed, a typed key cannot go through numpy.
        pytest.param("x = jax.device_put_replicated(1.0, jax.local_devices())", "unsafe", "weakly typed",
                     id="python scalar"),
        pytest.param("x = jax.device_put_replicated(state, jax.local_devices())", "unsafe", "typed PRNG keys",
                     id="unknown tree"),
        pytest.param("x = jax.device_put_sharded(batches, jax.local_devices())", "unsafe", "weakly typed",
                     id="sharded unknown shards"),
        pytest.param("x = jax_utils.replicate(np.zeros(2))", "safe", None, id="flax replicate of numpy"),
        pytest.param("x = jax_utils.replicate(state)", "unsafe", "weakly typed", id="flax replicate"),
        pytest.param("x = jax_utils.unreplicate(state)", "safe", None, id="flax unreplicate"),
    ],
)
def test_placements_are_safe_only_where_every_leaf_is_provably_strong(code, safety, why):
    source = ("import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom flax import jax_utils\n"
              "devs = jax.local_devices()\n" + code + "\n")
    (finding,) = _fixes(source).values()
    assert finding.fix is not None and finding.fix.safety.value == safety
    if why is None:
        assert "unsafe" not in finding.message
    else:
        assert "; the fix is unsafe: " in finding.message and why in finding.message


def test_multi_process_modules_placing_onto_devices_not_known_local_are_unsafe():
    source = (FIXTURES / "device_put_multiprocess.in.py").read_text()
    findings = _fixes(source)
    assert findings[(9, "JM302")].fix.safety.value == "safe"  # jax.local_devices(): process-local, as before
    for line in (10, 11):  # onto jax.devices(): device_put checks that every process passes the same value
        finding = findings[(line, "JM302")]
        assert finding.fix.safety.value == "unsafe"
        assert "runs as several processes (`jax.distributed.initialize` at line 7)" in finding.message
        assert "checks that every process passes the same value" in finding.message
    assert "copied this process's value onto them" in findings[(10, "JM302")].message
    assert "from each process's own list" in findings[(11, "JM302")].message
    # The same placements in a single-process module are safe.
    single = source.replace("jax.distributed.initialize()", "")
    assert all(f.fix.safety.value == "safe" for f in _fixes(single).values())


@pytest.mark.parametrize(
    ("devices", "local"),
    [
        pytest.param("jax.local_devices()", True, id="local_devices()"),
        pytest.param("jax.local_devices()[:2]", True, id="a slice of it"),
        pytest.param("devs", True, id="a name bound to it"),
        pytest.param("[devs[1], devs[0]]", True, id="a list of its devices"),
        pytest.param("jax.devices()", False, id="devices()"),
        pytest.param("jax.local_devices(process_index=1)", False, id="another process's"),
        pytest.param("other", False, id="a parameter"),
    ],
)
def test_which_device_lists_are_known_to_be_this_processs(devices, local):
    source = ("import jax\nimport numpy as np\njax.process_index()\ndevs = jax.local_devices()\n"
              f"def f(other):\n    return jax.device_put_replicated(np.ones(2), {devices})\n")
    (finding,) = _fixes(source).values()
    assert finding.fix.safety.value == ("safe" if local else "unsafe"), finding.message


def test_the_device_count_is_spelled_as_the_device_list_allows():
    def rewritten(devices):
        return rewrite_legacy_device_put(f"import jax\nx = jax.device_put_replicated(v, {devices})\n")

    assert "(jax.local_device_count(), *np.shape(x))" in rewritten("jax.local_devices()")
    assert "(jax.device_count(), *np.shape(x))" in rewritten("jax.devices()")
    # A device list that is an expression is named once, above the statement, not written twice.
    sliced = rewritten("jax.local_devices()[:2]")
    assert "devices = jax.local_devices()[:2]\n" in sliced and sliced.count("local_devices()") == 1
    assert "(len(devices), *np.shape(x))" in sliced and "Mesh(devices, " in sliced
    in_lambda = rewrite_legacy_device_put("import jax\nf = lambda v: jax.device_put_replicated(v, jax.devices()[:2])\n")
    assert in_lambda.count("jax.devices()[:2]") == 2, "a lambda's body has no statement to bind it above"
    assert "(2, *np.shape(x))" in rewritten("[d0, d1]")
    # The lambda's parameter never shadows a name the devices expression reads.
    assert "lambda leaf: np.broadcast_to(leaf, (len(x), *np.shape(leaf)))" in rewritten("x")
    aliased = rewrite_legacy_device_put("import jax as x\ny = x.device_put_replicated(v, x.local_devices())\n")
    assert "lambda leaf: " in aliased and "(x.local_device_count(), *np.shape(leaf))" in aliased
    # `len` rebound somewhere: the count cannot be written with it.
    shadowed = "import jax\nlen = 3\ny = jax.device_put_replicated(v, devs)\n"
    (site,) = analyse_legacy_device_put(shadowed)
    assert not site.rewritable and "`len`" in site.reason


def test_flax_replicate_keeps_its_default_device_list():
    def rewritten(call):
        return rewrite_flax_replication(f"import jax\nfrom flax import jax_utils\nx = {call}\n")

    assert "Mesh(jax.local_devices(), " in rewritten("jax_utils.replicate(t)")
    assert "Mesh(jax.local_devices(), " in rewritten("jax_utils.replicate(t, devices=None)")
    # A list that cannot be empty is used as it is; flax's `devices or local_devices()` otherwise.
    assert "devices = jax.local_devices()[:4]\n" in rewritten("jax_utils.replicate(t, jax.local_devices()[:4])")
    assert "devices = devs or jax.local_devices()\n" in rewritten("jax_utils.replicate(t, devs)")
    assert "len(devices)" in rewritten("jax_utils.replicate(t, devs)")
    assert "Mesh(devices, " in rewritten("jax_utils.replicate(t, devs)")
    in_lambda = rewrite_flax_replication("import jax\nfrom flax import jax_utils\nf = lambda t: jax_utils.replicate(t, devs)\n")
    assert "Mesh((devs or jax.local_devices()), " in in_lambda and "len((devs or jax.local_devices()))" in in_lambda


def test_no_helper_is_written_and_no_import_is_added_for_a_site_not_rewritten():
    text = "import jax\nfrom flax import jax_utils\na = jax_utils.unreplicate(s)\nb = jax_utils.replicate(s)\n"
    (_replicate, unreplicate) = sorted(analyse_flax_replication(text), key=lambda s: -s.line)
    out = rewrite_flax_replication(text, frozenset({(unreplicate.line, unreplicate.column)}))
    assert out == "import jax\nfrom flax import jax_utils\na = jax.tree.map(lambda x: x[0], s)\nb = jax_utils.replicate(s)\n"
    for case in CASES:
        assert "def _device_put" not in rewrite_all((FIXTURES / f"{case}.in.py").read_text())


@pytest.mark.parametrize("shards", ["len(devices) * [v]", "[v] * len(devices)"])
def test_sharded_copies_of_one_value_are_a_replication(shards):
    """`device_put_sharded(len(devices) * [v], devices)` (jaxline's bcast_local_devices) is placed
    from a zero-copy broadcast of `v`, not a host stack of len(devices) copies."""
    out = rewrite_legacy_device_put(f"import jax\ndevices = jax.local_devices()\ny = jax.device_put_sharded({shards}, devices)\n")
    assert "np.broadcast_to(x, (len(devices), *np.shape(x))), v)" in out and "np.stack" not in out
    other = rewrite_legacy_device_put("import jax\ny = jax.device_put_sharded(len(a) * [v], b)\n")
    assert "np.stack" in other, "copies counted by another list are shards"


def test_a_replication_fed_to_a_kept_pmap_lands_on_the_pmaps_own_mesh():
    # JAX 0.10's pmap lays its inputs out over Mesh(devices, (axis,)): placed there, the parameters
    # are not placed again and the step compiles once (over a ("devices",) mesh: three times).
    text = (
        "from functools import partial\n\nimport jax\n\n\n"
        "@partial(jax.pmap, axis_name='batch')\ndef step(p, x):\n    return p + jax.lax.pmean(x, 'batch')\n\n\n"
        "def main(params, batches):\n"
        "    params = jax.device_put_replicated(params, jax.local_devices())\n"
        "    for x in batches:\n        params = step(params, x)\n"
        "    return jax.tree.map(lambda v: v[0], params)\n"
    )
    fixed = fix_text(text, "t.py", all_rules(), (0, 10), unsafe=True).text
    assert 'NamedSharding(Mesh(jax.local_devices(), ("batch",)), P("batch"))' in fixed, fixed
    # A value no pmap of the module consumes keeps the mesh of its own.
    other = text.replace("params = step(params, x)", "params = params")
    assert '("devices",)' in fix_text(other, "t.py", all_rules(), (0, 10), unsafe=True).text


def test_a_replication_fed_to_a_kept_pmap_through_a_wrapper_lands_on_its_mesh():
    # brax 0.0.16's APG: a multi-host trainer replicates onto a subset of the local devices and
    # calls its step through a timing wrapper; on a ("devices",) mesh the step compiled twice.
    text = (
        "import jax\n\n\n"
        "def train(state, keys, n):\n"
        "    process_id = jax.process_index()\n"
        "    def epoch(s, k):\n        return jax.lax.pmean(s, 'i') + k\n"
        "    epoch = jax.pmap(epoch, axis_name='i')\n"
        "    def epoch_with_timing(s, k):\n        s = epoch(s, k)\n        return s\n"
        "    state = jax.device_put_replicated(state, jax.local_devices()[:n])\n"
        "    for k in keys:\n        state = epoch_with_timing(state, k)\n"
        "    return state, process_id\n"
    )
    fixed = fix_text(text, "t.py", all_rules(), (0, 10), unsafe=True).text
    assert 'NamedSharding(Mesh(devices, ("i",)), P("i"))' in fixed, fixed


@pytest.mark.parametrize(("pmaps", "axis"), [
    ("sync = jax.pmap(lambda x: jax.lax.psum(x, 'i'), 'i')\n", "i"),  # jaxline's utils.py
    ("", "devices"),  # no pmap to follow
    ("a = jax.pmap(abs, 'i')\nb = jax.pmap(abs, 'j')\n", "devices"),  # two conventions
])
def test_a_returned_replication_takes_the_one_axis_the_modules_pmaps_name(pmaps, axis):
    # jaxline 0.0.8's bcast_local_devices is consumed by the pmaps of other modules; over
    # ("devices",) their step compiled once more per run than the original.
    text = ("import jax\n\n" + pmaps + "\n\ndef bcast_local_devices(value):\n    devices = jax.local_devices()\n"
            "    return jax.tree_util.tree_map(\n"
            "        lambda v: jax.device_put_sharded(len(devices) * [v], devices), value)\n")
    fixed = fix_text(text, "t.py", all_rules(), (0, 10), unsafe=True).text
    assert f'NamedSharding(Mesh(devices, ("{axis}",)), P("{axis}"))' in fixed, fixed
