"""Do no harm, for the pjit / sharding / mesh fixes (JM102, JM2xx, JM3xx), over the repository's
fixtures and the public legacy corpus (~/.cache/jaxmigrate/corpus/src, read-only):

* a finding says "fix available" exactly when ``--fix --unsafe-fixes`` applies it: after the fix
  loop ``--fix`` runs, no finding of those codes still offers one, file by file (the CLI over every
  code is tests/test_fix_advertised.py);
* no fix starts JAX's backend at import where the module did not already: a ``Mesh(...)``,
  ``jax.make_mesh(...)`` or device query executed at import appears only in a module that made
  one (or placed arrays) at import before;
* a notebook cell's last expression stays its last statement (what the cell displays).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmigrate.core.module import parse_module
from jaxmigrate.lint.checker import fix_text
from jaxmigrate.lint.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path.home() / ".cache" / "jaxmigrate" / "corpus" / "src"
SELECT = "JM102,JM2,JM3"
RULES = tuple(r for r in all_rules() if r.code == "JM102" or r.code.startswith(("JM2", "JM3")))
TARGET = (0, 10)
FIXTURE_DIRS = [ROOT / "fixtures" / "lint", ROOT / "fixtures" / "migrate" / "sharding_apis",
                ROOT / "fixtures" / "migrate" / "pjit_to_jit", ROOT / "fixtures" / "runtime"]
# What starts JAX's backend when executed: device queries, meshes, placements of arrays.
BACKEND = frozenset({
    "jax.devices", "jax.local_devices", "jax.device_count", "jax.local_device_count", "jax.process_index",
    "jax.process_count", "jax.sharding.Mesh", "jax.make_mesh", "jax.sharding.make_mesh",
    "jax.experimental.maps.Mesh", "jax.experimental.mesh_utils.create_device_mesh", "jax.device_put",
    "jax.device_put_replicated", "jax.device_put_sharded", "jax.sharding.PositionalSharding",
    "flax.jax_utils.replicate",
})
MESHES = frozenset({"jax.sharding.Mesh", "jax.make_mesh", "jax.sharding.make_mesh", "jax.devices",
                    "jax.local_devices"})


def _import_time_calls(text: str, names: frozenset[str]) -> list[str]:
    """The calls of ``names`` a module executes at import: not in a def or lambda body, not under
    ``if __name__ == "__main__":``."""
    module = parse_module(text)
    found: list[str] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
                if part is not None:
                    walk(part)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Call) and (name := module.names.qualified_name(node.func)) in names:
            found.append(f"{name} (line {node.lineno})")
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(module.tree)
    return found


def _files(dirs: list[Path]) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*.py") if "expected" not in p.name)


def _check_fixed(path: Path, before: str) -> None:
    result = fix_text(before, str(path), RULES, TARGET, unsafe=True)
    assert not result.errors, (path, result.errors)
    offered = [f"{f.line}:{f.column} {f.code}" for f in result.findings if f.fix is not None]
    assert not offered, f"{path}: still say a fix is available after --fix --unsafe-fixes: {offered}"
    if result.text != before and not _import_time_calls(before, BACKEND):
        added = _import_time_calls(result.text, MESHES)
        assert not added, f"{path}: the fixes start JAX's backend at import, the original did not: {added}"


@pytest.mark.parametrize("path", _files(FIXTURE_DIRS), ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_fixture_after_fix_offers_nothing_and_meshes_nothing_at_import(path):
    _check_fixed(path, path.read_text())


def test_corpus_after_fix_offers_nothing_and_meshes_nothing_at_import():
    if not CORPUS.is_dir():
        pytest.skip(f"the legacy corpus is not unpacked at {CORPUS}")
    checked = 0
    for path in sorted(CORPUS.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if not any(word in text for word in ("pjit", "device_put_", "Mesh", "mesh", "Sharding", "replicate")):
            continue
        _check_fixed(path, text)
        checked += 1
    assert checked > 50


def test_the_import_time_check_sees_a_new_module_level_mesh():
    """The check above can fail: a module-level mesh written into a module that made none."""
    before = "import jax\n\ndef f():\n    return jax.devices()\n"
    after = "import jax\nmesh = jax.make_mesh((8,), ('x',))\n\ndef f():\n    return jax.devices()\n"
    assert not _import_time_calls(before, BACKEND)
    assert _import_time_calls(after, MESHES) == ["jax.make_mesh (line 2)"]
    main = "import jax\nif __name__ == '__main__':\n    mesh = jax.make_mesh((8,), ('x',))\n"
    assert not _import_time_calls(main, MESHES)


def test_a_notebook_cell_keeps_its_last_expression(tmp_path):
    """A statement inserted after a cell's last expression would hide what the cell displays; the
    device list named once goes above the statement, never below."""
    cells = [
        "import jax\ndevs = jax.local_devices()",
        "jax.device_put_replicated(1.0, jax.local_devices()[:2])",
        "y = 1\njax.device_put_sharded([jax.random.key(i) for i in range(2)], devs[:2])",
    ]
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c} for c in cells
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    subprocess.run([sys.executable, "-m", "jaxmigrate", "--fix", "--unsafe-fixes", "--no-cache", "--select", SELECT,
                    str(notebook)], cwd=ROOT, capture_output=True, text=True, check=False)
    fixed = ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]]
    assert fixed[1] != cells[1] and "device_put_replicated" not in fixed[1]
    assert "devices = jax.local_devices()[:2]" in fixed[1]
    for before, after in zip(cells, fixed):
        last_before, last_after = ast.parse(before).body[-1], ast.parse(after).body[-1]
        assert isinstance(last_before, ast.Expr) == isinstance(last_after, ast.Expr), after
        assert "device_put" in ast.unparse(last_after) or "devs" in ast.unparse(last_after)


def test_a_statement_inserted_before_a_cells_first_line_stays_in_that_cell():
    """`insertion_point` (where the pmap and global-view rewrites put a mesh) climbs over the
    comments above a statement, but not over a notebook's cell boundary: above it is the previous
    cell's end, after its last expression, whose displayed output the insertion would hide."""
    from jaxmigrate.core.source import CELL_BOUNDARY
    from jaxmigrate.notebooks import Notebook

    cells = ["import jax\njax.devices()", "# the step\nf = jax.pmap(g)"]
    raw = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                                 "source": c} for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    notebook = Notebook.parse(raw.encode())
    module = parse_module(notebook.text)
    statement = module.tree.body[-1]
    offset = module.insertion_point(statement)
    assert notebook.text[:offset].endswith(CELL_BOUNDARY + "\n")  # below the boundary, above the comment
    assert notebook.text[offset:].startswith("# the step\n")
    fixed = notebook.with_text(notebook.text[:offset] + "mesh = 1\n" + notebook.text[offset:])
    sources = ["".join(c["source"]) for c in json.loads(fixed)["cells"]]
    assert sources == [cells[0], "mesh = 1\n" + cells[1]]
