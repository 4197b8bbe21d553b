"""Issue 19: every shape of code a fixer meets - a fix is applied or not offered, never computed and
thrown away (JM001), and a finding is fixed or still reported, never lost."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.findings import Fix, Safety
from jaxmigrate.lint.rule import Rule
from pmap_driver import driven

RULES = registry.all_rules()
TARGET = (0, 10)


def check(text: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in lint_text(text, "t.py", RULES, TARGET)]


def fixed(text: str, unsafe: bool = True):
    text = textwrap.dedent(text)
    result = fix_text(text, "t.py", RULES, TARGET, unsafe=unsafe)
    assert not [e.message for e in result.errors], "a fix was computed and thrown away"
    ast.parse(result.text)
    again = fix_text(result.text, "t.py", RULES, TARGET, unsafe=unsafe)
    assert again.text == result.text and not again.fixed, "a second fix changed the file"
    return result


def test_an_import_in_a_try_body_is_replaced_by_pass():
    result = fixed(
        """
        import jax
        try:
            from jax import tree_map
        except ImportError:
            pass
        y = tree_map(len, {})
        """, unsafe=False)
    assert result.text == textwrap.dedent(
        """
        import jax
        try:
            pass
        except ImportError:
            pass
        y = jax.tree.map(len, {})
        """)


def test_a_legacy_import_after_a_semicolon_goes_with_it():
    result = fixed(driven("step = pmap(lambda v: v, 'i')\nreturn step(x)\n", head="import jax\nimport os; from jax import pmap\n"))
    assert result.text.startswith("import jax\nimport os\n")
    assert "pmap" not in result.text


# -- the fix loop: one bad site must not sink the others -------------------------------------


class SiteCodemodRule(Rule):
    """Reports every ``old_api`` name with a codemod fix; the codemod breaks the file at a name
    written ``old_api`` on a line that says ``# bad`` (a stand-in for a planner's bug at one site)."""

    code = "JM905"
    name = "test-site-codemod"
    summary = "test rule: a codemod per site"
    trigger_words = ("old_api",)
    fixable = Safety.SAFE

    def visit_Name(self, node: ast.Name, ctx) -> None:
        if node.id == "old_api":
            ctx.report(node, "old api", Fix(Safety.SAFE, "use new_api", codemod=f"{__name__}:rename_sites"))


def rename_sites(text: str, sites) -> str:
    lines = text.splitlines(keepends=True)
    for line, column in sorted(sites, reverse=True):
        row = lines[line - 1]
        new = "new_api(((" if "# bad" in row else "new_api"
        lines[line - 1] = row[: column - 1] + new + row[column - 1 + len("old_api"):]
    return "".join(lines)


def test_a_codemod_that_breaks_one_site_still_rewrites_the_others():
    text = "a = old_api\nb = old_api  # bad\nc = old_api\n"
    result = fix_text(text, "t.py", (SiteCodemodRule,), TARGET)
    assert result.text == "a = new_api\nb = old_api  # bad\nc = new_api\n"
    assert result.fixed == 2
    assert [(e.code, e.line) for e in result.errors] == [("JM001", 2)]
    assert [(f.code, f.line) for f in result.findings] == [("JM905", 2)]


def test_nested_pmap_is_declined_with_a_reason_not_advertised():
    # In a driver, where a single pmap would be rewritten: the outer one wrapped the inner.
    text = driven("g = jax.pmap(jax.pmap(f))\nreturn g(x)\n", head="import jax\n\n\ndef f(v):\n    return v\n")
    findings = [f for f in lint_text(text, "t.py", RULES, TARGET) if f.code == "JM101"]
    assert [f.fix for f in findings] == [None, None]
    assert all("nested pmap" in f.message for f in findings)
    assert fixed(text, unsafe=True).text == text


