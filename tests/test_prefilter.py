"""The pre-filter: which rules could fire on a text, from the text alone, before any parse."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from jaxmigrate.lint import prefilter
from jaxmigrate.lint.checker import lint_text
from jaxmigrate.lint.prefilter import imported_names, read_imports, rules_reached, rules_triggered
from jaxmigrate.lint.registry import all_rules

REPO = Path(__file__).parents[1]
TARGET = (0, 10)


@pytest.mark.parametrize(
    "text, bound",
    [
        ("import jax\n", {"jax"}),
        ("import jax.numpy as jnp, numpy\n", {"jax.numpy", "numpy"}),
        ("import jax.experimental.pjit\n", {"jax"}),  # binds `jax`, as Python does
        ("from jax import pmap as pm, lax\n", {"jax.pmap", "jax.lax"}),
        ("from jax.experimental.maps import *\n", {"jax.experimental.maps"}),
        ("from jax import (\n    pmap,  # the old one\n    jit as J,\n)\n", {"jax.pmap", "jax.jit"}),
        ("from jax import(pmap)\n", {"jax.pmap"}),
        ("from jax import (a,  # see f(x)\n  b)\n", {"jax.a", "jax.b"}),  # brackets in a comment
        ("from . import tree_util\nfrom .core import pmap\n", set()),  # relative: nothing absolute
        ("def f():\n    import jax\n", {"jax"}),
        ("# import jax is what users write\nx = 1\n", set()),  # a comment line
        ('"""\n>>> import jax\n"""\n', set()),  # a doctest line
        ("from jax._src import core\nx = core.devices\n", {"jax._src.core"}),
    ],
)
def test_imports_are_read_as_the_resolver_binds_them(text, bound):
    assert imported_names(text) == bound


@pytest.mark.parametrize(
    "text",
    [
        "x = 1; import jax\n",  # after `;`
        "if TYPE_CHECKING: import jax\n",  # a one-line block
        "from jax import a, \\\n    b\n",  # a backslash continuation
        "from jax \\\nimport pmap\n",  # ... before a line that looks like an import of its own
        "from jax \\\r\nimport pmap\r\n",
        '"""Loaded at import time."""\n',  # prose in a docstring
        's = "x"; from jax import pmap\n',
    ],
)
def test_imports_it_cannot_read_leave_every_rule_in(text):
    assert imported_names(text) is None
    assert rules_reached(text, all_rules()) == all_rules()


def test_imports_read_from_the_text_include_every_one_the_parser_sees_in_every_file_here():
    # Include: an import written in a string (a `python -c` script) is read too, which only
    # keeps more rules in.
    checked = exact = 0
    for path in sorted(REPO.rglob("*.py")):
        if ".git" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        found = imported_names(text)
        if found is None:
            continue
        checked += 1
        parsed = _bound_by_parser(ast.parse(text))
        assert found >= parsed, path
        exact += found == parsed
    assert checked > 200 and exact > 0.95 * checked


def _bound_by_parser(tree: ast.Module) -> set[str]:
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update(a.name if a.asname else a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            bound.update(node.module if a.name == "*" else f"{node.module}.{a.name}" for a in node.names)
    return bound


def test_a_file_that_imports_the_words_from_elsewhere_is_not_parsed():
    # jax's own source: the trigger words everywhere, none of them jax's public (legacy) names.
    internal = "from jax._src import xla_bridge\nfrom jax._src.tree_util import tree_flatten\n" \
               "n = len(xla_bridge.devices())\nleaves, tree = tree_flatten(x)\n"
    assert rules_triggered(internal, all_rules(), TARGET) == ()
    assert lint_text("def broken(:\n" + internal, "t.py", all_rules(), TARGET) == []  # never parsed

    public = "import jax\nleaves = jax.tree_flatten(x)\n"
    assert [rule.code for rule in rules_triggered(public, all_rules(), TARGET)] == ["JM601"]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_every_invalid_example_reaches_its_rule(rule):
    from jaxmigrate.lint import suppressions

    for example in rule.INVALID:
        if rule.code == suppressions.UNUSED_NOQA:  # read after the other rules, by its own pre-filter
            assert suppressions.may_need_audit(example.code) and rule not in rules_triggered(example.code, (rule,), TARGET)
        else:
            assert rule in rules_triggered(example.code, (rule,), TARGET), example.code


def _texts() -> list[tuple[str, str]]:
    paths = [*sorted((REPO / "fixtures").rglob("*.py")), *sorted((REPO / "examples").rglob("*.py"))]
    jax = importlib.util.find_spec("jax")  # found, never imported: its own tree is a real test
    if jax is not None and jax.origin:
        paths += sorted(Path(jax.origin).parent.rglob("*.py"))
    return [(str(path), path.read_text(encoding="utf-8", errors="replace")) for path in paths]


def test_the_prefilter_changes_no_finding_on_the_fixtures_the_examples_and_jax_itself(monkeypatch):
    """Reach, trigger words and the rules' second looks together: with every rule run on every
    file, the findings are the same."""
    from jaxmigrate.lint import checker

    texts = _texts()
    rules = all_rules()
    filtered = [lint_text(text, path, rules, TARGET) for path, text in texts]
    parsed = sum(1 for _, text in texts if rules_triggered(text, rules, TARGET))
    monkeypatch.setattr(checker, "rules_triggered", lambda text, rules, target_jax: rules)
    unfiltered = [lint_text(text, path, rules, TARGET) for path, text in texts]
    assert filtered == unfiltered
    assert sum(map(len, unfiltered)) > 500
    assert parsed < len(texts) / 2  # (the pre-filter is on in the first run: it leaves most files unparsed)


def test_the_trigger_words_found_are_exactly_those_a_regex_of_each_whole_word_finds():
    rules = all_rules()
    words = sorted({w for rule in rules for w in rule.triggers(TARGET)}, key=len, reverse=True)
    plain = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b")
    texts = [text for _, text in _texts()[:400]]
    texts.append(" ".join(words) + " " + " ".join(w + "x" for w in words) + " " + " ".join("x" + w for w in words))
    texts.append("local_device_count device_count devices local_devices device jax.devices() pmapé épmap pmap2")
    found = 0
    for text in texts:
        expected = set(plain.findall(text))
        assert prefilter._trigger_words(rules, TARGET).intersection(prefilter._WORDS.findall(text)) == expected
        found += len(expected)
    assert found > 1000


def test_trigger_words_can_depend_on_the_target_jax():
    from jaxmigrate.lint.rules.non_partitionable_rng import NonPartitionableRng as jm502

    # JM502's sampling clause applies before jax 0.5 only.
    sampling = "import jax\nx = jax.random.normal(key, (8,))\n"
    assert jm502 not in rules_triggered(sampling, (jm502,), (0, 10))
    assert jm502 in rules_triggered(sampling, (jm502,), (0, 4))
    flag = 'import jax\njax.config.update("jax_threefry_partitionable", False)\n'
    assert jm502 in rules_triggered(flag, (jm502,), (0, 10))


# A catalogue rule's second look at its trigger words (Rule.written): every way the resolver can
# reach a legacy name still gets the file parsed; a word written as prose or as a local name does not.
@pytest.mark.parametrize(
    ("code", "text"),
    [
        pytest.param("JM602", "import jax.numpy as jnp\ny = jnp.round_(x)\n", id="attribute-on-alias"),
        pytest.param("JM602", "import jax\ny = jax.numpy.round_(x)\n", id="dotted-from-jax"),
        pytest.param("JM602", "import jax\nL = jax.numpy\ny = L.round_(x)\n", id="rebound-module"),
        pytest.param("JM602", "import jax\nM = jax\ny = M.numpy.round_(x)\n", id="rebound-root"),
        pytest.param("JM602", "import jax.numpy as jnp\ny = (jnp.  # why\n     round_(x))\n", id="comment-after-dot"),
        pytest.param("JM602", "import jax.numpy as jnp\ny = (jnp\n     .round_(x))\n", id="dot-on-next-line"),
        pytest.param("JM602", "from jax.numpy import *\ny = round_(x)\n", id="star-import"),
        pytest.param("JM602", "from jax.numpy import round_ as r\ny = r(x)\n", id="from-import-as"),
        pytest.param("JM602", "import jax.config\n", id="import-only-module"),
        pytest.param("JM602", "from jax.config import config\n", id="from-import-only-module"),
        pytest.param("JM603", "import jax.numpy as jnp\ny = jnp.clip(x,\n             a_max=1)\n", id="keyword-on-next-line"),
        pytest.param("JM603", "import jax.numpy as jnp\ny = jnp.where(c, x = 1, y = 2)\n", id="short-keyword-spaced"),
        pytest.param("JM603", "import functools, jax.numpy as jnp\nf = functools.partial(jnp.where, x=1)\n", id="keyword-in-partial"),
    ],
)
def test_catalogue_rules_are_triggered_where_they_report(code, text):
    assert code in {r.code for r in rules_triggered(text, all_rules(), TARGET)}
    assert code in {f.code for f in lint_text(text, "t.py", all_rules(), TARGET)}


@pytest.mark.parametrize(
    ("code", "text"),
    [
        pytest.param("JM602", "import jax\n# the product of the round_ numbers\nproduct = 1\n", id="prose-and-locals"),
        pytest.param("JM602", "import jax\nimport itertools\np = itertools.product(a, b)\n", id="other-modules-attribute"),
        pytest.param("JM602", "import jax\njax.config.update('jax_enable_x64', True)\n", id="modern-config"),
        pytest.param("JM603", "import jax.numpy as jnp\nx = 1\ny = jnp.where(c, x, 0)\n", id="assignment-is-no-keyword"),
        pytest.param("JM603", "import jax.numpy as jnp\nz = where(c, x=1, y=2) + jnp.sum(w)\n", id="short-keyword-of-a-local"),
    ],
)
def test_catalogue_rules_skip_words_written_otherwise(code, text):
    assert code not in {r.code for r in rules_triggered(text, all_rules(), TARGET)}


@pytest.mark.parametrize("line", ["from utils import *", "from .common import *", "from mypkg.helpers import *"])
def test_a_star_import_of_the_programs_own_module_may_bind_any_name(line):
    """What ``from utils import *`` binds is whatever ``utils.py`` imports (``jax`` itself): the
    text alone cannot tell, so every rule stays in reach; a library's star import binds its names."""
    assert read_imports(f"{line}\n\ny = jax.tree_map(f, x)\n") is None
    assert read_imports("from jax.numpy import *\n").bound == {"jax.numpy"}
    assert read_imports("from jax.numpy import *\n").star
    assert not read_imports("import jax\n# from jax.numpy import *\n").star  # (a comment)


