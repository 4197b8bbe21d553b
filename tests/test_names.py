"""The resolver: which qualified name(s) an expression may refer to."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxmigrate.names import LOCAL, NameResolver


def _resolve(source: str, marker: str = "TARGET"):
    """Candidates of the expression assigned to `TARGET` (its last assignment) in `source`."""
    tree = ast.parse(textwrap.dedent(source))
    resolver = NameResolver(tree)
    values = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == marker for t in node.targets)
    ]
    return resolver, values[-1]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("import jax\nTARGET = jax.pmap", {"jax.pmap"}, id="import-module"),
        pytest.param("import jax as J\nTARGET = J.pmap", {"jax.pmap"}, id="import-as"),
        pytest.param("import jax.experimental.pjit\nTARGET = jax.experimental.pjit.pjit",
                     {"jax.experimental.pjit.pjit"}, id="import-dotted"),
        pytest.param("import jax.experimental.pjit as pj\nTARGET = pj.pjit",
                     {"jax.experimental.pjit.pjit"}, id="import-dotted-as"),
        pytest.param("from jax import pmap as pm\nTARGET = pm", {"jax.pmap"}, id="from-import-as"),
        pytest.param("from jax.experimental import pjit\nTARGET = pjit.pjit",
                     {"jax.experimental.pjit.pjit"}, id="from-import-module"),
        pytest.param("from jax import *\nTARGET = pmap", {"jax.pmap"}, id="star-import"),
        pytest.param("from . import jax\nTARGET = jax.pmap", {".jax.pmap"}, id="relative-import"),
        pytest.param("from .pkg import pmap\nTARGET = pmap", {".pkg.pmap"}, id="relative-from-module"),
        pytest.param("import jax\npm = jax.pmap\nTARGET = pm", {"jax.pmap"}, id="rebinding"),
        pytest.param("try:\n    from jax.sharding import Mesh\nexcept ImportError:\n"
                     "    from jax.experimental.maps import Mesh\nTARGET = Mesh",
                     {"jax.sharding.Mesh"}, id="an except-ImportError import is the try import's fallback"),
        pytest.param("try:\n    from jax.sharding import Mesh\nexcept ValueError:\n"
                     "    from jax.experimental.maps import Mesh\nTARGET = Mesh",
                     {"jax.sharding.Mesh", "jax.experimental.maps.Mesh"}, id="another except: two candidates"),
        pytest.param("try:\n    from jax import pmap\nexcept ImportError:\n    pmap = None\nTARGET = pmap",
                     {"jax.pmap", LOCAL}, id="a fallback value, not an import: two candidates"),
        pytest.param("import jax\nTARGET = undefined_name", set(), id="unbound-builtin-like"),
        pytest.param("from jax import pmap\ndef pmap(f):\n    return f\nTARGET = pmap",
                     {"jax.pmap", LOCAL}, id="import-and-def-ambiguous"),
    ],
)
def test_candidates(source, expected):
    resolver, expr = _resolve(source)
    assert resolver.candidates(expr) == expected


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import jax\ndef f(jax):\n    TARGET = jax.pmap", id="parameter-shadows"),
        pytest.param("import jax\ndef f():\n    def pmap(g):\n        return g\n    TARGET = pmap",
                     id="local-def"),
        pytest.param("from jax import pmap\nclass C:\n    pmap = 1\n    TARGET = pmap", id="class-scope"),
        pytest.param("import jax\nclass C:\n    def run(self):\n        TARGET = self.pmap", id="self-attribute"),
        pytest.param("import jax\nTARGET = [jax.pmap for jax in mods]", id="comprehension-variable"),
        pytest.param("import jax\nfor jax in mods:\n    pass\nTARGET = jax", id="loop-rebinding-is-local"),
    ],
)
def test_shadowing_is_local(source):
    resolver, expr = _resolve(source)
    if isinstance(expr, ast.ListComp):
        expr = expr.elt
    assert "jax.pmap" not in resolver.candidates(expr)
    assert resolver.qualified_name(expr) is None


def test_loop_rebinding_keeps_both_candidates():
    resolver, expr = _resolve("import jax\nfor jax in mods:\n    pass\nTARGET = jax")
    assert resolver.candidates(expr) == {"jax", LOCAL}


def test_class_scope_does_not_leak_into_methods():
    source = "from jax import pmap\nclass C:\n    pmap = 1\n    def m(self):\n        TARGET = pmap\n"
    resolver, expr = _resolve(source)
    assert resolver.candidates(expr) == {"jax.pmap"}


def test_global_declaration_reads_module_binding():
    source = "import jax\ndef f():\n    global jax\n    TARGET = jax.pmap\n"
    resolver, expr = _resolve(source)
    assert resolver.qualified_name(expr) == "jax.pmap"


def test_nonlocal_reads_enclosing_binding():
    source = (
        "import jax\ndef outer():\n    jax = object()\n    def inner():\n        nonlocal jax\n"
        "        TARGET = jax.pmap\n"
    )
    resolver, expr = _resolve(source)
    assert resolver.candidates(expr) == {LOCAL}


def test_comprehension_sees_enclosing_import():
    resolver, expr = _resolve("import jax\nTARGET = [jax.pmap(f) for f in fs]")
    assert resolver.qualified_name(expr.elt.func) == "jax.pmap"


def test_partial_records_bound_keywords():
    source = (
        "import functools\nfrom jax.experimental.pjit import pjit\n"
        "p = functools.partial(pjit, in_axis_resources=1)\nTARGET = functools.partial(p, donate_argnums=0)\n"
    )
    resolver, expr = _resolve(source)
    (target,) = resolver.resolve(expr)
    assert target.name == "jax.experimental.pjit.pjit"
    assert len(target.partials) == 2 and target.partials[0] is expr
    assert [kw.arg for kw in target.bound_keywords] == ["in_axis_resources", "donate_argnums"]
    assert resolver.qualified_name(expr) is None  # wrapped in partial: not the bare function


def test_from_functools_import_partial():
    source = "from functools import partial\nimport jax\nTARGET = partial(jax.pmap, axis_name='i')\n"
    resolver, expr = _resolve(source)
    (target,) = resolver.resolve(expr)
    assert (target.name, [kw.arg for kw in target.bound_keywords]) == ("jax.pmap", ["axis_name"])


def test_decorator_expression_resolves():
    source = "import jax\n@jax.pmap\ndef step(x):\n    return x\n"
    tree = ast.parse(source)
    decorator = tree.body[1].decorator_list[0]
    assert NameResolver(tree).qualified_name(decorator) == "jax.pmap"


def test_decorated_function_name_is_local():
    source = "import jax\n@jax.pmap\ndef step(x):\n    return x\nTARGET = step\n"
    resolver, expr = _resolve(source)
    assert resolver.candidates(expr) == {LOCAL}


def test_self_referencing_rebinding_terminates():
    resolver, expr = _resolve("import jax\nx = x\nTARGET = x")
    assert resolver.candidates(expr) == {LOCAL}


def test_imports_lists_every_scope():
    tree = ast.parse("import jax\ndef f():\n    from jax import pmap\n")
    names = sorted(binding.qualname for binding, _ in NameResolver(tree).imports())
    assert names == ["jax", "jax.pmap"]


def test_star_import_only_at_module_level():
    tree = ast.parse("from jax import *\n")
    assert NameResolver(tree).star_imports == ["jax"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("import jax\nTARGET = jax.pmap", ["jax.pmap"], id="attribute-is-its-own-mention"),
        pytest.param("from jax import pmap as pm\nTARGET = pm", ["alias pmap"], id="import-alias"),
        pytest.param("import jax\npm = jax.pmap\nTARGET = pm", ["jax.pmap"], id="through-rebinding"),
        pytest.param("import jax, functools\npp = functools.partial(jax.pmap, axis_name='i')\nTARGET = pp",
                     ["jax.pmap"], id="through-partial"),
        pytest.param("from jax import *\nTARGET = pmap", ["pmap"], id="star-import-name"),
        pytest.param("def f(x):\n    TARGET = x", [], id="parameter-has-none"),
    ],
)
def test_mentions_are_where_the_name_is_spelled_out(source, expected):
    resolver, expr = _resolve(source)
    shown = [
        f"alias {node.name}" if isinstance(node, ast.alias) else ast.unparse(node)
        for node in resolver.mentions(expr)
    ]
    assert shown == expected


@pytest.mark.parametrize("source, expected", [
    # Read below both imports (at module level or in a function defined below): only the last.
    ("from jax.experimental.maps import Mesh\nfrom jax.sharding import Mesh\nMesh", {"jax.sharding.Mesh"}),
    ("from jax.experimental.maps import Mesh\nfrom jax.sharding import Mesh\ndef f():\n    return Mesh",
     {"jax.sharding.Mesh"}),
    # A function defined between them may run before the second import: both.
    ("from jax.experimental.maps import Mesh\ndef f():\n    return Mesh\nfrom jax.sharding import Mesh",
     {"jax.experimental.maps.Mesh", "jax.sharding.Mesh"}),
    # Read between them at module level: still both (flow-insensitive outside this one case).
    ("from jax.experimental.maps import Mesh\nMesh\nfrom jax.sharding import Mesh",
     {"jax.experimental.maps.Mesh", "jax.sharding.Mesh"}),
    # An import under a condition, or a def among the bindings: every candidate.
    ("from jax.sharding import Mesh\nif x:\n    from jax.experimental.maps import Mesh\nMesh",
     {"jax.experimental.maps.Mesh", "jax.sharding.Mesh"}),
    ("from jax.sharding import Mesh\ndef Mesh(): pass\nfrom jax.sharding import Mesh\nMesh",
     {"jax.sharding.Mesh", LOCAL}),
])
def test_straight_line_imports_read_by_the_last(source, expected):
    tree = ast.parse(source)
    last = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Mesh"][-1]
    assert NameResolver(tree).candidates(last) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("TARGET = len", "len", id="unbound"),
        pytest.param("import builtins\nTARGET = builtins.len", "len", id="spelled-out"),
        pytest.param("def len(x):\n    return 0\nTARGET = len", None, id="shadowed-by-a-def"),
        pytest.param("def f(len):\n    TARGET = len", None, id="a-parameter"),
        pytest.param("from numpy import *\nTARGET = len", None, id="a-star-import-may-bind-it"),
        pytest.param("import jax\nTARGET = jax.device_count", None, id="not-a-builtin"),
    ],
)
def test_builtin_is_a_name_nothing_in_the_module_may_bind(source, expected):
    resolver, value = _resolve(source)
    assert resolver.builtin(value) == expected
