"""The moved-name fixes keep their meaning: legacy program on JAX 0.4.30, generated one on 0.10.2.

``fixtures/runtime/moved_names/old.py`` uses the top-level tree aliases (``jax.tree_map`` with
``is_leaf``, ``from jax import tree_map as tm``, flatten/unflatten/leaves/structure/transpose,
``treedef_is_leaf``) and ``jax.experimental.shard_map.shard_map`` (positional mesh/specs,
``check_rep`` by keyword and positionally, a psum inside, a ``functools.partial`` decorator, a module
alias). The new program is GENERATED here by the rules' fixes through ``fix_text`` (what
``jaxmigrate --fix`` writes), never hand-written; old runs in the cached jax 0.4.30 venv (skipped,
with the reason, when it cannot be made), new on 0.10.2, both on 8 forced CPU devices.

``jax.experimental.PartitionSpec`` and ``jax.experimental.maps.Mesh`` left those homes in JAX 0.4.11,
before 0.4.30, so no legacy program using them runs on the legacy venv: those renames (to the very
same classes) are proven by the fixture pairs of tests/test_migrate_moved_names.py only. The same
goes for ``tree_multimap`` (removed in 0.3.16).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.runtime_checks import verify
from jaxmigrate.runtime_checks.hlo import KINDS
from jaxmigrate.runtime_checks.report import render_text

pytestmark = [pytest.mark.runtime, pytest.mark.slow]

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "moved_names" / "old.py"
RULES = tuple(r for r in all_rules() if r.code in ("JM303", "JM304", "JM305", "JM306", "JM601"))
TREE_PAIRS = {
    "jax.tree_map": "jax.tree.map",
    "jax.tree_flatten": "jax.tree.flatten",
    "jax.tree_unflatten": "jax.tree.unflatten",
    "jax.tree_leaves": "jax.tree.leaves",
    "jax.tree_structure": "jax.tree.structure",
    "jax.tree_transpose": "jax.tree.transpose",
    "jax.treedef_is_leaf": "jax.tree_util.treedef_is_leaf",
}
# Prints {name: [(parameter, kind, default repr), ...]} for the names given on the command line.
SIGNATURES = """
import functools, inspect, json, sys, warnings
warnings.simplefilter("ignore")
import jax
out = {}
for name in sys.argv[1:]:
    obj = functools.reduce(getattr, name.split(".")[1:], jax) if "shard_map.shard_map" not in name else (
        __import__("jax.experimental.shard_map", fromlist=["shard_map"]).shard_map)
    out[name] = [(p.name, p.kind.name, repr(p.default)) for p in inspect.signature(obj).parameters.values()]
print(json.dumps(out))
"""


def _signatures(python: str, names) -> dict:
    done = subprocess.run([python, "-c", SIGNATURES, *names], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_generated_program_matches_legacy(tmp_path, legacy_python):
    legacy = OLD.read_text()
    result = fix_text(legacy, "old.py", RULES, (0, 10))
    assert not result.errors and not result.findings, (result.errors, result.findings)
    text = result.text
    tree = ast.parse(text)
    spelled = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    spelled |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.keyword)}
    spelled |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    legacy_names = {"tree_map", "tree_flatten", "tree_leaves", "tree_structure", "tm", "shmap", "experimental",
                    "check_rep", "jax.experimental.shard_map"}
    assert not spelled & legacy_names, spelled & legacy_names
    again = fix_text(text, "new.py", RULES, (0, 10))
    assert again.text == text and again.fixed == 0, "not idempotent"
    new = tmp_path / "new.py"
    new.write_text(text)

    report = verify(OLD, new, ["main"], devices=8, old_python=legacy_python, timeout=120)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    assert report.equal, render_text(report)
    entry = report.entry("main")
    assert entry.comparison is not None and len(entry.comparison.leaves) > 10
    # Each of the three psums is an all-reduce over the 8 devices on both sides, and nothing else
    # communicates. (0.4.30 compiles the eager shard_map calls into more modules, so its count can be
    # higher for the same program: the counts are not compared.)
    for side in (entry.old, entry.new):
        assert {kind for kind in KINDS if side.collectives.count(kind)} == {"all-reduce"}, render_text(report)
        assert side.collectives.count("all-reduce") >= 3, render_text(report)
    assert entry.new.collectives.count("all-reduce") == 3, render_text(report)


def test_renamed_functions_keep_their_signatures(legacy_python):
    """Each tree alias of JAX 0.4.30 and its 0.10.2 replacement: same parameters, kinds, defaults."""
    old = _signatures(legacy_python, [*TREE_PAIRS, "jax.experimental.shard_map.shard_map"])
    new = _signatures(sys.executable, [*TREE_PAIRS.values(), "jax.experimental.shard_map.shard_map"])
    for legacy, modern in TREE_PAIRS.items():
        assert old[legacy] == new[modern], (legacy, old[legacy], new[modern])
    # The experimental shard_map the codemod reads: 0.10.2's is 0.4.30's without `auto` (kept).
    names = [p[0] for p in new["jax.experimental.shard_map.shard_map"]]
    assert names == ["f", "mesh", "in_specs", "out_specs", "check_rep"]
    assert [p[0] for p in old["jax.experimental.shard_map.shard_map"]] == [*names, "auto"]
