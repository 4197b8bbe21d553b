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

from jaxmigrate.migrate.pmap_to_shard_map import fix, rewrite_module
from pmap_driver import driven, line_of

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
            assert not site.rewritable, site
            assert marker["reason"].strip() in site.reason, site
        else:
            assert site.rewritable, site
    kept_lines = {i + 1 for i, line in enumerate(lines) if KEPT.search(line)}
    assert kept_lines <= {s.line for s in result.sites if not s.rewritable}
    if not any(s.rewritable for s in result.sites):
        assert result.text == source

    again = rewrite_module(result.text)
    assert again.text == result.text, "not idempotent"
    assert not any(s.rewritable for s in again.sites)


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


def test_only_rewrites_the_selected_sites_and_reuses_the_mesh():
    code = driven("a = jax.pmap(f, 'i')\nb = jax.pmap(g, 'i')\nreturn a(x), b(x)\n")
    a, b = (line_of(code, "a ="), 9), (line_of(code, "b ="), 9)
    first = rewrite_module(code, only={a})
    assert [s.rewritable for s in first.sites] == [True, False]
    assert first.sites[1].reason == "not selected"
    assert "    b = jax.pmap(g, 'i')" in first.text
    # The second pass finds the mesh the first one wrote in the driver, and uses it rather than
    # making another.
    second = rewrite_module(first.text, only={(line_of(first.text, "b ="), 9)})
    assert second.text.count("make_mesh") == 1
    assert "    b = jax.jit(jax.shard_map(jax.vmap(g), mesh=mesh, in_specs=P('i'), out_specs=P('i'), check_vma=False))" in _unbroken(second.text)
    assert fix(code, {a, b}) == rewrite_module(code).text


def test_positions_count_characters_not_bytes():
    code = driven('return "é" and jax.pmap(f, "i")(x)\n')
    result = rewrite_module(code)
    assert [(s.line, s.column, s.rewritable) for s in result.sites] == [(line_of(code, "return"), 20, True)]
    assert 'return "é" and jax.jit(jax.shard_map(jax.vmap(f), mesh=mesh, in_specs=P("i"),' in _unbroken(result.text)


def test_keeps_crlf_newlines_and_two_space_indentation():
    code = driven("step = jax.pmap(\n  g,\n  axis_name='i',\n)\nreturn step(x)\n",
                   head="import jax\r\n\r\n\r\ndef g(x):\r\n  return x\r\n", indent="  ", newline="\r\n")
    result = rewrite_module(code)
    assert result.sites[0].rewritable
    assert "\n" not in result.text.replace("\r\n", "")
    assert ("  step = jax.jit(\r\n    jax.shard_map(\r\n      jax.vmap(g),\r\n      mesh=mesh,\r\n"
            "      in_specs=P('i'),\r\n      out_specs=P('i'),\r\n      check_vma=False,\r\n    ),\r\n  )\r\n"
            ) in result.text
    assert "\r\n  mesh = jax.make_mesh(" in result.text
    assert rewrite_module(result.text).text == result.text


def test_the_mesh_goes_after_the_drivers_setup_and_above_the_comments_and_decorators_of_its_statement():
    code = textwrap.dedent("""\
        import os

        import jax

        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"


        def main():
            x = jax.numpy.ones(jax.device_count() * 2).reshape((jax.device_count(), 2))

            # The step, mapped over devices.
            @jax.named_call
            @jax.pmap
            def step(x):
                return x

            return step(x)


        if __name__ == "__main__":
            main()
        """)
    text = _unbroken(rewrite_module(code).text)
    ast.parse(text)  # the mesh between two decorators was a syntax error
    lines = text.splitlines()
    setup = lines.index("    x = jax.numpy.ones(jax.device_count() * 2).reshape((jax.device_count(), 2))")
    mesh = next(i for i, line in enumerate(lines) if line.startswith("    mesh = "))
    assert setup < mesh < lines.index("    # The step, mapped over devices.")
    assert lines[mesh + 1: mesh + 4] == ["", "    # The step, mapped over devices.", "    @jax.named_call"]


def test_a_mesh_of_another_shape_is_not_reused_nor_rebound():
    code = driven("step = jax.pmap(f, 'i')\nreturn step(x)\n", head="import jax\n\nmesh = jax.make_mesh((4,), ('i',))\n")
    text = _unbroken(rewrite_module(code).text)
    assert "\nmesh = jax.make_mesh((4,), ('i',))\n" in text
    assert "    i_mesh = jax.make_mesh((jax.device_count(),), ('i',), axis_types=(jax.sharding.AxisType.Auto,))" in text
    assert "mesh=i_mesh" in text


def test_an_axis_name_constant_is_kept_by_name():
    code = driven("step = jax.pmap(f, axis_name=AXIS)\nreturn step(x)\n", head='import jax\n\nAXIS = "batch"\n')
    text = _unbroken(rewrite_module(code).text)
    assert "    mesh = jax.make_mesh((jax.device_count(),), (AXIS,)," in text
    assert "in_specs=P(AXIS), out_specs=P(AXIS)" in text


def test_an_unnamed_pmap_keeps_the_internal_axis_name_when_the_module_uses_it():
    code = driven('step = jax.pmap(lambda x: jax.lax.psum(x, "_internal_pmap_axis_name"))\nreturn step(x)\n')
    assert '("_internal_pmap_axis_name",)' in rewrite_module(code).text
    assert '("devices",)' in rewrite_module(driven("return jax.pmap(f)(x)\n")).text