def test_a_pmap_in_an_f_string_is_declined_and_the_others_are_rewritten():
    result = fixed(driven('print(f"{pmap(abs)(x)}")\nh = pmap(lambda v: v * 2)\nreturn h(x)\n',
                          head="import jax\nfrom jax import pmap\n"))
    assert 'print(f"{pmap(abs)(x)}")' in result.text and "h = jax.jit(" in result.text
    (left,) = [f for f in result.findings if f.code == "JM101"]
    assert left.fix is None and "inside an f-string" in left.message


# -- a finding is never lost because something else changed -----------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param(driven("step = jax.pmap(lambda v: v + 1)\nreturn jax.tree.map(lambda v: v[0], step(x))\n"),
                     "JM505", id="JM505 after its pmap's rewrite"),
        pytest.param(driven("step = jax.pmap(jax.random.normal)\n"
                            "keys = jax.random.split(jax.random.PRNGKey(0), jax.local_device_count())\n"
                            "return step(keys)\n"), "JM503", id="JM503 after its pmap's rewrite"),
    ],
)
def test_a_finding_about_pmaps_device_axis_stays_after_the_exact_rewrite(text, code):
    assert code in [c for c, _ in check(text)]
    result = fixed(text)
    assert "jax.shard_map" in result.text
    assert code in [f.code for f in result.findings]


def test_an_axis_the_fixer_invents_does_not_bind_an_unrelated_collective():
    text = ("import jax\nfrom flax import jax_utils\nfrom jax import lax\n\n"
            "params = jax_utils.replicate({'w': 1.0})\n\n\n"
            "def g(x):\n    return lax.psum(x, axis_name='devices')\n\n\n"
            "h = jax.vmap(lambda x: lax.psum(x, 'batch'), axis_name='batch')\n")
    assert ("JM401", 9) in check(text)
    result = fixed(text)
    assert "jax.device_put(" in result.text and '("devices_1",)' in result.text
    assert "JM401" in [f.code for f in result.findings]


def test_an_unnamed_pmap_rewritten_keeps_an_unbound_axis_unbound():
    # `psum(x, "devices")` under a bare pmap raises (unbound axis); the rewrite must not make it run.
    text = driven('step = jax.pmap(lambda v: lax.psum(v, "devices"))\nreturn step(x)\n',
                  head="import jax\nfrom jax import lax\n")
    result = fixed(text)
    assert 'P("devices_1")' in result.text and 'lax.psum(v, "devices")' in result.text


def test_a_try_import_made_unused_by_one_fix_is_fixed_in_one_run():
    # Was: JM307's fix rejected (IndentationError) in the first run, applied by the second.
    result = fixed(
        """
        import jax
        from flax import jax_utils
        from jax.experimental import mesh_utils
        try:
            from jax.sharding import Mesh
        except ImportError:
            pass
        devices = mesh_utils.create_device_mesh((8,))
        mesh = Mesh(devices, ("x",))
        params = jax_utils.replicate({"w": 1.0})
        """)
    assert result.fixed == 2 and not result.findings
    assert "mesh = jax.make_mesh((8,)" in result.text


def test_the_same_import_in_try_and_except_stays_one_name_after_the_fix():
    # The except branch is a fallback (not reported); after the try branch is rewritten, `Mesh`
    # must not turn ambiguous: `with mesh:` (JM308) was no longer reported.
    text = ("import jax\ntry:\n    from jax.experimental.maps import Mesh\nexcept ImportError:\n"
            "    from jax.experimental.maps import Mesh\nmesh = Mesh(jax.devices(), ('x',))\nwith mesh:\n    pass\n")
    assert check(text) == [("JM303", 3), ("JM308", 7)]
    result = fixed(text, unsafe=False)
    assert "    from jax.sharding import Mesh\nexcept" in result.text
    assert [(f.code, f.line) for f in result.findings] == [("JM308", 7)]
    assert "with jax.set_mesh(mesh):" in fixed(text).text


