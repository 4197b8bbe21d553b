"""The old side on jax 0.4.30 (a cached venv) running PositionalSharding; the new side on this JAX."""

from __future__ import annotations

import pytest

from jaxmigrate.runtime_checks.harness import verify

pytestmark = [pytest.mark.runtime, pytest.mark.slow]


def test_positional_sharding_on_0_4_30_matches_named_sharding(legacy_python, harness_case) -> None:
    old, new = harness_case("positional_sharding")
    report = verify(old, new, ["main"], old_python=legacy_python)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version != "0.4.30"
    assert report.exit_code == 0, report.entry("main").comparison
    # Both sides drew their noise with the partitionable threefry: same stream across versions.
    assert report.old.threefry_partitionable is True and report.new.threefry_partitionable is True
    assert "PositionalSharding" in report.entry("main").old.outputs[1].sharding
    assert report.entry("main").old.collectives.count("all-reduce") >= 1

    as_is = verify(old, new, ["main"], old_python=legacy_python, threefry_partitionable="as-is")
    # 0.4.30 defaults to the old stream and 0.10.2 to the new: the noise, and what used it, differ.
    assert as_is.old.threefry_partitionable is False and as_is.new.threefry_partitionable is True
    assert {d.path for d in as_is.entry("main").comparison.worst()} == {"['noise']", "['y']"}
