"""Migrated modules import as the originals did: a launcher imports the program, then calls
``jax.distributed.initialize()``, so nothing a fix writes may start JAX's backend at import.

``verify --connect after-import`` runs each side that way (2 processes x 2 CPU devices): the
program is imported first and the processes are joined after it (or when the program calls
``jax.distributed.initialize()`` itself). The new program is GENERATED from
``fixtures/runtime/launcher_order/old.py`` by ``--fix --unsafe-fixes``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.runtime_checks.harness import verify
from jaxmigrate.runtime_checks.report import render_text

pytestmark = pytest.mark.runtime

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "launcher_order" / "old.py"
LAUNCHED = {"processes": 2, "devices": 2, "timeout": 120, "connect": "after-import"}


def _module_level_calls(text: str) -> list[str]:
    """The calls a module makes when it is imported (outside functions and classes)."""
    calls = []
    for statement in ast.parse(text).body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            calls += [ast.unparse(d) for d in statement.decorator_list if isinstance(d, ast.Call)]
            continue
        calls += [ast.unparse(n.func) for n in ast.walk(statement) if isinstance(n, ast.Call)]
    return calls


def test_the_global_view_of_a_multi_host_loop_imports_cleanly_and_trains_the_same(tmp_path):
    fixed = fix_text(OLD.read_text(), "old.py", all_rules(), (0, 10), unsafe=True)
    assert not fixed.errors
    assert "jax.pmap" not in fixed.text and "make_array_from_process_local_data" in fixed.text
    # The mesh is built where training starts, not at import.
    assert not any("mesh" in call or "device" in call for call in _module_level_calls(fixed.text))
    new = tmp_path / "new.py"
    new.write_text(fixed.text)
    report = verify(OLD, new, ["train"], **LAUNCHED)
    assert report.equal, render_text(report)
    assert report.processes == 2


def test_a_module_that_builds_a_mesh_at_import_fails_under_its_launcher(tmp_path):
    # What the exact rewrite used to write: the same program with its mesh at module level.
    clean = tmp_path / "clean.py"
    clean.write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp


        def main():
            mesh = jax.make_mesh((jax.device_count(),), ("i",))
            return jnp.arange(4.0) * len(mesh.devices.flat)
    """))
    at_import = tmp_path / "at_import.py"
    at_import.write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        mesh = jax.make_mesh((jax.device_count(),), ("i",))


        def main():
            return jnp.arange(4.0) * len(mesh.devices.flat)
    """))
    # The harness's own order (join, then import) hides it ...
    assert verify(clean, at_import, ["main"], processes=2, devices=2, timeout=120).equal
    # ... a launcher's order shows it, and says why.
    report = verify(clean, at_import, ["main"], **LAUNCHED)
    assert not report.equal
    assert report.old.failure is None
    assert "started JAX's backend before the processes were joined" in report.new.failure.message, render_text(report)


def test_the_programs_own_initialize_joins_the_processes(tmp_path):
    program = tmp_path / "launcher.py"
    program.write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        jax.distributed.initialize("cluster.example:1234", num_processes=64, process_id=0)
        COUNT = jax.process_count()


        def main():
            return jnp.full((2,), float(COUNT + jax.process_index()))
    """))
    report = verify(program, program, ["main"], **LAUNCHED)
    assert report.equal, render_text(report)
