"""Property-based: generated modules using the legacy APIs in awkward shapes (tests/legacy_modules.py)
are fixed without JM001, into code that parses, in one run (a second is a no-op), with every line
away from the sites, the BOM and the line endings kept, no new undefined name and no legacy import
left unused (pyflakes), and every finding that had no fix to apply still reported.

Bounded for the suite: a fixed number of examples, derandomized (the same modules on every run and
machine), each fixed with and without --unsafe-fixes. `python benchmarks/fix_fuzz.py` runs many more.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings

from legacy_modules import Module, modules, violations

# Each class issue 19 found, spelled out, so the bounded run holds them whatever it draws.
SHAPES = [
    Module("import jax\ntry:\n    from jax import tree_map\nexcept ImportError:\n    pass\ny = tree_map(len, {})\n",
           False, False),
    Module("import jax\ndef f(x):\n    return x\ng = jax.pmap(jax.pmap(f))\n", False, True),
    Module('from jax import pmap\nprint(f"{pmap(abs)}")\nh = pmap(lambda x: x * 2)\n', True, False),
    Module("import os; from jax import pmap\nf = pmap(lambda x: x)\n", False, False),
    Module("import jax\nfrom flax import jax_utils\nfrom jax import lax\n\nparams = jax_utils.replicate({'w': 1.0})\n\n\n"
           "def g(x):\n    return lax.psum(x, axis_name='devices')\n\n\n"
           "h = jax.vmap(lambda x: lax.psum(x, 'batch'), axis_name='batch')\n", False, False),
    Module("import jax\n\n\n@jax.pmap\ndef step(x):\n    return x + 1\n\n\ny = jax.tree.map(lambda x: x[0], step(1))\n",
           True, True),
    # (fix_fuzz seed 222) a fix spelling jax.sharding's names above a later cell's import of them
    Module("import jax\nx1 = jax.device_put_replicated(1, jax.local_devices())\n"
           "from jax.sharding import PositionalSharding\nprint(jax.device_put(1, PositionalSharding(jax.devices())))\n",
           False, False),
    Module("import jax\nx = jax.device_put_replicated(1, jax.local_devices())\n"
           "from jax.sharding import NamedSharding, Mesh, PartitionSpec as P\ny = NamedSharding, Mesh, P\n", False, False),
]


def _holds(module: Module) -> None:
    for unsafe in (False, True):
        problems = violations(module, unsafe)
        assert not problems, f"{'--unsafe-fixes' if unsafe else '--fix'}: {problems}\n{module.text}"


@pytest.mark.parametrize("module", SHAPES, ids=["try-import", "nested-pmap", "f-string", "semicolon", "axis-name", "jm505",
                                              "late-import-extended", "late-import-of-the-names"])
def test_the_shapes_issue_19_found(module):
    _holds(module)


@settings(max_examples=40, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules())
@example(SHAPES[0])
def test_fixing_generated_modules_keeps_every_property(module):
    _holds(module)
