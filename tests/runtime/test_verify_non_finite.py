"""Infinities and NaNs in outputs: compared without numpy warnings, and written as strict JSON
(``Infinity`` / ``NaN`` as bare tokens are not JSON; strict parsers reject the whole report)."""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate.runtime_checks.compare import Leaf, _errors, compare_leaf


def strict_json(text: str):
    def reject(constant: str):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=reject)


@pytest.mark.parametrize(
    "old, new, errors",
    [
        pytest.param([float("inf"), 1.0], [float("inf"), 1.0], (0.0, 0.0), id="inf against inf"),
        pytest.param([-float("inf")], [-float("inf")], (0.0, 0.0), id="-inf against -inf"),
        pytest.param([float("inf")], [-float("inf")], (float("inf"), float("inf")), id="inf against -inf"),
        pytest.param([float("inf")], [1.0], (float("inf"), float("inf")), id="inf against a number"),
        pytest.param([1.0], [float("inf")], (float("inf"), float("inf")), id="a number against inf"),
    ],
)
def test_infinities_compare_without_numpy_warnings(old, new, errors):
    np = pytest.importorskip("numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _errors(np, np.array(old), np.array(new)) == errors
        diff = compare_leaf(Leaf("x", "float32", (len(old),), np.array(old, np.float32)),
                            Leaf("x", "float32", (len(new),), np.array(new, np.float32)))
    assert diff.equal == (errors == (0.0, 0.0))


PROGRAM = textwrap.dedent(
    """\
    import jax.numpy as jnp

    def main():
        return {{"same": jnp.array([jnp.inf, 1.0]), "changed": jnp.array([0.0, {value}])}}
    """
)


@pytest.mark.runtime
def test_verify_json_is_strict_json_when_values_are_infinite(tmp_path: Path):
    from jaxmigrate.runtime_checks.command import verify

    (tmp_path / "old.py").write_text(PROGRAM.format(value="jnp.nan"))
    (tmp_path / "new.py").write_text(PROGRAM.format(value="1.0"))
    result = CliRunner().invoke(
        verify, [str(tmp_path / "old.py"), str(tmp_path / "new.py"), "--entry", "main", "--json", "-"]
    )
    assert result.exit_code == 1, result.output
    leaves = {leaf["path"]: leaf for leaf in strict_json(result.stdout)["entries"][0]["leaves"]}
    assert leaves["['same']"]["equal"] and leaves["['same']"]["max_abs"] == 0.0
    assert not leaves["['changed']"]["equal"]
    assert leaves["['changed']"]["max_abs"] == leaves["['changed']"]["max_rel"] == "Infinity"
    assert "RuntimeWarning" not in result.output
