"""benchmarks/changelog_coverage.py: it reads the changelog's removals right, and every removal
JAX's changelog lists for 0.4.0 - 0.10.2 is covered by the catalogue or left out with a reason."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "changelog_coverage.py"
spec = importlib.util.spec_from_file_location("changelog_coverage", SCRIPT)
coverage = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = coverage  # dataclasses look their module up there
spec.loader.exec_module(coverage)

SAMPLE = """\
## JAX 0.11.0 (July 16, 2026)

* The function `jax.numpy.fix` has been removed.

## JAX 0.10.0 (April 16, 2026)

* Breaking changes:
  * The deprecated keyword arguments `a`, `a_min`, and `a_max` to
    `jax.numpy.clip` have been removed.
  * `jax.foo.bar` is deprecated and will be removed in a future release.
  * Several previously-deprecated APIs have been removed, including:
    * From {mod}`jax.numpy`: `round_` and `NINF`.
    * `jax.tree_map`; use `jax.tree.map` instead.
    * The `cuda12_pip` extra has been removed.

## jax 0.3.25 (Nov 15, 2022)

* `jax.numpy.product` was removed.
"""


def _outcomes(text):
    return {(o.name, o.kind) for o in coverage.classify(text, check_installed=False)}


def test_reads_removals_in_range_with_their_module_and_keywords():
    got = _outcomes(SAMPLE)
    assert ("jax.numpy.round_", "covered") in got and ("jax.numpy.NINF", "covered") in got
    assert {("a_min=", "covered"), ("a_max=", "covered"), ("a=", "covered")} <= got
    assert ("jax.tree_map", "covered") in got
    assert ("cuda12_pip", "not an API") in got
    names = {name for name, _ in got}
    assert "jax.tree.map" not in names, "the replacement a bullet recommends is not a removal"
    assert "jax.foo.bar" not in names, "'will be removed' is a deprecation, not a removal"
    assert "jax.numpy.fix" not in names and "jax.numpy.product" not in names, "outside 0.4.0 - 0.10.2"


def test_an_unknown_removed_name_is_unclassified():
    text = "## JAX 0.9.0 (January 20, 2026)\n\n* `jax.numpy.frobnicate` has been removed.\n"
    assert _outcomes(text) == {("jax.numpy.frobnicate", "unclassified")}


def test_every_changelog_removal_is_covered_or_left_out_with_a_reason():
    if not coverage.DEFAULT.is_file():
        pytest.skip(f"JAX's changelog is not beside the repository ({coverage.DEFAULT})")
    pytest.importorskip("jax")
    outcomes = coverage.classify(coverage.DEFAULT.read_text(encoding="utf-8"))
    unclassified = [(o.version, o.name) for o in outcomes if o.kind == "unclassified"]
    assert unclassified == []
    counts = coverage.summary(outcomes)
    assert counts["changelog removals covered"] >= 200
    assert counts["changelog removals covered"] > 2 * counts["changelog removals left out"]
