"""Moved/renamed names (JM303 Mesh, JM304, JM305, JM306, JM601): fixture pairs, idempotence, the
fix end to end through ``fix_text``, kept sites with reasons, and sites where the rules report.

Regenerate the expected outputs with
``JAXMIGRATE_UPDATE_FIXTURES=1 pytest tests/test_migrate_moved_names.py`` and review the diff like
code. Each ``.out.py`` is what ``jaxmigrate --fix`` writes with these five rules (edit fixes and the
codemod, looped). In an ``.in.py`` a ``# kept: <part of the reason>`` comment marks a line whose
finding must stay, without a fix, for that reason; every other finding must be fixed.
"""

from __future__ import annotations

import importlib

import ast
import os
import re
from pathlib import Path

import pytest

from jaxmigrate import catalogue
from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.migrate.moved_names import (
    CODES, analyse_experimental_maps, analyse_partition_spec, analyse_shard_map, analyse_tree_aliases,
    renames, rewrite,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "moved_names"
CASES = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("JAXMIGRATE_UPDATE_FIXTURES") == "1"
KEPT = re.compile(r"#\s*kept:\s*(?P<reason>.+)$")
TARGET = (0, 10)
RULES = tuple(r for r in all_rules() if r.code in (*CODES, "JM306"))
ANALYSE = {
    "JM303": analyse_experimental_maps,
    "JM304": analyse_partition_spec,
    "JM305": analyse_shard_map,
    "JM601": analyse_tree_aliases,
}


def _fix(text: str):
    return fix_text(text, "case.py", RULES, TARGET)


def test_every_case_has_a_fixture_pair():
    outs = sorted(p.name.removesuffix(".out.py") for p in FIXTURES.glob("*.out.py"))
    assert CASES and outs == CASES


@pytest.mark.parametrize("case", CASES)
def test_fixture(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected = FIXTURES / f"{case}.out.py"
    result = _fix(source)
    assert not result.errors, result.errors
    if UPDATE:
        expected.write_text(result.text)
    assert result.text == expected.read_text()
    ast.parse(result.text)
    again = _fix(result.text)
    assert again.text == result.text and again.fixed == 0, "not idempotent"

    # Exactly the marked findings are kept, without a fix, saying why; they are all that is left.
    kept = {i + 1: m["reason"].strip() for i, line in enumerate(source.splitlines()) if (m := KEPT.search(line))}
    before = [f for f in lint_text(source, "case.py", RULES, TARGET) if f.code != "JM306"]
    unfixed = [f for f in before if f.fix is None]
    assert {f.line for f in unfixed} == set(kept), unfixed
    for line, reason in kept.items():
        assert any(reason in f.message for f in unfixed if f.line == line), (line, reason, unfixed)
    left = [f for f in result.findings if f.code != "JM306"]
    assert all(f.fix is None for f in result.findings)
    assert sorted(f.code for f in left) == sorted(f.code for f in unfixed), left


@pytest.mark.parametrize("case", CASES)
def test_codemod_alone_on_every_reported_site(case):
    """Selecting every reported site is rewriting everything; each finding's position is a site."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    findings = [f for f in lint_text(source, "case.py", RULES, TARGET) if f.code in CODES]
    for finding in findings:
        sites = {(s.line, s.column): s for s in ANALYSE[finding.code](source)}
        site = sites[(finding.line, finding.column)]
        assert site.rewritable == (finding.fix is not None), (finding, site)
    chosen = frozenset((f.line, f.column) for f in findings)
    assert rewrite(source, chosen) == rewrite(source)
    assert rewrite(rewrite(source)) == rewrite(source)


def test_mixed_file_ends_fully_migrated():
    result = _fix((FIXTURES / "mixed.in.py").read_text())
    assert result.findings == []
    assert "check_rep" not in result.text and "experimental" not in result.text
    assert "jax.tree_map" not in result.text and "tree_leaves" not in result.text


def test_only_the_selected_site_is_rewritten():
    text = "import jax\na = jax.tree_map(f, x)\nb = jax.tree_map(g, y)\n"
    assert rewrite(text, frozenset({(3, 5)})) == "import jax\na = jax.tree_map(f, x)\nb = jax.tree.map(g, y)\n"
    assert rewrite(text, frozenset()) == text


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("import jax as J\ny = J.tree_map(f, x)\n", "import jax as J\ny = J.tree.map(f, x)\n",
                     id="module alias kept"),
        pytest.param("from jax import tree_map as tm\ny = tm(f, x)\n", "import jax\ny = jax.tree.map(f, x)\n",
                     id="from-import alias: uses renamed, import jax added once"),
        pytest.param("from jax import tree_map\n", "from jax.tree import map as tree_map\n",
                     id="unused here (maybe re-exported): the local name is kept"),
        pytest.param("from jax import tree_map as tree_map\n", "from jax.tree import map as tree_map\n",
                     id="explicit re-export"),
        pytest.param("from jax.experimental import PartitionSpec as PartitionSpec\n",
                     "from jax.sharding import PartitionSpec as PartitionSpec\n", id="X as X stays"),
        pytest.param("if True: from jax.experimental import PartitionSpec, maps\n",
                     "if True: from jax.experimental import maps; from jax.sharding import PartitionSpec\n",
                     id="split on a compound line"),
        pytest.param("from jax import tree_map, treedef_is_leaf\n",
                     "from jax.tree import map as tree_map\nfrom jax.tree_util import treedef_is_leaf\n",
                     id="split between two new homes"),
        pytest.param("import jax.experimental.maps\nm = jax.experimental.maps.Mesh(d, ('x',))\n",
                     "import jax\nm = jax.sharding.Mesh(d, ('x',))\n", id="dotted maps import becomes import jax"),
        pytest.param("import jax\nimport jax.experimental.maps\nm = jax.experimental.maps.Mesh(d, ('x',))\n",
                     "import jax\nm = jax.sharding.Mesh(d, ('x',))\n", id="dotted maps import deleted"),
        pytest.param("from jax.experimental.shard_map import shard_map as sm\nf = sm(g, m, s, s, False)\n",
                     "from jax import shard_map as sm\nf = sm(g, mesh=m, in_specs=s, out_specs=s, check_vma=False)\n",
                     id="positional check_rep"),
        pytest.param("import jax\nf = jax.experimental.shard_map.shard_map(g, (m := d), s, s)\n",
                     "import jax\nf = jax.shard_map(g, mesh=(m := d), in_specs=s, out_specs=s)\n",
                     id="parenthesized walrus"),
        pytest.param("import jax\nf = jax.experimental.shard_map.shard_map(g, m := d, s, s)\n",
                     "import jax\nf = jax.shard_map(g, mesh=(m := d), in_specs=s, out_specs=s)\n",
                     id="bare walrus gets parentheses"),
        pytest.param(
            "import functools\nfrom jax.experimental.shard_map import shard_map\n"
            "sm = functools.partial(shard_map, g, m)\nsm2 = functools.partial(sm, in_specs=s, check_rep=False)\n"
            "f = sm2(out_specs=s)\n",
            None, id="a partial leaving in_specs to its callers is kept"),
        pytest.param(
            "import functools\nfrom jax.experimental.shard_map import shard_map\n"
            "sm = functools.partial(shard_map, mesh=m, in_specs=s, out_specs=s)\ny = sm(f=g)\n",
            None, id="a call through the partial passes f= by keyword: kept"),
        pytest.param("from jax import tree_map\ny = tree_map(f, x)\ntree_map = None\n",
                     "from jax.tree import map as tree_map\ny = tree_map(f, x)\ntree_map = None\n",
                     id="rebound name: the import keeps it"),
        pytest.param("def tree_map(f, x):\n    return x\n\ny = tree_map(abs, 1)\n", None, id="local def"),
        pytest.param("import jax\ns = 'jax.tree_map(f, x)'  # jax.tree_map\n", None, id="strings and comments"),
        pytest.param("import jax\ny = jax.tree_map(\n", None, id="syntax error"),
    ],
)
def test_forms(before, after):
    assert rewrite(before) == (before if after is None else after)
    if after is not None:
        assert rewrite(after) == after


def test_kept_sites_say_why():
    text = "from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s, s, auto=frozenset({'y'}))\n"
    (site,) = analyse_shard_map(text)
    assert not site.rewritable and "`auto=`" in site.reason
    (finding,) = [f for f in lint_text(text, "a.py", RULES, TARGET) if f.code == "JM305"]
    assert finding.fix is None and "not rewritten: `auto=`" in finding.message


def test_check_rep_follows_the_callee():
    text = (
        "import jax\nfrom jax.experimental.shard_map import shard_map\n"
        "a = shard_map(g, m, s, s, check_rep=False)\n"
        "b = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_rep=False)\n"
    )
    jm306 = {f.line: f for f in lint_text(text, "a.py", RULES, TARGET) if f.code == "JM306"}
    assert jm306[3].fix is None and "JM305" in jm306[3].message
    assert jm306[4].fix is not None
    # JM306 alone: only the modern callee is renamed, the experimental call still works.
    alone = fix_text(text, "a.py", tuple(r for r in RULES if r.code == "JM306"), TARGET)
    assert "a = shard_map(g, m, s, s, check_rep=False)" in alone.text
    assert "b = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_vma=False)" in alone.text


def test_renames_cover_the_catalogue():
    """Every non-manual entry of these rules has a new name, and only manual ones lack a fix."""
    for symbol in catalogue.symbols():
        if symbol.code in CODES and symbol.kind in catalogue.NAMED_KINDS:
            for name in symbol.names:
                assert (name in renames()) == (symbol.fix != "manual"), name
    assert renames()["jax.tree_multimap"] == "jax.tree.map"
    assert renames()["jax.treedef_is_leaf"] == "jax.tree_util.treedef_is_leaf"
    assert renames()["jax.interpreters.pxla.Mesh"] == "jax.sharding.Mesh"


def test_new_names_exist_in_jax():
    jax = pytest.importorskip("jax")
    assert jax.__version__.startswith("0.10")
    for new in set(renames().values()):
        parts = new.split(".")
        for k in range(len(parts), 0, -1):  # `jax.extend` is reached by importing it
            try:
                obj = importlib.import_module(".".join(parts[:k]))
                break
            except ImportError:
                continue
        for part in parts[k:]:
            obj = getattr(obj, part)
        assert callable(obj) or new == "jax.config", new