@pytest.mark.parametrize(("text", "reached"), [
    ("import jax\nfrom jax._src import core\nx = core.Primitive('p')\n", False),  # jax's own `core`
    ("from jax import core\nx = core.Primitive('p')\n", True),
    ("import jax\nx = jax.core.Primitive('p')\n", True),
    ("import jax\nfrom jax._src import core\nx = jax.core.Primitive('p')\n", True),  # written out
    ("from jax._src import core\nimport jax.core as core\nx = core.Primitive('p')\n", True),  # bound to both
])
def test_a_removed_name_under_an_owner_another_import_binds_is_not_a_mention(text, reached):
    """`core.Primitive` names `jax.core.Primitive` (JM602) only where `core` may be `jax.core`: jax's own
    modules say `from jax._src import core`, and are not parsed for the catalogue's sake."""
    jm602 = next(rule for rule in all_rules() if rule.code == "JM602")
    assert (jm602 in rules_triggered(text, tuple(all_rules()))) is reached
    if reached:
        assert any(f.code == "JM602" for f in lint_text(text, "m.py", tuple(all_rules()), TARGET))


@pytest.mark.parametrize(("text", "parsed"), [
    ("import jax.numpy as jnp\ny = jnp.mean(x, where=m)\n", True),
    ("import jax.numpy as jnp\ny = jnp.mean(x, where  # the mask\n             =m)\n", True),
    ("import jax.numpy as jnp\ny = jnp.mean(x, nowhere=m)\n", False),  # another keyword
    ("import jax.numpy as jnp\ny = jnp.where(m, x, 0)\n", False),
    ("import jax.numpy as jnp\nok = where == 1\ny = jnp.mean(x)\n", False),
])
def test_jm511_is_parsed_for_only_where_where_is_a_keyword(text, parsed):
    jm511 = next(rule for rule in all_rules() if rule.code == "JM511")
    assert (jm511 in rules_triggered(text, tuple(all_rules()))) is parsed


@pytest.mark.parametrize(("text", "parsed"), [
    ("import jax\nx = batch.reshape((jax.local_device_count(), -1))\n", True),
    ("from jax.numpy import reshape as rs\nimport jax\nx = rs(b, (jax.device_count(), -1))\n", True),
    ("from flax.training.common_utils import shard\nimport jax\nn = jax.device_count()\nx = shard(b)\n", True),
    ("import jax\nn = jax.device_count()\nmesh = make(jax.devices())\n", False),  # no reshape, no shard
])
def test_jm504_is_parsed_for_only_where_a_reshape_or_the_shard_helper_is_written(text, parsed):
    jm504 = next(rule for rule in all_rules() if rule.code == "JM504")
    assert (jm504 in rules_triggered(text, tuple(all_rules()))) is parsed
    if parsed:
        assert any(f.code == "JM504" for f in lint_text(text, "m.py", tuple(all_rules()), TARGET))
