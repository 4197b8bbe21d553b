"""The pjit -> jit rewrite keeps its meaning: the legacy program on JAX 0.10.2 (where pjit is still
there, deprecated) and on 0.4.30, against the GENERATED new one on 0.10.2, 8 forced CPU devices.

``fixtures/runtime/pjit_to_jit/old.py``'s ``main()`` returns every result with its layout (device id
and block per device), so equal outputs mean equal values and the same placement. The new program
is written by ``rewrite_pjit`` (unsafe fixes included: the one unsafe site runs under the mesh it
assumes) into ``tmp_path``, never by hand.
"""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jaxmigrate.migrate.pjit_to_jit import analyse_pjit, rewrite_pjit
from jaxmigrate.runtime_checks import make_legacy_env, verify
from jaxmigrate.runtime_checks.hlo import KINDS
from jaxmigrate.runtime_checks.report import render_text

pytestmark = pytest.mark.runtime

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "pjit_to_jit" / "old.py"
ENTRIES = ["main", "uncommitted_under_mesh"]


def _generate(tmp_path: Path) -> Path:
    text = OLD.read_text()
    sites = analyse_pjit(text)
    assert sites and all(site.rewritable for site in sites), [s for s in sites if not s.rewritable]
    unsafe = {s.line: s.assumption for s in sites if not s.safe}
    assert sorted(unsafe) == [20, 23], unsafe  # `shift`, `affine`
    assert "no shardings at all" in unsafe[23]
    new_text = rewrite_pjit(text, unsafe=True)
    tree = ast.parse(new_text)
    assert not any(isinstance(n, ast.Name) and n.id == "pjit" or isinstance(n, ast.Attribute) and n.attr == "pjit"
                   for n in ast.walk(tree)), "a pjit survived the rewrite"
    assert "jax.experimental.pjit" not in new_text
    assert rewrite_pjit(new_text, unsafe=True) == new_text, "not idempotent"
    new = tmp_path / "new.py"
    new.write_text(new_text)
    return new


def test_generated_program_matches_pjit(tmp_path):
    new = _generate(tmp_path)
    legacy = make_legacy_env("0.4.30")
    runs = {"0.10": dict(old_python=None)}
    if legacy.python is not None:
        runs["0.4.30"] = dict(old_python=str(legacy.python))
    # Both comparisons at once: each is two worker processes, mostly waiting on jax's import.
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {key: pool.submit(verify, OLD, new, ENTRIES, devices=8, timeout=120, **kwargs)
                   for key, kwargs in runs.items()}
        reports = {key: future.result() for key, future in futures.items()}

    same = reports["0.10"]
    versions = (same.old.jax_version, same.new.jax_version)
    assert all(v.startswith("0.10") for v in versions), render_text(same)
    entry = same.entry("main")
    assert entry.status == "equal", render_text(same)
    assert entry.comparison is not None and len(entry.comparison.leaves) >= 20
    # Same JAX on both sides: the compiled programs must have the same collectives too.
    assert {k: entry.old.collectives.count(k) for k in KINDS} == {k: entry.new.collectives.count(k) for k in KINDS}
    # Where the unsafe fix's assumption does not hold: the same values, another placement.
    broken = same.entry("uncommitted_under_mesh").comparison
    assert broken is not None and not broken.equal
    assert [d.path for d in broken.leaves if not d.equal] == ["['y'][0][1]"], render_text(same)

    if "0.4.30" not in reports:
        pytest.skip(f"compared on JAX 0.10 only; no jax 0.4.30 interpreter: {legacy.reason}")
    old_jax = reports["0.4.30"]
    assert old_jax.old.jax_version == "0.4.30", render_text(old_jax)
    assert old_jax.entry("main").status == "equal", render_text(old_jax)
    assert not old_jax.entry("uncommitted_under_mesh").comparison.equal, render_text(old_jax)


@pytest.mark.slow
def test_jit_under_set_mesh_matches_pjit_under_with_mesh(tmp_path, legacy_python):
    """JM308 with JM201: every `with mesh:` of the module becomes `with jax.set_mesh(mesh):` and
    every pjit jax.jit over NamedSharding(mesh, spec), in one fix; on 0.10.2 that program must
    give what pjit under `with mesh:` gave on 0.4.30 (0.10.2's pjit would raise under set_mesh)."""
    from jaxmigrate.lint.checker import fix_text
    from jaxmigrate.lint.registry import all_rules

    rules = tuple(r for r in all_rules() if r.code in ("JM201", "JM202", "JM308"))
    fixed = fix_text(OLD.read_text(), "old.py", rules, (0, 10), unsafe=True)
    assert not fixed.errors and not [f for f in fixed.findings if f.fix is not None], fixed.findings
    tree = ast.parse(fixed.text)
    contexts = [ast.unparse(i.context_expr) for n in ast.walk(tree) if isinstance(n, ast.With) for i in n.items]
    assert contexts == ["jax.set_mesh(mesh)"] * 2, contexts
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "pjit"]
    new = tmp_path / "new.py"
    new.write_text(fixed.text)
    report = verify(OLD, new, ["main"], devices=8, old_python=legacy_python, timeout=180)
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    assert report.entry("main").status == "equal", render_text(report)
