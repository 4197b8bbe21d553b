"""Sharding-API codemods: fixture pairs, idempotence, kept sites with reasons, lint positions.

Regenerate the expected outputs with
``JAXMIGRATE_UPDATE_FIXTURES=1 pytest tests/test_migrate_sharding_apis.py`` and review the diff
like code. In an ``.in.py`` a ``# kept: <part of the reason>`` comment marks a line with a site
that must stay as it is, for that reason; every other reported site must be rewritable.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.migrate.sharding_apis import (
    analyse_create_device_mesh, analyse_flax_replication, analyse_legacy_device_put, analyse_mesh_context_manager,
    analyse_positional_sharding, rewrite_all, rewrite_create_device_mesh,
    rewrite_flax_replication, rewrite_legacy_device_put, rewrite_mesh_context_manager,
    rewrite_positional_sharding,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "sharding_apis"
CASES = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("JAXMIGRATE_UPDATE_FIXTURES") == "1"
KEPT = re.compile(r"#\s*kept:\s*(?P<reason>.+)$")
TEMPLATES = {
    "JM102": (analyse_flax_replication, rewrite_flax_replication),
    "JM301": (analyse_positional_sharding, rewrite_positional_sharding),
    "JM302": (analyse_legacy_device_put, rewrite_legacy_device_put),
    "JM307": (analyse_create_device_mesh, rewrite_create_device_mesh),
    "JM308": (analyse_mesh_context_manager, rewrite_mesh_context_manager),
}
TARGET = (0, 10)


def _sites(text):
    return {code: analyse(text) for code, (analyse, _) in TEMPLATES.items()}


def test_every_case_has_a_fixture_pair():
    outs = sorted(p.name.removesuffix(".out.py") for p in FIXTURES.glob("*.out.py"))
    assert CASES and outs == CASES


@pytest.mark.parametrize("case", CASES)
def test_fixture(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected = FIXTURES / f"{case}.out.py"
    result = rewrite_all(source)
    if UPDATE:
        expected.write_text(result)
    assert result == expected.read_text()
    ast.parse(result)
    assert rewrite_all(result) == result, "not idempotent"

    lines = source.splitlines()
    kept_lines = {i + 1: m["reason"].strip() for i, line in enumerate(lines) if (m := KEPT.search(line))}
    seen_kept = set()
    for code, sites in _sites(source).items():
        for site in sites:
            if site.line in kept_lines and not site.rewritable:
                assert kept_lines[site.line] in site.reason, (code, site)
                seen_kept.add(site.line)
            elif code != "JM307" or "used other than" not in (site.reason or ""):
                # A create_device_mesh kept for its other uses is fine where no line is marked:
                # it still exists in JAX 0.10.
                assert site.rewritable, (code, site)
    assert seen_kept == set(kept_lines), sorted(set(kept_lines) - seen_kept)


@pytest.mark.parametrize("case", CASES)
def test_sites_are_where_the_lint_rules_report(case):
    """Every finding of JM301/302/307/308 is a site the codemod knows (rewritable or with a reason)."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    rules = tuple(r for r in all_rules() if r.code in TEMPLATES)
    sites = _sites(source)
    for finding in lint_text(source, f"{case}.py", rules, TARGET):
        positions = {(s.line, s.column) for s in sites[finding.code]}
        assert (finding.line, finding.column) in positions, finding


@pytest.mark.parametrize("code", sorted(TEMPLATES))
@pytest.mark.parametrize("case", CASES)
def test_selecting_every_reported_site_is_rewriting_all(case, code):
    source = (FIXTURES / f"{case}.in.py").read_text()
    analyse, rewrite = TEMPLATES[code]
    chosen = frozenset((s.line, s.column) for s in analyse(source))
    assert rewrite(source, chosen) == rewrite(source)


def test_only_the_selected_site_is_rewritten():
    text = (
        "import jax\n"
        "a = jax.device_put_replicated(1.0, jax.devices())\n"
        "b = jax.device_put_replicated(2.0, jax.devices())\n"
    )
    out = rewrite_legacy_device_put(text, frozenset({(3, 5)}))
    assert "a = jax.device_put_replicated(1.0" in out
    assert "b = _device_put_replicated(2.0" in out
    assert rewrite_legacy_device_put(text, frozenset()) == text


def test_positional_sharding_variables_move_together():
    text = (
        "import jax\n"
        "from jax.sharding import PositionalSharding\n"
        "s = jax.sharding.PositionalSharding(jax.devices())\n"
        "t = s.reshape(4, 2)\n"
        "u = PositionalSharding(jax.devices()).reshape(8, 1)\n"
    )
    # Selecting only line 3's mention rewrites s and t (t is derived from s), not u.
    out = rewrite_positional_sharding(text, frozenset({(3, 5)}))
    assert "t = NamedSharding(s.mesh, P(\"x\", \"y\"))" in out
    assert "u = PositionalSharding(jax.devices()).reshape(8, 1)" in out
    assert re.search(r"from jax.sharding import .*PositionalSharding", out)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import jax\nx = jax.device_put(1, jax.devices()[0])\n", id="nothing legacy"),
        pytest.param("import jax\ns = 'jax.sharding.PositionalSharding(d)'  # with mesh:\n", id="strings and comments"),
        pytest.param("import jax\nwith jax.sharding.PositionalSharding(\n", id="syntax error"),
    ],
)
def test_untouched(code):
    assert rewrite_all(code) == code
    assert all(not sites for sites in _sites(code).values()) or "syntax" in code


@pytest.mark.parametrize("case", CASES)
def test_fixing_the_findings_is_running_the_codemods(case):
    """`jaxmigrate --fix --unsafe-fixes` (the rules' fixes, in the fix loop's order) writes what
    the templates write, and a second run finds nothing more to fix."""
    source = (FIXTURES / f"{case}.in.py").read_text()
    rules = tuple(r for r in all_rules() if r.code in TEMPLATES)
    result = fix_text(source, f"{case}.py", rules, TARGET, unsafe=True)
    assert result.text == rewrite_all(source)
    assert not result.errors
    assert all(f.fix is None for f in result.findings), result.findings
    assert fix_text(result.text, f"{case}.py", rules, TARGET, unsafe=True).fixed == 0


def test_kept_sites_say_why_in_the_finding():
    source = (FIXTURES / "positional_kept.in.py").read_text()
    rules = tuple(r for r in all_rules() if r.code == "JM301")
    findings = lint_text(source, "positional_kept.py", rules, TARGET)
    assert findings and all("; not rewritten: " in f.message and f.fix is None for f in findings)


def test_only_the_replication_helpers_are_safe_fixes():
    rules = {r.code: r for r in all_rules()}
    assert {rules[c].fixable.value for c in ("JM102", "JM302")} == {"safe"}
    assert {rules[c].fixable.value for c in ("JM301", "JM307", "JM308")} == {"unsafe"}
