"""pmap -> jit(shard_map(...)): fixture pairs, idempotence, per-site reasons, positions.

Regenerate the expected outputs with ``JAXMIGRATE_UPDATE_FIXTURES=1 pytest tests/test_migrate_pmap.py``
and review the diff like code.
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
from pathlib import Path

import pytest

from jaxmigrate.migrate.pmap_to_shard_map import rewrite_module
from jaxmigrate.migrate.pmap_to_shard_map import fix

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "pmap_to_shard_map"
CASES = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("JAXMIGRATE_UPDATE_FIXTURES") == "1"
KEPT = re.compile(r"#\s*kept:\s*(?P<reason>.+)$")


def test_every_case_has_a_fixture_pair():
    assert CASES, FIXTURES
    outs = sorted(p.name.removesuffix(".out.py") for p in FIXTURES.glob("*.out.py"))
    assert outs == CASES


@pytest.mark.parametrize("case", CASES)
def test_fixture(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected_path = FIXTURES / f"{case}.out.py"
    result = rewrite_module(source)
    if UPDATE:
        expected_path.write_text(result.text)
    assert result.text == expected_path.read_text()
    ast.parse(result.text)

    # A `# kept: <part of the reason>` on a line marks a site that must stay, with that reason;
    # every other site must have been rewritten.
    lines = source.splitlines()
    for site in result.sites:
        marker = KEPT.search(lines[site.line - 1])
        if marker:
            assert not site.rewritten, site
            assert marker["reason"].strip() in site.reason, site
        else:
            assert site.rewritten, site
    kept_lines = {i + 1 for i, line in enumerate(lines) if KEPT.search(line)}
    assert kept_lines <= {s.line for s in result.sites if not s.rewritten}
    if not any(s.rewritten for s in result.sites):
        assert result.text == source

    again = rewrite_module(result.text)
    assert again.text == result.text, "not idempotent"
    assert not any(s.rewritten for s in again.sites)


def _rewrite(code: str):
    return rewrite_module(textwrap.dedent(code))


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import jax\nx = jax.vmap(f)\n", id="no pmap at all"),
        pytest.param("def pmap(f):\n    return f\n\nstep = pmap(g)\n", id="local def pmap"),
        pytest.param("from mylib import pmap\nstep = pmap(f)\n", id="another library's pmap"),
        pytest.param("import jax\nname = 'jax.pmap(f)'  # jax.pmap(f)\n", id="strings and comments"),
        pytest.param("import jax\nstep = jax.pmap(\n", id="syntax error"),
    ],
)
def test_untouched(code):
    result = _rewrite(code)
    assert result.text == textwrap.dedent(code)
    assert result.sites == []


def test_only_rewrites_the_selected_sites_and_reuses_the_helper():
    code = "import jax\n\na = jax.pmap(f)\nb = jax.pmap(g)\n"
    first = rewrite_module(code, only={(3, 5)})
    assert [s.rewritten for s in first.sites] == [True, False]
    assert first.sites[1].reason == "not selected"
    assert "b = jax.pmap(g)" in first.text
    # The second pass finds the helper the first one wrote and uses it, not a second copy.
    b_line = next(i for i, line in enumerate(first.text.splitlines(), 1) if line.startswith("b ="))
    second = rewrite_module(first.text, only={(b_line, 5)})
    assert second.text.count("def _shard_map_like_pmap") == 1
    assert "b = jax.jit(_shard_map_like_pmap(g))" in second.text
    assert fix(code, {(3, 5), (4, 5)}) == rewrite_module(code).text


def test_positions_count_characters_not_bytes():
    code = 'import jax\n\nx = ("é", jax.pmap(f))\n'
    result = rewrite_module(code)
    assert [(s.line, s.column, s.rewritten) for s in result.sites] == [(3, 11, True)]
    assert 'x = ("é", jax.jit(_shard_map_like_pmap(f)))' in result.text


def test_keeps_crlf_newlines_and_two_space_indentation():
    code = "import jax\r\n\r\n\r\ndef g(x):\r\n  return x\r\n\r\n\r\nstep = jax.pmap(g)\r\n"
    result = rewrite_module(code)
    assert "\n" not in result.text.replace("\r\n", "")
    assert "\r\n  def is_none(ax):\r\n    return ax is None\r\n" in result.text
    assert rewrite_module(result.text).text == result.text


def test_a_foreign_helper_name_blocks_the_rewrite():
    code = "import jax\n\ndef _shard_map_like_pmap(f):\n    return f\n\nstep = jax.pmap(g)\n"
    result = rewrite_module(code)
    assert result.text == code
    assert "already defined" in result.sites[0].reason


def test_jax_bound_to_something_else_blocks_the_rewrite():
    code = "from jax import pmap\njax = None\nstep = pmap(g)\n"
    result = rewrite_module(code)
    assert result.text == code
    assert "`jax` is bound to something other" in result.sites[0].reason


def test_functools_alias_is_reused():
    code = "import functools as ft\nimport jax\n\nstep = jax.pmap(g)\n"
    result = rewrite_module(code)
    assert "@ft.wraps(f)" in result.text
    assert "import functools\n" not in result.text
