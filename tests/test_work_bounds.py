"""The work a check or a fix does grows with the file, not faster: the resolver answers in bounded
steps, a file's tree is freed as soon as the file is done, one fix pass per kind of fix, one parse
per pass to keep rewritten lines within the width. (Counted, not timed: benchmarks/ times.)"""

from __future__ import annotations

import ast
import gc
import sys
import textwrap

import pytest

from jaxmigrate import names
from jaxmigrate.config import DEFAULT_TARGET_JAX
from jaxmigrate.core.edits import Edit, splice
from jaxmigrate.lint import checker, registry
from jaxmigrate.migrate import _layout

RULES = tuple(registry.all_rules())


@pytest.fixture
def steps(monkeypatch) -> list[int]:
    """One entry per step the resolver takes."""
    taken: list[int] = []
    real = names.NameResolver._resolve

    def counted(self, expr, seen):
        taken.append(1)
        return real(self, expr, seen)

    monkeypatch.setattr(names.NameResolver, "_resolve", counted)
    return taken


def _resolve_last(source: str) -> tuple[names.Target, ...]:
    tree = ast.parse(textwrap.dedent(source))
    return names.NameResolver(tree).resolve(tree.body[-1].value)


@pytest.mark.parametrize("rebindings", [3, 8])
def test_a_name_rebound_by_method_calls_costs_steps_in_proportion(steps, rebindings):
    # `d = d.map(...)` k times: following every order of the rebindings took k! steps (a paxml
    # input pipeline took 39k steps per mention of `d`).
    source = "d = tf.data.Dataset.range(8)\n" + "d = d.map(f)\n" * rebindings + "d.batch\n"
    assert _resolve_last(source) == (names.Target(names.LOCAL),)
    assert len(steps) <= 3 * rebindings + 5


def test_rebinding_through_attributes_gives_up_as_local_after_a_bounded_number_of_steps(steps):
    source = "def f(x):\n    " + "x = x.T\n    " * 9 + "return x.real\n"
    tree = ast.parse(source)
    resolver = names.NameResolver(tree)
    assert resolver.resolve(tree.body[0].body[-1].value) == (names.Target(names.LOCAL),)
    assert len(steps) <= names.STEPS + 1  # 9! orders were followed before


def test_a_partial_of_jax_pmap_still_resolves_through_its_binding():
    tree = ast.parse("import functools\nimport jax\np = functools.partial(jax.pmap, axis_name='i')\np\n")
    (target,) = names.NameResolver(tree).resolve(tree.body[-1].value)
    assert target.name == "jax.pmap" and [k.arg for k in target.bound_keywords] == ["axis_name"]


def _legacy_program() -> str:
    return textwrap.dedent("""\
        import jax
        import jax.numpy as jnp
        from jax.experimental.pjit import pjit

        f = pjit(lambda x: x * 2, in_axis_resources=None, out_axis_resources=None)
        total = jax.tree_map(jnp.sum, {"y": 1})
        replicated = jax.device_put_replicated(total, jax.local_devices())
        """)


def test_a_checked_or_fixed_file_leaves_no_cycle_holding_its_tree():
    # A planner kept in its module's `shared`, pointing back at the module, made every tree with
    # a JM30x/JM601 mention wait for the cyclic GC: a full traversal, and the tree held meanwhile.
    text = _legacy_program()
    checker.fix_text(text, "t.py", RULES, DEFAULT_TARGET_JAX, unsafe=True)  # caches filled first
    gc.collect()
    gc.disable()
    try:
        assert checker.lint_text(text, "t.py", RULES, DEFAULT_TARGET_JAX)
        assert gc.collect() < 50
        checker.fix_text(text, "t.py", RULES, DEFAULT_TARGET_JAX, unsafe=True)
        assert gc.collect() < 50
    finally:
        gc.enable()


