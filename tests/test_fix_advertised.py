"""A finding says "fix available" exactly when ``--fix`` (with ``--unsafe-fixes`` where it says so)
applies it: after ``--fix --unsafe-fixes`` no finding offers a fix any more, on this repository's
fixtures and examples and on the public legacy corpus (trax, jaxline, paxml, praxis, evojax,
flax 0.6.4, brax 0.0.16; fetched once into the cache by ``benchmarks/corpus.py``). And no fix
builds a mesh at import: a migrated module must import as the original did.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MESH_MAKERS = ("make_mesh", "Mesh", "create_device_mesh")
# Calls that start JAX's backend: a module that makes one at import already does what a mesh does.
BACKEND_STARTERS = ("devices", "local_devices", "device_count", "local_device_count", "process_index",
                    "process_count", "device_put", "device_put_replicated", "device_put_sharded", *MESH_MAKERS)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jaxmigrate", "--no-cache", *args],
                          capture_output=True, text=True, timeout=600)


def _findings(tree: Path) -> list[dict]:
    result = _run("--output-format", "json", "--exit-zero", str(tree))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _module_level_calls(path: Path, names: tuple[str, ...]) -> list[int]:
    """Lines of module-level statements (run at import) that call one of ``names``."""
    try:
        tree = ast.parse(path.read_bytes())
    except SyntaxError:
        return []
    imported = {a.asname: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names if a.asname}
    lines = []
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If) and "__main__" in ast.unparse(statement.test):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if imported.get(name, name) in names:
                    lines.append(node.lineno)
    return lines


def _corpus() -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from corpus import legacy_corpus
    finally:
        sys.path.pop(0)
    try:
        return legacy_corpus()
    except (SystemExit, OSError, subprocess.SubprocessError) as error:  # no registry reachable
        pytest.skip(f"the public legacy corpus could not be fetched: {error}")


def _trees() -> list:
    return [
        pytest.param(lambda: ROOT / "examples", id="examples"),
        pytest.param(lambda: ROOT / "fixtures" / "migrate", id="migrate-fixtures"),
        pytest.param(lambda: ROOT / "fixtures" / "runtime", id="runtime-fixtures"),
        pytest.param(_corpus, id="legacy-corpus"),
    ]


@pytest.mark.parametrize("source", _trees())
def test_after_fixing_no_finding_offers_a_fix_and_no_mesh_is_built_at_import(source, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(source(), tree, ignore=shutil.ignore_patterns("*.out.py", "new.py"))
    meshes_before = {p: _module_level_calls(p, MESH_MAKERS) for p in tree.rglob("*.py")}
    # A module that already starts the backend at import loses nothing to a mesh built there.
    quiet_at_import = {p for p in tree.rglob("*.py") if not _module_level_calls(p, BACKEND_STARTERS)}
    offered = [f for f in _findings(tree) if f["fix"]]
    assert offered, "nothing to fix: the test would prove nothing"
    fixed = _run("--fix", "--unsafe-fixes", "--exit-zero", "-q", str(tree))
    assert fixed.returncode == 0, fixed.stderr
    still = [f"{f['path']}:{f['line']} {f['code']} {f['message'][:120]}" for f in _findings(tree) if f["fix"]]
    assert not still, "\n".join(still)
    new_meshes = {str(p): lines for p, lines in ((p, _module_level_calls(p, MESH_MAKERS)) for p in quiet_at_import)
                  if len(lines) > len(meshes_before[p])}
    assert not new_meshes, new_meshes