def test_static_arguments_are_jits_and_pass_shard_map_and_vmap_untouched():
    code = driven("step = jax.pmap(f, 'i', static_broadcasted_argnums=1)\nreturn step(x, 2, x)\n",
                   head="import jax\n\n\ndef f(x, n, y):\n    return x * n + y\n")
    assert ("    step = jax.jit(jax.shard_map(jax.vmap(f, in_axes=(0, None, 0)), mesh=mesh, "
            "in_specs=(P('i'), None, P('i')), out_specs=P('i'), check_vma=False), static_argnums=1)"
            ) in _unbroken(rewrite_module(code).text)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import jax\ny = jax.pmap(f)(x, k=1)\n", id="applied at once"),
        pytest.param("import jax\nstep = jax.pmap(f)\ny = step(x, **extra)\n", id="through its name"),
        pytest.param("import jax\nclass T:\n    @staticmethod\n    @jax.pmap\n    def step(x, k):\n"
                     "        return x\nT.step(1, k=2)\n", id="a method, by attribute"),
    ],
)
def test_calls_with_keyword_arguments_block_the_rewrite(code):
    (site,) = rewrite_module(code).sites
    assert not site.rewritable and "keyword arguments" in site.reason


def test_jax_bound_to_something_else_blocks_the_rewrite():
    code = ("from jax import device_count, pmap\njax = None\n\n\ndef main():\n"
            "    x = numpy.ones(device_count() * 2).reshape((device_count(), 2))\n    return pmap(g)(x)\n\n\n"
            "if __name__ == '__main__':\n    main()\n")
    result = rewrite_module(code)
    assert result.text == code
    assert "`jax` is bound to something other" in result.sites[0].reason


def test_functools_alias_is_reused():
    code = driven("@jax.pmap\ndef step(x):\n    return x\n\nreturn step(x)\n", head="import functools as ft\nimport jax\n")
    result = rewrite_module(code)
    assert "@ft.partial(jax.shard_map, mesh=mesh," in _unbroken(result.text)
    assert "import functools\n" not in result.text and "from functools" not in result.text


def test_an_axis_name_read_from_another_module_is_spelled_as_written():
    code = textwrap.dedent("""\
        import jax
        from praxis import base_layer

        AXIS = base_layer.PMAP_PARALLEL_AXIS_NAME


        def main(step):
            x = jax.numpy.ones(jax.device_count() * 2).reshape((jax.device_count(), 2))
            return jax.pmap(step, axis_name=AXIS)(x), jax.pmap(step, axis_name=base_layer.PMAP_PARALLEL_AXIS_NAME)(x)


        if __name__ == "__main__":
            main(lambda x: x)
        """)
    text = _unbroken(rewrite_module(code).text)
    assert text.count("make_mesh") == 1  # one axis, read two ways
    assert "    mesh = jax.make_mesh((jax.device_count(),), (AXIS,)," in text
    assert "in_specs=P(AXIS)" in text and "in_specs=P(base_layer.PMAP_PARALLEL_AXIS_NAME)" in text


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import jax\ndef f(g, axis):\n    return jax.pmap(g, axis_name=axis)\n", id="a parameter"),
        pytest.param("import jax\nA = 'i'\nA = 'j'\nstep = jax.pmap(g, axis_name=A)\n", id="bound twice"),
        pytest.param("import jax\nfrom m import A\ndef f():\n    A = 'j'\nstep = jax.pmap(g, axis_name=A)\n",
                     id="rebound in a function"),
    ],
)
def test_an_axis_name_that_may_differ_at_module_level_blocks_the_rewrite(code):
    (site,) = rewrite_module(code).sites
    assert not site.rewritable and "`axis_name=`" in site.reason


def test_a_multi_line_call_keeps_its_own_continuation_indent():
    code = driven("p = jax.pmap(\n      step, donate_argnums=(0,), axis_name='i')\nreturn p(x)\n", indent="  ")
    text = rewrite_module(code).text
    assert ("  p = jax.jit(\n        jax.shard_map(\n              jax.vmap(step),\n              mesh=mesh,\n"
            "              in_specs=P('i'),\n              out_specs=P('i'),\n              check_vma=False,\n"
            "        ),\n        donate_argnums=(0,),\n  )\n  return p(x)\n") in text



@pytest.mark.parametrize("donated", ["tuple()", "tuple([0])", "list((0,))", "[0]"])
def test_argnums_built_by_tuple_or_list_of_a_literal_are_literals(donated):
    code = driven(f"p = jax.pmap(step, 'i', donate_argnums={donated})\nreturn p(x)\n")
    (site,) = rewrite_module(code).sites
    assert site.rewritable, site.reason
    assert f"donate_argnums={donated}," in rewrite_module(code).text


def test_tuple_bound_to_something_else_is_no_literal():
    code = driven("p = jax.pmap(step, 'i', donate_argnums=tuple())\nreturn p(x)\n").replace(
        "def main():\n", "def main(tuple=list):\n")
    (site,) = rewrite_module(code).sites
    assert not site.rewritable and "`donate_argnums=` is not a literal" in site.reason

def test_jax_imported_in_a_function_only_is_imported_at_module_level_for_the_mesh():
    code = driven("return jax.pmap(g, 'i')(x)\n", head="")
    code = code.replace("def main():\n", "def main():\n    import jax\n")
    text = _unbroken(rewrite_module(code).text)
    assert text.startswith("import jax\n")
    assert "    mesh = jax.make_mesh(" in text and "    return jax.jit(jax.shard_map(" in text


def _unbroken(text: str) -> str:
    """``text`` with the line breaks the layout puts in a too-long bracket undone (one element a
    line and a trailing comma), so a test can name the code a rewrite writes in one line."""
    text = re.sub(r"([(\[{])\n[ \t]*", r"\1", text)
    text = re.sub(r",\n[ \t]*([)\]}])", r"\1", text)
    return re.sub(r",\n[ \t]*", ", ", text)