def test_each_kind_of_fix_is_one_pass_and_each_pass_one_check(monkeypatch):
    lints, passes = [], []
    real_lint, real_codemod, real_edits = checker._lint, checker._apply_codemod, checker._apply_edit_fixes
    monkeypatch.setattr(checker, "_lint", lambda text, *a, **k: lints.append(text) or real_lint(text, *a, **k))
    monkeypatch.setattr(checker, "_apply_codemod", lambda text, found, *a: passes.append(
        checker.next_codemod(found).rpartition(":")[2]) or real_codemod(text, found, *a))
    monkeypatch.setattr(checker, "_apply_edit_fixes", lambda text, found, *a: passes.append(
        f"{len(found)} edit fixes") or real_edits(text, found, *a))
    result = checker.fix_text(_legacy_program(), "t.py", RULES, DEFAULT_TARGET_JAX, unsafe=True)
    assert not [f for f in result.findings if f.fix is not None]
    # Both keyword renames (JM202) in one pass, then one pass per codemod, each for all its sites.
    assert passes == ["2 edit fixes", "rewrite_legacy_device_put", "rewrite"]  # codemods by code
    assert len(lints) == 1 + len(passes)  # the first check, then one after each pass
    assert len(set(lints)) == len(lints)  # no text checked twice


def test_fitting_many_rewritten_lines_parses_the_text_once(monkeypatch):
    parses = []
    real_parse = ast.parse
    monkeypatch.setattr(_layout.ast, "parse", lambda text, *a, **k: parses.append(1) or real_parse(text, *a, **k))
    original = "".join(f"out_{i} = pjit(layer, a)\n" for i in range(50))
    edits = [Edit(original.index("pjit(layer, a)\n", original.index(f"out_{i} ")),
                  original.index("pjit(layer, a)\n", original.index(f"out_{i} ")) + len("pjit(layer, a)"),
                  "jax.jit(layer, in_shardings=NamedSharding(mesh, PartitionSpec('data', 'model')),"
                  " out_shardings=NamedSharding(mesh, PartitionSpec('data')))")  # too long for any width
             for i in range(50)]
    fitted = _layout.fit_edits(original, edits, splice(original, edits))
    assert all(len(line) <= 88 for line in fitted.splitlines())  # lines too short to tell: 88
    assert fitted.count("\n") > original.count("\n")
    assert len(parses) == 1  # was one per rewritten line: quadratic in a file of many


