"""The pre-commit fix hook runs the safe ``--fix`` on every commit; a user who later runs
``--fix --unsafe-fixes`` must get the program a single ``--fix --unsafe-fixes`` would have written:
the global view reads the safe fixes' output (a replication already moved onto a mesh, ``tree.map``
for ``tree_map``) as it read the legacy code (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text
from test_fix_shapes import RULES, TARGET

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted([*ROOT.glob("fixtures/migrate/to_global_jit/*.in.py"), *ROOT.glob("fixtures/runtime/global_*/old.py"),
                   *ROOT.glob("fixtures/migrate/pmap_to_shard_map/*.in.py"), *ROOT.glob("examples/legacy/*.py")])


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_safe_fix_first_then_unsafe_writes_what_one_unsafe_fix_writes(path):
    text = path.read_text()
    at_once = fix_text(text, str(path), RULES, TARGET, unsafe=True).text
    safe_first = fix_text(text, str(path), RULES, TARGET, unsafe=False).text
    assert fix_text(safe_first, str(path), RULES, TARGET, unsafe=True).text == at_once


def test_a_pmap_rewritten_after_its_replication_keeps_a_readable_axis():
    # The safe fix lays a replication for a kept, unnamed pmap out over pmap's own axis; when the
    # pmap is rewritten later, that layout must not make the rewrite name its axis after JAX's
    # internals (it read the string as a collective written against it).
    text = ("import jax\nimport jax.numpy as jnp\n\n\ndef main():\n    @jax.pmap\n    def inc(x):\n"
            "        return x + 1\n\n    ones = jax.device_put_replicated(jnp.ones(3), jax.devices())\n"
            "    return inc(ones)\n\n\nif __name__ == \"__main__\":\n    print(main())\n")
    safe_first = fix_text(text, "t.py", RULES, TARGET, unsafe=False).text
    assert '"_internal_pmap_axis_name"' in safe_first
    after = fix_text(safe_first, "t.py", RULES, TARGET, unsafe=True).text
    assert "NamedSharding(mesh, P(\"devices\"))" in after and "_internal_pmap_axis_name" not in after
    assert "Mesh," not in after  # the import the safe fix added goes with its last use


def test_a_replication_a_kept_pmap_takes_stays_on_that_pmaps_mesh():
    # `keep` keeps its pmap (it is also held in a list, which the exact path does not follow);
    # `inc` is rewritten. What `keep` takes must stay where `keep`'s pmap places its inputs, at
    # once and in two steps.
    text = ("import jax\nimport numpy as np\n\n\ndef main():\n    @jax.pmap\n    def inc(x):\n"
            "        return x + 1\n\n    keep = jax.pmap(lambda x: x * 2, axis_name=\"k\")\n    steps = [keep]\n"
            "    ones = jax.device_put_replicated(np.ones(3), jax.devices())\n"
            "    return inc(np.zeros((jax.device_count(), 3))), keep(ones), steps\n")
    at_once = fix_text(text, "t.py", RULES, TARGET, unsafe=True).text
    safe_first = fix_text(text, "t.py", RULES, TARGET, unsafe=False).text
    assert fix_text(safe_first, "t.py", RULES, TARGET, unsafe=True).text == at_once
    assert "def inc" in at_once and "jax.jit" in at_once and "jax.pmap(lambda x: x * 2" in at_once
    assert 'NamedSharding(Mesh(jax.devices(), ("k",)), P("k"))' in at_once


def test_a_replication_in_a_multiprocess_module_keeps_its_own_mesh():
    # Where other processes' devices may be among the mesh's, `step_mesh` does not apply at once:
    # the later pass must not apply it either.
    text = ("import jax\nimport numpy as np\n\n\ndef main():\n    jax.distributed.initialize()\n\n"
            "    @jax.pmap\n    def inc(x):\n        return x + 1\n\n"
            "    ones = jax.device_put_replicated(np.ones(3), jax.local_devices())\n    return inc(ones)\n")
    at_once = fix_text(text, "t.py", RULES, TARGET, unsafe=True).text
    safe_first = fix_text(text, "t.py", RULES, TARGET, unsafe=False).text
    assert fix_text(safe_first, "t.py", RULES, TARGET, unsafe=True).text == at_once