def test_a_with_mesh_the_fix_rewrites_is_one_check_reported_with_its_fix():
    # `Mesh` imported from maps, then from sharding: below both imports it can only be
    # jax.sharding's, so check offers the JM308 fix that --fix applies (check used to call the name
    # ambiguous and offer none, and --fix then rewrote it once JM303 had made the imports agree).
    text = ("import jax\nfrom jax.experimental.maps import Mesh\nfrom jax.sharding import Mesh\n"
            "mesh1 = Mesh(jax.devices(), ('x',))\nwith mesh1:\n    pass\n")
    findings = lint_text(text, "t.py", RULES, TARGET)
    assert [(f.code, f.line, f.fix is None) for f in findings] == [("JM303", 2, False), ("JM308", 5, False)]
    assert "with jax.set_mesh(mesh1):" in fixed(text).text


def test_the_old_and_the_new_spelling_of_one_class_are_one_name():
    # Under a condition the name may come from either import, but maps.Mesh is sharding.Mesh (the
    # JM303 move): check offers the JM308 fix, the one --fix applies after JM303.
    text = ("import jax\nfrom jax.sharding import Mesh\nif jax.__version__ < '0.4':\n"
            "    from jax.experimental.maps import Mesh\n"
            "mesh1 = Mesh(jax.devices(), ('x',))\nwith mesh1:\n    pass\n")
    jm308 = [f for f in lint_text(text, "t.py", RULES, TARGET) if f.code == "JM308"]
    assert len(jm308) == 1 and jm308[0].fix is not None
    assert "with jax.set_mesh(mesh1):" in fixed(text).text


def test_two_different_imports_of_one_name_get_no_fix():
    text = ("import jax\nfrom jax.sharding import Mesh\nif jax.__version__ < '0.4':\n"
            "    from mylib import Mesh\n"
            "mesh1 = Mesh(jax.devices(), ('x',))\nwith mesh1:\n    pass\n")
    # Not provably a jax mesh: not reported, and left alone.
    assert not [f for f in lint_text(text, "t.py", RULES, TARGET) if f.code == "JM308"]
    assert "with mesh1:" in fixed(text).text


def test_a_with_over_a_legacy_mesh_offers_the_fix_fix_applies():
    # maps.Mesh is jax.sharding.Mesh from before axis types (all Auto). check offered no JM308 fix
    # (and said nothing of why), then --fix rewrote the `with` once JM303 had moved the import.
    text = ("from jax.experimental.maps import Mesh\nimport jax\nmesh1 = Mesh(jax.devices(), ('x',))\n"
            "with mesh1:\n    pass\n")
    findings = lint_text(text, "t.py", RULES, TARGET)
    assert [(f.code, f.line, f.fix is None) for f in findings] == [("JM303", 1, False), ("JM308", 4, False)]
    assert fixed(text).text == ("from jax.sharding import Mesh\nimport jax\nmesh1 = Mesh(jax.devices(), ('x',))\n"
                                "with jax.set_mesh(mesh1):\n    pass\n")


def test_jax_imported_again_under_a_condition_is_still_jax_for_the_fix():
    # `import jax.experimental.pjit` in an `if` rebinds `jax` to the same module: check offers the
    # JM308 fix (it called `jax` "bound to something else" and offered none, and --fix then
    # rewrote the line once JM201 had removed that import).
    text = ("import jax\nfrom jax.sharding import Mesh\n"
            "mesh1 = Mesh(jax.devices(), ('x',))\nwith mesh1:\n    pass\n"
            "if True:\n    import jax.experimental.pjit\n    p3 = jax.experimental.pjit.pjit(abs)\n")
    jm308 = [f for f in lint_text(text, "t.py", RULES, TARGET) if f.code == "JM308"]
    assert len(jm308) == 1 and jm308[0].fix is not None
    assert "with jax.set_mesh(mesh1):" in fixed(text).text