def test_elements_still_too_long_are_fitted_without_parsing_the_file_again(monkeypatch):
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(_layout.ast, "parse", lambda text, *a, **k: parsed.append(len(text)) or real_parse(text, *a, **k))
    original = "".join(f"out_{i} = pjit(layer, a)\n" for i in range(30))
    new = ("jax.jit(layer, in_shardings=(NamedSharding(mesh, PartitionSpec('data', 'model')),"
           " NamedSharding(mesh, PartitionSpec('data', None))), out_shardings=NamedSharding(mesh, PartitionSpec()))")
    edits = []
    for i in range(30):
        start = original.index("pjit(layer, a)", original.index(f"out_{i} "))
        edits.append(Edit(start, start + len("pjit(layer, a)"), new))
    spliced = splice(original, edits)
    fitted = _layout.fit_edits(original, edits, spliced)
    assert all(len(line) <= 79 for line in fitted.splitlines())
    assert "    in_shardings=(\n        NamedSharding(mesh, PartitionSpec('data', 'model')),\n" in fitted
    assert [n for n in parsed if n >= len(spliced) // 2] == [len(spliced)]  # the file once; then brackets alone


def _pmap_dense(blocks: int) -> str:
    """``blocks`` drivers, each building two pmapped steps (where the exact rewrite is offered)."""
    block = textwrap.dedent("""\


        def main_{i}(params, batch):
            n = jax.local_device_count()
            params = params.reshape((n, -1))
            batch = batch.reshape((n, -1))

            @functools.partial(jax.pmap, axis_name="batch")
            def step(params, batch):
                return lax.pmean(jax.tree_map(lambda p: p * {i}, params), axis_name="batch")

            out = jax.pmap(lambda p, b: jnp.sum(p * b), axis_name="d")(step(params, batch), batch)
            return out[0]
        """)
    main = "".join(f"    main_{i}(jnp.ones(8), jnp.ones(8))\n" for i in range(blocks))
    return ("import functools\n\nimport jax\nimport jax.numpy as jnp\nfrom jax import lax\n"
            + "".join(block.format(i=i) for i in range(blocks)) + f"\n\nif __name__ == '__main__':\n{main}")


def test_one_pmap_planner_per_text_and_no_walk_of_the_whole_tree(monkeypatch):
    # The rule and the global view each built a planner, and each planner walked the whole tree
    # four times (applications, keyword calls, multi-process names, the internal axis): eight
    # walks a check, on top of the index every rule shares.
    from jaxmigrate.migrate import _pmap_sites

    planned, walked = [], []
    real_init, real_walk = _pmap_sites.Planner.__init__, _pmap_sites.ast.walk
    monkeypatch.setattr(_pmap_sites.Planner, "__init__",
                        lambda self, text, *a, **k: planned.append(text) or real_init(self, text, *a, **k))
    def walk(node):
        if sys._getframe(1).f_globals["__name__"] == _pmap_sites.__name__:
            walked.append(type(node))
        return real_walk(node)

    monkeypatch.setattr(_pmap_sites.ast, "walk", walk)
    text = _pmap_dense(5)
    gc.collect()
    gc.disable()
    try:
        assert checker.lint_text(text, "t.py", RULES, DEFAULT_TARGET_JAX)
        assert planned == [text] and ast.Module not in walked
        assert gc.collect() < 50  # the planner kept in the module's `shared` is no cycle holding the tree
        planned.clear()
        result = checker.fix_text(text, "t.py", RULES, DEFAULT_TARGET_JAX, unsafe=True)
        assert gc.collect() < 50
    finally:
        gc.enable()
    assert "jax.pmap" not in result.text
    assert len(planned) == len(set(planned))  # a text's planner is asked again, not rebuilt
    assert ast.Module not in walked


def _pjit_lines_rewritten(lines: int, first: str, second: str) -> tuple[str, str]:
    """(``lines`` lines of `out_i = pjit(layer, a)`, the layout of them each rewritten to a
    `jax.jit` call too long for its line), the specs' arguments ``first`` and ``second``."""
    original = "".join(f"out_{i} = pjit(layer, a)\n" for i in range(lines))
    new = (f"jax.jit(layer, in_shardings=(NamedSharding(mesh, PartitionSpec({first})),"
           f" NamedSharding(mesh, PartitionSpec({second}))), out_shardings=NamedSharding(mesh, PartitionSpec()))")
    edits = []
    for i in range(lines):
        start = original.index("pjit(layer, a)", original.index(f"out_{i} "))
        edits.append(Edit(start, start + len("pjit(layer, a)"), new))
    return original, _layout.fit_edits(original, edits, splice(original, edits))


def test_fitting_many_rewritten_lines_copies_the_text_once(monkeypatch):
    # Each broken line was spliced into the whole text (a copy of the file per line): quadratic in
    # a file of many. Now the broken lines are joined once; only a bracket's own text is re-fitted.
    texts = []
    real_fit = _layout._fit_line
    monkeypatch.setattr(_layout, "_fit_line", lambda text, *a, **k: texts.append(len(text)) or real_fit(text, *a, **k))
    original, fitted = _pjit_lines_rewritten(30, "'data', 'model'", "'data', None")
    assert fitted.count("    in_shardings=(\n") == 30
    assert texts and max(texts) < len(original)  # brackets alone, never the whole file


def test_fixing_walks_no_whole_tree_outside_the_one_index(monkeypatch):
    # The global view (four walks, one more per driving scope) and the layout (two) walked the
    # whole tree with ast.walk, three times the cost of the module's one index walk.
    from pathlib import Path

    whole: list[str] = []
    real_walk = ast.walk

    def walk(node):
        if isinstance(node, ast.Module):
            whole.append(sys._getframe(1).f_globals["__name__"])
        return real_walk(node)

    monkeypatch.setattr(ast, "walk", walk)
    root = Path(__file__).resolve().parents[1]
    # The global view, then pmap -> shard_map (steps built in a driver).
    for path in (root / "examples" / "legacy" / "mlp_data_parallel.py",
                 root / "fixtures" / "migrate" / "pmap_to_shard_map" / "plain_call.in.py"):
        result = checker.fix_text(path.read_text(), path.name, RULES, DEFAULT_TARGET_JAX, unsafe=True)
        assert result.fixed and "jax.pmap" not in result.text
    assert not [caller for caller in whole if caller.startswith(("jaxmigrate.migrate", "jaxmigrate.core"))]


def test_a_fix_pass_parses_its_result_once(monkeypatch):
    # The result of each pass was parsed to see that it parses, then parsed again to check it.
    parsed: list[str] = []
    real_parse = ast.parse

    def parse(text, *a, **k):
        if sys._getframe(1).f_globals["__name__"] == checker.__name__:
            parsed.append(text)
        return real_parse(text, *a, **k)

    monkeypatch.setattr(ast, "parse", parse)
    result = checker.fix_text(_legacy_program(), "t.py", RULES, DEFAULT_TARGET_JAX, unsafe=True)
    assert result.fixed and not [f for f in result.findings if f.fix is not None]
    assert len(parsed) == len(set(parsed)) == 4  # the file, then the result of each of the three passes


@pytest.mark.parametrize("program", ["pmap", "legacy"])
def test_a_fix_holds_no_tree_of_the_file_while_parsing_another(monkeypatch, program):
    # The planner's tree stayed alive while the codemod's result was parsed (for the layout, the
    # import writer and the check): peak memory was two trees and a parse, 620 MB for a
    # 50,000-line file.
    import weakref

    text = _pmap_dense(3) if program == "pmap" else _legacy_program()
    trees: list[weakref.ref] = []
    held: list[int] = []
    real_parse = ast.parse

    def parse(source, *a, **k):
        if len(source) > len(text) // 2:  # the file (a bracket parsed alone is not)
            held.append(sum(tree() is not None for tree in trees))
        tree = real_parse(source, *a, **k)
        trees.append(weakref.ref(tree))
        return tree

    monkeypatch.setattr(ast, "parse", parse)
    result = checker.fix_text(text, "t.py", RULES, DEFAULT_TARGET_JAX, unsafe=True)
    assert result.fixed
    assert held and max(held) == 0  # no other tree of the file alive at any parse


def test_breaking_lines_without_strings_or_comments_tokenizes_nothing(monkeypatch):
    # Each broken line's head, tail and brackets were tokenized to find comments and count
    # brackets: a tenth of fixing a pmap-dense file. Without a quote or `#` there is nothing to find.
    tokenized = []
    real_tokens = _layout.tokenize.generate_tokens
    monkeypatch.setattr(_layout.tokenize, "generate_tokens", lambda *a: tokenized.append(1) or real_tokens(*a))
    _, fitted = _pjit_lines_rewritten(20, "DATA, MODEL", "DATA, None")  # no quote: nothing to tokenize
    assert fitted.count("    in_shardings=(\n") == 20
    assert not tokenized


def test_telling_what_made_an_argument_indexes_each_scope_once(monkeypatch):
    # What made an argument the global view does not recognise is looked for through the names it
    # was bound from: each name walked its whole scope, and the corpus's check made 2.3 times the
    # function calls it makes without it.
    from jaxmigrate.migrate.global_view import hints
    from jaxmigrate.migrate.to_global_jit import plan_global

    indexed, real_index = [], hints._bound_values
    monkeypatch.setattr(hints, "_bound_values", lambda scope: indexed.append(scope) or real_index(scope))
    chain = "".join(f"    a{i} = a{i - 1} + a{i - 1}\n" for i in range(1, 40))
    text = ("import functools\nimport jax\n\n\n@functools.partial(jax.pmap, axis_name='i')\n"
            "def step(w, x):\n    return w + jax.lax.pmean(x.mean(), 'i')\n\n\n"
            "def train(w, source):\n    w = jax.device_put_replicated(w, jax.local_devices())\n"
            f"    a0 = next(source)\n{chain}    for _ in range(3):\n        w = step(w, a39)\n    return w\n")
    view = plan_global(text)
    assert not view.possible and "argument 2 of `step` (`a39`)" in view.reason, view.blocker
    assert len(indexed) == len({id(scope) for scope in indexed}) <= 2
