"""The global-view planner: fixture pairs, idempotence, blocked modules, JM101's fix chain.

Regenerate the expected outputs with ``JAXMIGRATE_UPDATE_FIXTURES=1 pytest tests/test_global_view.py``
and review the diff like code. In an ``.in.py`` a ``# blocked: <part of the reason>`` comment marks
the line the finding must name as blocking the global view; such a module's ``.out.py`` is its
``.in.py`` unchanged. A ``# left: <part of the reason>`` comment marks a pmap the global view leaves
as it is while the module's other steps move: the only one JM101 reports after the fix.
"""

from __future__ import annotations

import ast
import os
import re
import textwrap
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.lint.rule import Safety
from jaxmigrate.migrate.to_global_jit import fix, plan_global

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "to_global_jit"
CASES = sorted(p.name.removesuffix(".in.py") for p in FIXTURES.glob("*.in.py"))
UPDATE = os.environ.get("JAXMIGRATE_UPDATE_FIXTURES") == "1"
BLOCKED = re.compile(r"#\s*blocked:\s*(?P<reason>.+)$")
LEFT = re.compile(r"#\s*left:\s*(?P<reason>.+)$")
TARGET = (0, 10)
JM101 = tuple(r for r in all_rules() if r.code == "JM101")


def _blocked(source: str, mark: re.Pattern = BLOCKED) -> tuple[int, str] | None:
    marks = [(i + 1, m["reason"].strip()) for i, line in enumerate(source.splitlines()) if (m := mark.search(line))]
    assert len(marks) <= 1
    return marks[0] if marks else None


def assert_blocks_at(text: str, marker: str, reason: str) -> None:
    """The global view of ``text`` is blocked at the first line holding ``marker``, for ``reason``."""
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if marker in t)
    assert not view.possible and view.line == line and reason in view.reason, view.blocker


def assert_variant_blocks(source: str, old: str, new: str, marker: str, reason: str) -> None:
    """``source`` takes the global view; with ``old`` made ``new`` it is blocked at ``marker``, for ``reason``."""
    assert plan_global(source).possible, plan_global(source).blocker
    text = source.replace(old, new)
    assert text != source
    assert_blocks_at(text, marker, reason)


def assert_variant_blocked_for(source: str, old: str, new: str, reason: str) -> None:
    """``source`` takes the global view; with ``old`` made ``new`` it does not, for ``reason``."""
    assert plan_global(source).possible, plan_global(source).blocker
    text = source.replace(old, new)
    assert text != source
    view = plan_global(text)
    assert not view.possible and reason in view.blocker, view.blocker


def test_every_case_has_a_fixture_pair():
    outs = sorted(p.name.removesuffix(".out.py") for p in FIXTURES.glob("*.out.py"))
    assert CASES and outs == CASES


@pytest.mark.parametrize("case", CASES)
def test_fixture(case):
    source = (FIXTURES / f"{case}.in.py").read_text()
    expected = FIXTURES / f"{case}.out.py"
    result = fix(source, set())
    if UPDATE:
        expected.write_text(result)
    assert result == expected.read_text()
    ast.parse(result)
    assert fix(result, set()) == result, "not idempotent"
    view = plan_global(source)
    blocked = _blocked(source)
    if blocked is None:
        assert view.possible, view.blocker
        assert result != source
        # Nothing of pmap's left for JM101 but a pmap left on purpose: a second --fix
        # --unsafe-fixes changes nothing.
        reported = [f.line for f in lint_text(result, "x.py", JM101, TARGET) if f.code == "JM101"]
        left = _blocked(source, LEFT)
        assert reported == ([] if left is None else [_blocked(result, LEFT)[0]])
        if left is not None:
            assert left[1] in view.unused[left[0]], view.unused
    else:
        line, reason = blocked
        assert not view.possible and result == source
        assert (view.line, reason in view.reason) == (line, True), view.blocker


def test_jm101_offers_the_global_view_with_the_exact_rewrite_behind_it():
    # The step is built in the program's driver: the exact rewrite is right there too.
    source = (FIXTURES / "driver.in.py").read_text()
    (finding,) = [f for f in lint_text(source, "x.py", JM101, TARGET) if f.code == "JM101"]
    assert finding.fix.safety is Safety.UNSAFE and "global view" in finding.fix.message
    # Behind it, the exact rewrite: unsafe too (a mesh of every device), so with safe fixes only
    # nothing of pmap's is rewritten.
    assert finding.fix.fallback is not None and finding.fix.fallback.safety is Safety.UNSAFE
    assert "shard_map" in finding.fix.fallback.message
    assert finding.to_dict()["fix"]["safety"] == "unsafe"  # JSON / SARIF show the primary fix

    unsafe = fix_text(source, "x.py", JM101, TARGET, unsafe=True)
    assert unsafe.text == (FIXTURES / "driver.out.py").read_text()
    safe = fix_text(source, "x.py", JM101, TARGET, unsafe=False)
    assert safe.text == source


def test_a_pmap_at_import_gets_the_global_view_and_no_exact_rewrite_behind_it():
    source = (FIXTURES / "mlp.in.py").read_text()
    (finding,) = [f for f in lint_text(source, "x.py", JM101, TARGET) if f.code == "JM101"]
    assert "global view" in finding.fix.message and finding.fix.fallback is None
    assert "the exact rewrite is not offered: the exact rewrite needs a mesh where the step is built, here at import" \
        in finding.message
    assert fix_text(source, "x.py", JM101, TARGET, unsafe=True).text == (FIXTURES / "mlp.out.py").read_text()


def test_a_blocked_module_gets_the_exact_fix_and_the_blocking_line():
    source = (FIXTURES / "ppermute_kept.in.py").read_text()
    (finding,) = [f for f in lint_text(source, "x.py", JM101, TARGET) if f.code == "JM101"]
    assert "global view not possible: line 11: `ppermute`" in finding.message
    assert finding.fix is None or (finding.fix.fallback is None and "shard_map" in finding.fix.message)


def test_the_rest_of_the_module_moves_with_the_step():
    """A mixed module: the eval step is blocked, so the train step (sharing `params`) stays too."""
    source = (FIXTURES / "mlp.in.py").read_text() + (
        "\n\n@functools.partial(jax.pmap, axis_name='batch')\ndef evaluate(params):\n"
        "    return jnp.mean(jax.lax.all_gather(params['w'], 'batch'))\n\n\n"
        "def check(params):\n"
        "    return evaluate(jax.device_put_replicated(params, jax.local_devices()))[0]\n"
    )
    view = plan_global(source)
    assert not view.possible and "all_gather" in view.reason


def test_the_global_view_runs_before_the_site_codemods_of_its_call_sites():
    """The driver comes first in the file, so JM302's codemod is reported first; the fix loop still
    moves the module to the global view (a whole-module codemod goes first) instead of rewriting
    `device_put_replicated` into a placement that keeps the device axis."""
    source = (
        "import functools\n\nimport jax\nimport jax.numpy as jnp\n\n\n"
        "def main(params, x):\n"
        "    params = jax.device_put_replicated(params, jax.local_devices())\n"
        "    x = x.reshape((jax.local_device_count(), -1) + x.shape[1:])\n"
        "    params = step(params, x)\n"
        "    return jax.tree.map(lambda p: p[0], params)\n\n\n"
        "@functools.partial(jax.pmap, axis_name='i')\n"
        "def step(params, x):\n"
        "    grads = jax.grad(lambda p: jnp.mean((x @ p) ** 2))(params)\n"
        "    return params - 0.1 * jax.lax.pmean(grads, 'i')\n"
    )
    fixed = fix_text(source, "x.py", all_rules(), TARGET, unsafe=True)
    assert "broadcast_to" not in fixed.text and "jax.device_put(params, NamedSharding(mesh, P()))" in fixed.text
    assert "return params - 0.1 * grads\n" in fixed.text


HELPER_PROGRAM = """\
import jax
import jax.numpy as jnp
import numpy as np

{helper}


def step(w, x):
    return w - 0.1 * jax.lax.pmean(jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w), "d")


p_step = jax.pmap(step, axis_name="d")


def fit(w, x):
    n = jax.local_device_count()
    w = replicate(w)
    x = x.reshape((n, -1) + x.shape[1:])
    return p_step(w, x)[0]
"""


@pytest.mark.parametrize("helper", [
    pytest.param("def replicate(tree):\n    n = jax.local_device_count()\n"
                 "    return jax.tree.map(lambda x: np.stack([x] * n), tree)", id="np.stack"),
    pytest.param("def replicate(x):\n    return np.broadcast_to(x, (jax.local_device_count(),) + x.shape)",
                 id="one array, np.broadcast_to"),
    pytest.param("def replicate(tree):\n    \"\"\"Docs.\"\"\"\n    count = jax.local_device_count()\n"
                 "    return jax.tree_util.tree_map(lambda leaf: jnp.array(count * [leaf]), tree)",
                 id="docstring, n * [x]"),
    pytest.param("replicate = lambda t: jax.tree_util.tree_map(\n"
                 "    lambda x: jnp.broadcast_to(x, (jax.local_device_count(), *x.shape)), t)",
                 id="module-level lambda, starred shape"),
])
def test_a_replicate_helper_is_known_by_its_body(helper):
    source = HELPER_PROGRAM.format(helper=helper)
    view = plan_global(source)
    assert view.possible, view.blocker
    fixed = fix(source, set())
    assert "jax.device_put(w, NamedSharding(mesh, P()))" in fixed and "replicate(" not in fixed.split("def fit")[1]


@pytest.mark.parametrize("helper", [
    pytest.param("def replicate(tree, n=jax.local_device_count()):\n"
                 "    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)",
                 id="two parameters"),
    pytest.param("def replicate(tree):\n    return jax.tree.map(lambda x: jnp.stack([x] * 2), tree)",
                 id="a count that is not the device count"),
    pytest.param("def replicate(tree):\n    n = jax.local_device_count()\n"
                 "    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n, 1) + x.shape), tree)",
                 id="an extra axis"),
    pytest.param("def replicate(tree):\n    n = jax.local_device_count()\n"
                 "    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)\n\n\n"
                 "if jax.process_count() > 1:\n    def replicate(tree):\n        return tree",
                 id="rebound"),
    pytest.param("def replicate(tree):\n    n = jax.local_device_count()\n    print(tree)\n"
                 "    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)",
                 id="a statement besides the return"),
])
def test_a_helper_that_is_not_a_replicate_blocks_with_the_line(helper):
    source = HELPER_PROGRAM.format(helper=helper)
    view = plan_global(source)
    assert not view.possible
    line = next(i + 1 for i, text in enumerate(source.splitlines()) if "return p_step(w, x)" in text)
    assert view.line == line and "argument 1 of `p_step` (`w`) is not made by a replicate" in view.reason


_BUILT = (FIXTURES / "mesh_already_built.in.py").read_text()


@pytest.mark.parametrize(("mesh", "reused"), [
    ('Mesh(jax.devices(), ("batch",))', True),
    ('jax.make_mesh((jax.device_count(),), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))', True),
    # make_mesh's default axis types are Explicit since JAX 0.9: not the mesh the view builds.
    ('jax.make_mesh((jax.device_count(),), ("batch",))', False),
    ('Mesh(jax.devices(), ("model",))', False),  # another axis
    ('Mesh(jax.devices()[:2], ("batch",))', False),  # not every device
])
def test_a_mesh_the_driving_function_already_builds_is_used_not_built_again(mesh, reused):
    text = _BUILT.replace('Mesh(jax.devices(), ("batch",))', mesh)
    out = fix(text, {(1, 1)})
    assert out != text
    built = out.count("make_mesh(") - text.count("make_mesh(")
    assert (built == 0) is reused, out
    assert ("NamedSharding(mesh, P())" in out) is reused


def test_a_mesh_name_bound_twice_is_not_used():
    text = _BUILT.replace('    n = jax.local_device_count()\n',
                          '    n = jax.local_device_count()\n    if n > 8:\n        mesh = None\n')
    out = fix(text, {(1, 1)})
    assert out.count("make_mesh(") == 1 and "NamedSharding(mesh, P())" not in out


_KEYWORDS = (FIXTURES / "keyword_arguments.in.py").read_text()


def test_keyword_only_parameters_are_given_by_keyword_or_left_to_their_defaults():
    only = _KEYWORDS.replace("def train_step(params, batch, learning_rate):",
                             "def train_step(*, params, batch, learning_rate, decay=0.0):")
    assert plan_global(only).possible, plan_global(only).blocker
    missing = only.replace("p_train_step(batch=batch, params=params)", "p_train_step(params=params)")
    assert_blocks_at(missing, "p_train_step(params=params)", "called with 1 arguments")


@pytest.mark.parametrize(("call", "reason"), [
    ("p_train_step(params, batch=batch, learning_rate=0.2)", "called with `learning_rate=`"),  # bound by partial
    ("p_train_step(params, params=params)", "called with `params=`"),  # given twice
    ("p_train_step(params=params)", "called with 1 arguments"),
    ("p_train_step(params, **{'batch': batch})", "called with starred arguments"),
])
def test_a_keyword_call_that_does_not_name_each_parameter_once_blocks(call, reason):
    text = _KEYWORDS.replace("p_train_step(batch=batch, params=params)", call)
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if call in t)
    assert not view.possible and view.line == line and reason in view.reason, view.blocker


_BOUND_BY_PARTIAL = (FIXTURES / "optimizer_bound_by_partial.in.py").read_text()
_PARTIAL = "functools.partial(train_step, optimizer, scale=0.5)"


@pytest.mark.parametrize(("partial", "reason"), [
    ("functools.partial(train_step, optimizer, optimizer=optimizer)", "binds `optimizer` twice"),
    ("functools.partial(train_step, *[optimizer])", "not a `def` or a `partial` of one"),
])
def test_a_partial_whose_bindings_cannot_be_followed_blocks(partial, reason):
    assert_variant_blocks(_BOUND_BY_PARTIAL, _PARTIAL, partial, "functools.partial(", reason)


@pytest.mark.parametrize(("pmeans", "left"), [
    ('    loss, grads = (jax.lax.pmean(x, "batch") for x in (loss, grads))\n', ""),
    ('    loss, grads = [jax.lax.pmean(x, "batch") for x in [loss, grads]]\n', ""),
    ('    avg_loss, avg_grads = (jax.lax.pmean(x, "batch") for x in (loss, grads))\n    loss, grads = avg_loss, avg_grads\n',
     "    avg_loss, avg_grads = loss, grads\n    loss, grads = avg_loss, avg_grads\n"),
    # (a list comprehension over a tuple, assigned to one name, is a list: it stays a comprehension)
    ('    both = [jax.lax.pmean(x, "batch") for x in (loss, grads)]\n    loss, grads = both\n',
     "    both = [x for x in (loss, grads)]\n    loss, grads = both\n"),
])
def test_pmeans_in_a_comprehension_over_values_written_out_go_with_it(pmeans, left):
    text = _BOUND_BY_PARTIAL.replace('    grads = jax.lax.pmean(grads, axis_name="batch")\n', pmeans).replace(
        'opt_state, jax.lax.pmean(loss, axis_name="batch")', "opt_state, loss")
    fixed = fix(text, set())
    assert "pmean" not in fixed and (left in fixed if left else " for x in " not in fixed)
    assert "jax.value_and_grad(loss_fn)(params, inputs, targets)\n" + left + "    updates, opt_state" in fixed


def test_a_script_driven_by_main_of_its_argparse_namespace_takes_the_global_view():
    """`main(**vars(parser.parse_args()))`: a mapping of host values fills `main`'s parameters."""
    text = _MADE.replace("def main():", "def main(epochs=2, seed=0):").replace(
        "    for epoch in range(2):", "    for epoch in range(epochs):").replace(
        'if __name__ == "__main__":\n    main()',
        'if __name__ == "__main__":\n    import argparse\n\n    parser = argparse.ArgumentParser()\n'
        '    parser.add_argument("--epochs", type=int, default=2)\n    main(**vars(parser.parse_args()))')
    assert "main(**vars(parser.parse_args()))" in text and "range(epochs)" in text
    assert plan_global(text).possible, plan_global(text).blocker
    device_values = text.replace("main(**vars(parser.parse_args()))",
                                 "main(**{'epochs': jax.device_put_replicated(1, jax.devices())})")
    assert_blocks_at(device_values, "main(**{", "is called with starred arguments")


def test_the_rank_of_a_per_example_value_is_the_same_in_both_views():
    text = _BOUND_BY_PARTIAL.replace(
        '    return jnp.mean((inputs @ params["w"] + params["b"] - targets) ** 2)\n',
        '    outputs = inputs @ params["w"] + params["b"]\n    if len(outputs.shape) > 2 or outputs.ndim > 2:\n'
        '        outputs = jnp.squeeze(outputs, axis=-1)\n    return jnp.mean((outputs - targets) ** 2)\n')
    assert plan_global(text).possible, plan_global(text).blocker
    rows = text.replace("outputs.ndim > 2", "outputs.shape[0] > 2")  # the device's row count: not so
    assert not plan_global(rows).possible


def test_a_step_pmapped_in_one_of_two_modes_is_said_to_be():
    """pmap or jit chosen at run time (a flag, the device count): read in its pmap mode, the
    program replicates its parameters in both modes, which the rewrite would change."""
    made = '    p_train_step = jax.pmap(functools.partial(train_step, optimizer, scale=0.5), axis_name="batch")\n'
    text = _BOUND_BY_PARTIAL.replace(made, "    if jax.device_count() > 1:\n    " + made +
                                     "    else:\n        p_train_step = jax.jit(functools.partial(train_step, optimizer))\n")
    assert_blocks_at(text, "jax.device_put_replicated(params",
                     "in the program's pmap mode (where `jax.device_count() > 1` holds): "
                     "`jax.device_put_replicated(params, jax.local_devices())` runs in both modes")


_TWO_MODES = (FIXTURES / "pmap_or_jit_by_flag.in.py").read_text()
_TRAIN_IN_ONE_MODE = """\
            params, loss = train_step_pmap(params, x, y)
            losses.append(float(loss[0]))
        else:
            params, loss = train_step(params, x, y)
            losses.append(float(loss))
"""


def test_a_replicate_both_modes_run_blocks_the_pmap_mode():
    """Parameters replicated outside `if use_pmap:`: the mode without pmap takes them so too, and
    the rewrite would change what it runs."""
    assert_variant_blocks(_TWO_MODES, "    if use_pmap:\n        params = jax.device_put_replicated(params, jax.local_devices())\n",
                          "    params = jax.device_put_replicated(params, jax.local_devices())\n    if use_pmap:\n",
                          "params = jax.device_put_replicated(", "runs in both modes of the program")


def test_the_pmapped_step_called_in_both_modes_blocks_the_pmap_mode():
    """`train_step_pmap` called where both modes run, with no other function of that name for the
    mode without pmap: that mode would call jit's step with its own values."""
    assert_variant_blocks(_TWO_MODES, _TRAIN_IN_ONE_MODE,
                          "        params, loss = train_step_pmap(params, x, y)\n"
                          "        losses.append(float(jnp.mean(loss)))\n",
                          "        params, loss = train_step_pmap(params, x, y)", "called here in both modes")


@pytest.mark.parametrize("old, new, test", [
    ("    losses = []\n", "    losses = []\n    use_pmap = use_pmap and steps > 0\n", "if use_pmap:"),  # bound twice
    ("if use_pmap:", "if jax.process_index() == 0:", None),  # not the same value on every process
    ("if use_pmap:", "if config['multi']:", None),  # an entry the program assigns
])
def test_a_flag_that_may_change_is_no_mode(old, new, test):
    """A test read as a mode must be the same value at each of its reads."""
    text = _TWO_MODES.replace(old, new)
    if "config[" in new:
        text = text.replace("def main(steps=3, use_pmap=True):\n",
                            "def main(steps=3, use_pmap=True):\n    config = {'multi': use_pmap}\n"
                            "    config['multi'] = use_pmap\n")
    assert_blocks_at(text, test or new, "pmapped only where")


def test_a_step_bound_where_both_modes_run_too_blocks_the_pmap_mode():
    """`predict_fn = jax.jit(predict)` where both modes run, then `predict_fn = jax.pmap(...)` under
    the flag (nf-diffusion's `train_step = jax.pmap(train_step)`): one name for two functions."""
    assert_variant_blocks(
        _TWO_MODES, "    if use_pmap:\n        params = jax.device_put_replicated(params, jax.local_devices())\n"
        "        predict_fn = jax.pmap(predict, axis_name=\"batch\")\n    else:\n        predict_fn = jax.jit(predict)\n",
        "    predict_fn = jax.jit(predict)\n    if use_pmap:\n"
        "        params = jax.device_put_replicated(params, jax.local_devices())\n"
        "        predict_fn = jax.pmap(predict, axis_name=\"batch\")\n",
        "predict_fn = jax.pmap", "is bound where both modes run too")


def step_taking_its_defs_name_in_each_mode(text: str) -> str:
    """``text`` (the program of two modes) with its evaluation step a def of `main` that each mode
    rebinds: `predict = jax.pmap(predict, ...)` under the flag, `predict = jax.jit(predict)` in the
    `else` (a cold-chain routing model's and an excited-state VMC driver's `train_step`)."""
    module_def = 'def predict(params, x):\n    return jnp.tanh(x @ params["w"]) @ params["v"]\n\n\n'
    modes = ('    if use_pmap:\n        params = jax.device_put_replicated(params, jax.local_devices())\n'
             '        predict_fn = jax.pmap(predict, axis_name="batch")\n    else:\n        predict_fn = jax.jit(predict)\n')
    changed = text.replace(module_def, "").replace(modes, (
        '    def predict(params, x):\n        return jnp.tanh(x @ params["w"]) @ params["v"]\n\n' + modes.replace(
            "predict_fn = ", "predict = "))).replace("predictions = predict_fn(", "predictions = predict(")
    assert changed.count("predict_fn") == 0 and changed.count("def predict") == 1
    return changed


def test_a_step_taking_its_defs_name_in_each_mode_is_the_pmap_modes():
    """The def is bound where both modes run, but each mode rebinds its name to its own transform of
    it: reads after the `if` are that mode's, and the `else`'s `jax.jit(predict)` reads the def."""
    fixed = fix(step_taking_its_defs_name_in_each_mode(_TWO_MODES), set())
    assert '        predict = jax.jit(predict)\n    else:\n        predict = jax.jit(predict)\n' in fixed
    assert "    predictions = predict(params, test_x)\n\n    return" in fixed
    # Rebound in the pmap mode alone, the def is what the other mode calls: the call blocks.
    assert_variant_blocks(step_taking_its_defs_name_in_each_mode(_TWO_MODES),
                          "    else:\n        predict = jax.jit(predict)\n", "",
                          "predictions = predict(", "the step is called here in both modes")


def _modes(text: str) -> list[str]:
    from jaxmigrate.core.module import as_module
    from jaxmigrate.migrate._pmap_sites import planner_of
    from jaxmigrate.migrate.global_view.modes import candidate_modes
    from jaxmigrate.migrate.to_global_jit import _binding_and_names

    module = as_module(text)
    apps = planner_of(module).applications()
    return [m.text for m in candidate_modes(module, [_binding_and_names(module, app) for app in apps])]


_FLAGS_AROUND_STEP_CALLS = """\
import jax


def main(x, sample=True, check_nans=False):
    p_step = jax.pmap(lambda v: jax.lax.pmean(v, "i"), axis_name="i")
    if sample:
        x = p_step(x)
    if check_nans:
        y = p_step(x)
        print(y)
    else:
        y = p_step(x)
    return y
"""


def test_a_flag_that_chooses_no_mode_without_pmap_is_no_mode():
    """Only a flag choosing between pmap and other code is a mode: `if sample:` around a step's
    call alone, or `if check_nans:` calling the step in both branches (md4's), is not."""
    assert _modes(_TWO_MODES) == ["use_pmap"]
    assert _modes(_FLAGS_AROUND_STEP_CALLS) == []


def test_an_axis_another_transform_binds_blocks_the_pmap_mode():
    """`jax.vmap(..., axis_name="batch")` may run the step's collectives in the other mode."""
    assert_variant_blocks(_TWO_MODES, "def predict(params, x):\n",
                          'batched_loss = jax.vmap(loss_fn, in_axes=(None, 0, 0), axis_name="batch")\n\n\n'
                          "def predict(params, x):\n", "batched_loss = jax.vmap", "binds an axis too")


def test_a_branch_left_empty_keeps_its_else_under_the_negated_test():
    """`if use_pmap: <reshape back, gone> else: predictions = np.asarray(predictions)`."""
    text = _TWO_MODES.replace(
        "        predictions = predictions.reshape((-1,) + predictions.shape[2:])\n",
        "        predictions = predictions.reshape((-1,) + predictions.shape[2:])\n"
        "    else:\n        predictions = np.asarray(predictions)\n")
    fixed = fix(text, {(1, 1)})
    assert "    predictions = predict_fn(params, test_x)\n    if not use_pmap:\n" \
        "        predictions = np.asarray(predictions)\n" in fixed, fixed
    assert fix(fixed, {(1, 1)}) == fixed


def test_a_partial_binding_replicated_arrays_blocks():
    """jit's closure would hold the parameters without pmap's device axis."""
    made = '    p_train_step = jax.pmap(functools.partial(train_step, optimizer, scale=0.5), axis_name="batch")\n'
    text = _BOUND_BY_PARTIAL.replace(made, "").replace(
        "    rng = np.random.default_rng(0)\n",
        made.replace("optimizer, scale", "optimizer, params, scale") + "    rng = np.random.default_rng(0)\n").replace(
        "p_train_step(params, opt_state,", "p_train_step(opt_state,")
    assert "partial(train_step, optimizer, params" in text
    assert_blocks_at(text, "partial(train_step, optimizer, params", "`params` has pmap's device axis here")


_ATTENTION = (FIXTURES / "attention_written_in_jax_numpy.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    ("jnp.concatenate([-x2, x1], axis=-1)", "jnp.concatenate([-x2, x1], axis=0)", "`concatenate` along the batch axis"),
    ("jnp.concatenate([-x2, x1], axis=-1)", "jnp.concatenate([-x2, x1])", "`concatenate` along the batch axis"),
    ("jnp.concatenate([-x2, x1], axis=-1)", "jnp.concatenate([-x2, x1], axis=-2)", "not known to be off the batch"),
    ("jnp.split(x, 2, axis=-1)", "jnp.split(x, 2)", "`split` along the batch axis"),
    ("jnp.split(x, 2, axis=-1)", "jnp.split(x, x.shape[1], axis=-1)", "number of parts not written"),
    ('jnp.einsum("bqhd,bkhd->bhqk", q, k)', 'jnp.einsum("bqhd,ckhd->bhqk", q, k)', "sums over or moves the batch"),
    ('jnp.einsum("bqhd,bkhd->bhqk", q, k)', 'jnp.einsum("bqhd,bkhd->hbqk", q, k)', "sums over or moves the batch"),
    ('jnp.einsum("bqhd,bkhd->bhqk", q, k)', 'jnp.einsum("...qhd,...khd->...hqk", q, k)', "not written out here"),
    ('x @ layer["gate"]], axis=-1)', 'x @ layer["gate"]])', "`stack` along the batch axis"),
    ("jnp.swapaxes(x, 1, 2)", "jnp.swapaxes(x, 0, 2)", "moves the batch axis"),
    ("jnp.repeat(k, HEADS, axis=2)", "jnp.repeat(k, HEADS, axis=0)", "`repeat` along the batch axis"),
    ("jnp.repeat(k, HEADS, axis=2)", "jnp.repeat(k, HEADS)", "`repeat` along the batch axis"),
    (".transpose(0, 2, 1, 3)", ".transpose(2, 0, 1, 3)", "`.transpose(...)` of per-device values"),
    ("jnp.moveaxis(out, 1, 2)", "jnp.moveaxis(out, 0, 2)", "moves the batch axis"),
    ("jnp.roll(jnp.flip(pooled, axis=-1), 1, axis=-1)", "jnp.roll(jnp.flip(pooled, axis=-1), 1, axis=0)",
     "`roll` along the batch axis"),
    ("jnp.roll(jnp.flip(pooled, axis=-1), 1, axis=-1)", "jnp.roll(jnp.flip(pooled), 1, axis=-1)",
     "`flip` along the batch axis"),
    ("jnp.expand_dims(pooled @ params[\"head\"], axis=1).squeeze(1)",
     "jnp.expand_dims(pooled @ params[\"head\"], axis=0).squeeze(0)", "`expand_dims` along the batch axis"),
    ("jnp.expand_dims(pooled @ params[\"head\"], axis=1).squeeze(1)",
     "jnp.expand_dims(pooled @ params[\"head\"], axis=1).squeeze()", "`.squeeze(...)` of per-device values"),
])
def test_arrays_joined_split_or_reordered_along_the_batch_axis_block(old, new, reason):
    """The step's pmean blocks, naming the line that mixes examples."""
    assert plan_global(_ATTENTION).possible
    text = _ATTENTION.replace(old, new)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if new in t)
    view = plan_global(text)
    assert not view.possible and reason in view.reason and f"(line {line})" in view.reason, view.blocker


# Attention written with `@`, as hand-written transformers do: both operands per-example with
# four axes, so the product broadcasts the batch axis (tests/test_runtime_global_view.py runs it).
ATTENTION_BY_MATMUL = (
    '''    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(HEAD_DIM)
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", weights, v)
''',
    '''    q = q.transpose(0, 2, 1, 3)
    k = k.transpose(0, 2, 1, 3)
    scores = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(HEAD_DIM)
    scores = jnp.where(scores > -1e9, scores, -1e9)
    weights = jax.nn.softmax(scores, axis=-1)
    return (weights @ v.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
''')


def test_attention_written_with_matmul_of_four_axis_arrays_takes_the_global_view():
    text = _ATTENTION.replace(*ATTENTION_BY_MATMUL)
    assert text != _ATTENTION
    assert plan_global(text).possible, plan_global(text).blocker


@pytest.mark.parametrize(("old", "new"), [
    # rows of every example against rows of every example
    ("(q @ k.transpose(0, 1, 3, 2))", "(q.reshape(-1, HEAD_DIM) @ k.reshape(-1, HEAD_DIM).T)"),
    ("(q @ k.transpose(0, 1, 3, 2))", "jnp.dot(q, k.transpose(0, 1, 3, 2))"),  # every row with every row
    ("(q @ k.transpose(0, 1, 3, 2))", "(q @ jnp.conj(k).T)"),  # k's axes not known here
])
def test_a_matmul_of_per_example_arrays_not_known_to_broadcast_the_batch_blocks(old, new):
    """Two axes or fewer (or axes not known), or `jnp.dot`: the product would multiply the batch."""
    text = _ATTENTION.replace(*ATTENTION_BY_MATMUL)
    assert plan_global(text).possible
    text = text.replace(old, new)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if new in t)
    view = plan_global(text)
    assert not view.possible and f"(line {line})" in view.reason, view.blocker


_KEYS_IN_A_DICT = (FIXTURES / "keys_in_a_dict.in.py").read_text()
_SHARDED_BATCH = "        state, train_metric, dropout_rngs = p_train_step(state, shard(batch), dropout_rngs)\n"


@pytest.mark.parametrize(("split", "taken"), [
    ("{k: v.reshape((jax.local_device_count(), -1) + v.shape[1:]) for k, v in batch.items()}", True),
    ("{k: jnp.array(v).reshape((jax.local_device_count(), -1) + v.shape[1:]) for k, v in batch.items()}", True),
    # filtered, or keyed otherwise: not a map over every value
    ("{k: v.reshape((jax.local_device_count(), -1) + v.shape[1:]) for k, v in batch.items() if k}", False),
    ("{k.upper(): v.reshape((jax.local_device_count(), -1) + v.shape[1:]) for k, v in batch.items()}", False),
    # a value split by something else than the device count
    ("{k: v.reshape((2, -1) + v.shape[1:]) for k, v in batch.items()}", False),
])
def test_a_batch_split_by_a_dict_comprehension_is_a_tree_map_of_the_split(split, taken):
    text = _KEYS_IN_A_DICT.replace(_SHARDED_BATCH, f"        batch = {split}\n"
                                   + _SHARDED_BATCH.replace("shard(batch)", "batch"))
    assert text != _KEYS_IN_A_DICT
    view = plan_global(text)
    assert view.possible == taken, view.blocker
    if taken:
        assert "for k, v in batch.items()" in fix(text, set())


_MATMUL_ATTENTION = (FIXTURES / "matmul_attention_given_its_arrays.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker"), [
    # a caller's array of two axes: -2 is the batch axis
    ("    out = attend(q, k, k)\n", "    out = attend(q, k, k)\n    attend(x[:, 0], x[:, 0], x[:, 0])\n",
     "weights = jax.nn.softmax(q @"),
    # axes not known where the function is passed on rather than called
    ("    out = attend(q, k, k)\n", "    out = attend(q, k, k)\n    jax.tree.map(attend, q, k, k)\n",
     "weights = jax.nn.softmax(q @"),
])
def test_negative_axes_of_arrays_not_known_to_have_three_block(old, new, marker):
    """`jnp.swapaxes(k, -1, -2)` keeps the batch axis first only where k has three axes or more."""
    assert plan_global(_MATMUL_ATTENTION).possible, plan_global(_MATMUL_ATTENTION).blocker
    text = _MATMUL_ATTENTION.replace(old, new)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if marker in t)
    view = plan_global(text)
    assert not view.possible and f"(line {line})" in view.reason, view.blocker


_FACTORY = (FIXTURES / "step_from_factory.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    return jax.pmap(functools.partial(train_step,", "    if learning_rate is None:\n        return None\n"
                 "    return jax.pmap(functools.partial(train_step,", "return None",
                 "returns the pmapped step at line", id="returns something else too"),
    pytest.param("    p_train_step = make_train_step(0.1)", "    p_train_step = make_train_step(0.1)\n"
                 "    steps_by_name = {'train': make_train_step}", "steps_by_name",
                 "is used other than in `name = make_train_step(...)`", id="used as a value"),
    pytest.param("def main(steps=3):", "P_TRAIN_STEP = make_train_step(0.1)\n\n\ndef main(steps=3):",
                 "P_TRAIN_STEP =", "is called outside the code that calls the step", id="called at import"),
    pytest.param("    p_eval_step = make_eval_step(2.0)", "    p_eval_step = make_eval_step(params)",
                 "make_eval_step(params)", "has pmap's device axis here", id="given a device value"),
    pytest.param("        params, loss = p_train_step(params, batch)",
                 "        params, loss = p_train_step(params, batch)\n        p_train_step = len", "p_train_step(params, batch)",
                 "may be the step `make_train_step(...)` makes or another value", id="rebound"),
])
def test_a_factory_whose_step_cannot_be_followed_blocks_with_the_line(old, new, marker, reason):
    text = _FACTORY.replace(old, new)
    if "make_eval_step(params)" in text:  # params must exist before the factory's call
        text = text.replace("    p_eval_step = make_eval_step(params)\n", "").replace(
            "    rng = np.random.default_rng(0)", "    p_eval_step = make_eval_step(params)\n    rng = np.random.default_rng(0)")
    assert text != _FACTORY
    assert_blocks_at(text, marker, reason)


_READERS = (FIXTURES / "functions_given_step_values.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    rng = np.random.default_rng(0)\n", "    rng = np.random.default_rng(0)\n"
                 "    log_loss(np.zeros((n,)), -1)\n", "log_loss(np.zeros", "is called or used here where this fix "
                 "does not read it", id="also given a host value"),
    pytest.param("    rng = np.random.default_rng(0)\n", "    rng = np.random.default_rng(0)\n"
                 "    hooks = [log_loss]\n", "hooks = [log_loss]", "is called or used here where this fix does not "
                 "read it", id="used as a value"),
    pytest.param('    """Keep the first replica\'s copy, on the host."""\n',
                 '    """Keep the first replica\'s copy, on the host."""\n    print(params[1])\n',
                 "print(params[1])", "indexes a value with pmap's device axis", id="reads another device's copy"),
    pytest.param("        save_checkpoint(params, step)", "        save_checkpoint(params, **{'step': step})",
                 "save_checkpoint(params, **", "has pmap's device axis here", id="starred arguments"),
])
def test_a_function_given_step_values_that_cannot_be_read_blocks(old, new, marker, reason):
    text = _READERS.replace(old, new)
    assert text != _READERS
    assert_blocks_at(text, marker, reason)


def test_a_key_folded_with_another_axis_index_blocks():
    text = (FIXTURES / "fold_in_axis_index.in.py").read_text()
    text = text.replace('lax.axis_index("batch")', 'lax.axis_index("model")')
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if 'dropout_key = ' in t)
    assert not view.possible and view.line == line and "`axis_index` has no global-view equivalent" in view.reason


def test_a_parameter_of_a_driving_function_is_traced_to_what_its_caller_passed():
    # brax's PPO: the state reaches the step through `training_epoch_with_timing(state, keys)`;
    # what blocks is the replication onto a slice of the devices, at the caller, and the finding
    # says so (it used to stop at the parameter's name).
    text = textwrap.dedent("""\
        import jax


        def train(state, batches, local_devices_to_use):
            def training_epoch(state, batch):
                return jax.lax.pmean(state, "i"), batch

            training_epoch = jax.pmap(training_epoch, axis_name="i")

            def training_epoch_with_timing(state, batch):
                return training_epoch(state, batch)

            state = jax.device_put_replicated(
                state,
                jax.local_devices()[:local_devices_to_use])
            for batch in batches:
                state, _ = training_epoch_with_timing(state, batch)
            return state
        """)
    view = plan_global(text)
    assert not view.possible and view.line == 11, view.blocker
    assert "; `jax.device_put_replicated(state, jax.local_devices()[:" in view.reason
    assert "(line 13) replicates onto `jax.local_devices()[:local_devices_to_use]`" in view.reason


_OBJECT = (FIXTURES / "step_on_an_object.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    return trainer.result()", "    print(trainer.params)\n    return trainer.result()",
                 "print(trainer.params)", "`.params` is read here, where this fix does not follow it",
                 id="an attribute read from outside"),
    pytest.param("        self.losses = []\n", "        self.losses = []\n        register(self)\n", "register(self)",
                 "`self` is passed on here", id="self passed on"),
    pytest.param("def main(steps=3):", "class Tuned(Trainer):\n    pass\n\n\ndef main(steps=3):", "class Tuned",
                 "derives from `Trainer`", id="a subclass"),
    pytest.param("class Trainer:", "class Trainer(Base):", "class Trainer(Base)", "has a base class",
                 id="a base class"),
    pytest.param("    def result(self):\n", "    def reset(self, params):\n        self.params = params\n\n"
                 "    def result(self):\n", "self.params = params",
                 "holds values with pmap's device axis and values without it", id="a host value assigned too"),
    pytest.param("    return trainer.result()", "    trainer._log(np.zeros(8))\n    return trainer.result()",
                 "trainer._log(", "`Trainer._log` is given values with pmap's device axis elsewhere",
                 id="a method given the step's values, called from outside too"),
    pytest.param("    def result(self):\n", "    def clear(self):\n        self._log(np.zeros(8))\n\n"
                 "    def result(self):\n", "self._log(np.zeros(8))", "is called here with values whose device axis "
                 "differs from its call at line", id="a method given the step's values and host values"),
    pytest.param("class Trainer:\n", "class Trainer:\n    params = None\n\n", "    params = None",
                 "has a class-level value too", id="a class-level value"),
    pytest.param("        self.params, loss = self.p_train_step(self.params, batch)",
                 "        step = self.p_train_step\n        self.params, loss = step(self.params, batch)",
                 "step = self.p_train_step", "is used other than by calling it", id="the step as a value"),
])
def test_an_object_whose_attributes_escape_blocks_with_the_line(old, new, marker, reason):
    text = _OBJECT.replace(old, new)
    assert text != _OBJECT
    assert_blocks_at(text, marker, reason)


@pytest.mark.parametrize(("step", "reason"), [
    ("jax.pmap(env.reset, axis_name='i')", "(`env.reset`, a method or attribute: the body run is not known here)"),
    ("jax.pmap(functools.partial(utils.rng_for, axis_name='i'), axis_name='i')",
     "(a `partial` of `utils.rng_for`, a function of another module or object: its collectives cannot be"),
])
def test_a_pmapped_function_whose_body_is_elsewhere_is_named(step, reason):
    text = f"import functools\nimport jax\nimport utils\n\n\ndef run(env, x):\n    f = {step}\n    return f(x)\n"
    view = plan_global(text)
    assert not view.possible and view.line == 7 and reason in view.reason, view.blocker


def test_a_name_bound_to_a_partial_is_followed_to_its_def():
    text = ("import functools\nimport jax\n\n\ndef step(x, scale):\n    return jax.lax.all_gather(x, 'i') * scale\n\n\n"
            "def run(x):\n    f = functools.partial(step, scale=2.0)\n    return jax.pmap(f, axis_name='i')(x)\n")
    view = plan_global(text)
    # The def is read (its all_gather is what blocks), not refused as an unknown function.
    assert not view.possible and "is not a `def`" not in view.reason, view.blocker


@pytest.mark.parametrize(("old", "new", "reason"), [
    ('jax.jit(jax.pmap(train_step, axis_name="batch"))', 'jax.jit(jax.pmap(train_step, axis_name="batch", donate_argnums=0))',
     "`donate_argnums=` on a pmap that `jax.jit` wraps"),
    ('jax.jit(jax.pmap(train_step, axis_name="batch"))', 'jax.jit(jax.pmap(train_step, axis_name="batch"), inline=True)',
     "the pmapped function is passed to another call"),
])
def test_a_jitted_pmap_with_options_blocks(old, new, reason):
    text = (FIXTURES / "jit_of_pmap.in.py").read_text().replace(old, new)
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if "step = jax.jit(" in t)
    assert not view.possible and view.line == line and reason in view.reason, view.blocker


_INIT = (FIXTURES / "pmap_of_an_init_function.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("jax.pmap(opt_init)(params)", "jax.pmap(opt_init)(jnp.ones((n, 4)))", "jax.pmap(opt_init)(jnp.ones",
                 "is not shown replicated: pmap maps `opt_init`, whose body is not known here", id="given a host value"),
    pytest.param("        y = y.reshape((n, -1) + y.shape[1:])\n", "        y = y.reshape((n, -1) + y.shape[1:])\n"
                 "        jax.pmap(opt_init)(x)\n", "jax.pmap(opt_init)(x)", "is not shown replicated",
                 id="given a batch split over the devices"),
    pytest.param("jax.pmap(opt_init)(params)", "jax.pmap(opt_init, axis_name='device')(params)",
                 "axis_name='device')(params)", "(`opt_init` is not bound once, to a `def`, above the pmap)",
                 id="with an axis name, which its collectives may use"),
    pytest.param("jax.pmap(opt_init)(params)", "jax.pmap(opt_init)(params=params)", "(params=params)",
                 "(`opt_init` is not bound once, to a `def`, above the pmap)", id="called with keywords"),
])
def test_a_pmapped_function_of_unknown_body_is_followed_only_on_replicated_values(old, new, marker, reason):
    text = _INIT.replace(old, new)
    assert text != _INIT
    assert_blocks_at(text, marker, reason)


def test_a_pmapped_function_of_unknown_body_may_be_given_a_steps_replicated_output():
    # `last` is the step's output, known only from the analysis's second round on.
    text = _INIT.replace('    return {"losses": jnp.stack(losses),',
                         '    last, _, _ = update_fn(params, opt_state, x, y)\n    fresh = jax.pmap(opt_init)(last)\n'
                         '    return {"fresh": jax.tree_util.tree_map(lambda p: p[0], fresh), "losses": jnp.stack(losses),')
    assert text != _INIT
    assert plan_global(text).possible
    assert "fresh = jax.jit(opt_init, out_shardings=NamedSharding(mesh, P()))(last)" in fix(text, set())


def test_replicas_on_jax_devices_are_followed_only_in_a_module_run_as_one_process():
    assert plan_global(_INIT).possible  # `jax.device_put_replicated(params, list(jax.devices()))`
    several = _INIT.replace("    n = jax.local_device_count()\n",
                            "    n = jax.local_device_count()\n    print(jax.process_index())\n")
    view = plan_global(several)
    # With several processes the old call fails (another process's devices): `params` is not
    # taken for replicated, and its first use says so.
    line = next(i + 1 for i, t in enumerate(several.splitlines()) if "jax.pmap(opt_init)(params)" in t)
    assert not view.possible and view.line == line and "(`params`) is not shown replicated" in view.reason, \
        view.blocker


def test_a_batch_stacked_one_value_per_device_is_named_as_such():
    # jraph's OGB trainer: each device gets a whole padded graph batch of its own.
    text = textwrap.dedent('''\
        import functools

        import jax
        import jax.numpy as jnp


        def device_batch(batches):
            group = []
            for batch in batches:
                group.append(batch)
                if len(group) == jax.local_device_count():
                    yield jax.tree_util.tree_map(lambda *x: jnp.stack(x, axis=0), *group)
                    group = []


        @functools.partial(jax.pmap, axis_name="i")
        def step(params, batch):
            return params - jax.lax.pmean(jnp.mean(batch), "i")


        def main(params, batches):
            params = jax.device_put_replicated(params, jax.local_devices())
            for batch in device_batch(batches):
                params = step(params, batch)
            return params[0]
        ''')
    view = plan_global(text)
    assert not view.possible and view.line == 24, view.blocker
    assert "`device_batch(batches)` (line 23) gives values stacked on a new leading axis (`jnp.stack(x, axis=0)`, " \
           "line 12): one whole value per device" in view.reason, view.blocker
    # A stack of `split(x, n)` (evojax's `split_params_for_pmap`) is slices of one batch: not named so.
    split = text.replace("jnp.stack(x, axis=0)", "jnp.stack(jnp.split(x[0], jax.local_device_count()))")
    view = plan_global(split)
    assert not view.possible and "stacked on a new leading axis" not in view.reason, view.blocker


_FLAX_MODEL = (FIXTURES / "flax_dropout_model.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param('    eval_batch = {"x"', '    print(state.params["Dense_0"]["kernel"].shape)\n    eval_batch = {"x"',
                 ".shape)", "has pmap's device axis here", id="the shape of a replicated array counts devices"),
    pytest.param('    eval_batch = {"x"', '    print(state.step.sharding)\n    eval_batch = {"x"', ".sharding)",
                 "has pmap's device axis here", id="its sharding is pmap's"),
    pytest.param('batch["x"], mutable=False)', 'batch["x"], mutable=["batch_stats"])',
                 'return jax.lax.pmean({"loss": loss}', "applied with `mutable=`",
                 id="a model that updates its statistics"),
    pytest.param('rngs={"dropout": dropout_rng})\n', 'rngs={"dropout": dropout_rng})\n'
                 "        logits = logits + jax.random.normal(dropout_rng, (4,))\n", 'grad = jax.lax.pmean(grad',
                 "`normal` draws one value per device under pmap", id="a draw that is not per example"),
])
def test_a_flax_model_step_blocks_where_pmap_and_the_global_view_differ(old, new, marker, reason):
    text = _FLAX_MODEL.replace(old, new)
    assert text != _FLAX_MODEL
    assert_blocks_at(text, marker, reason)


def test_a_field_of_a_replicated_state_is_replicated():
    fixed = fix(_FLAX_MODEL, set())
    assert "p_eval_step(\n        state.params," in fixed
    assert '"params": state.params,' in fixed  # unreplicate(state.params): the index goes
    assert "dropout_rngs = jax.device_put(rng, NamedSharding(mesh, P()))" in fixed


def test_a_field_of_a_steps_output_is_read_in_the_loop_that_calls_it():
    text = _FLAX_MODEL.replace("        train_metrics.append(train_metric)\n",
                               "        train_metrics.append(train_metric)\n"
                               "        seen = p_eval_step(state.params, shard(batch))\n"
                               "        print(jax_utils.unreplicate(seen))\n")
    assert text != _FLAX_MODEL
    assert plan_global(text).possible, plan_global(text).blocker


def test_what_the_step_cannot_compute_is_named_before_where_its_outputs_are_read():
    # A metric scaled by the device's own batch size: pmap returns one per device, the global view
    # would scale by the whole batch's. The finding names the step, not the loop reading its output.
    text = _FLAX_MODEL.replace('metrics = jax.lax.pmean({"loss": loss}, axis_name="batch")',
                               'metrics = {"loss": loss * batch["y"].shape[0]}')
    assert text != _FLAX_MODEL
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if "return new_state, metrics" in t)
    assert not view.possible and view.line == line and "`p_train_step` returns" in view.reason \
        and "of a per-shard mean and the number of the device's examples" in view.reason, view.blocker


_HF = (FIXTURES / "hugging_face_train_state.in.py").read_text()


def test_a_state_field_replicate_made_one_key_per_device_is_read_as_per_device_keys():
    # `state.dropout_rng` is device d's own key under pmap (`shard_prng_key`): a draw of a fixed
    # shape from it is one value per device, one in all in the global view.
    text = _HF.replace("            return loss_fn(logits, labels)\n",
                       "            return loss_fn(logits, labels) + jax.random.normal(state.dropout_rng, ()).sum()\n")
    assert text != _HF
    view = plan_global(text)
    assert not view.possible and "`normal` draws one value per device under pmap" in view.reason, view.blocker


@pytest.mark.parametrize(("old", "new", "kept"), [
    pytest.param("", "", False, id="a script's, called only where the fix rewrote it"),
    pytest.param('if __name__ == "__main__":\n    main()\n', "", True, id="a library module: others may call it"),
    pytest.param("    state = state.replicate()\n", "    state = state.replicate()\n    again = state.replicate\n",
                 True, id="read as a value elsewhere"),
])
def test_the_replicate_method_goes_only_where_nothing_else_may_call_it(old, new, kept):
    text = _HF.replace(old, new)
    assert text != _HF or not old
    fixed = fix(text, set())
    assert ("    def replicate(self):" in fixed) is kept
    assert "state = jax.device_put(state, NamedSharding(mesh, P()))" in fixed


def test_each_pmap_names_its_own_axis():
    # flax's ImageNet example syncs statistics with a second pmap over another axis name.
    text = _FLAX_MODEL.replace("model = Classifier()\n", 'model = Classifier()\ncross_replica_mean = '
                               'jax.pmap(lambda x: jax.lax.pmean(x, "x"), "x")\n').replace(
        '    return {"params": jax_utils.unreplicate(state.params),',
        '    synced = cross_replica_mean(state.params)\n    return {"params": jax_utils.unreplicate(synced),')
    assert text != _FLAX_MODEL
    view = plan_global(text)
    assert view.possible, view.blocker
    fixed = fix(text, set())
    assert "cross_replica_mean = jax.jit(lambda x: x)" in fixed and '("batch",)' in fixed


_SYNCED = (FIXTURES / "batch_stats_synced_before_eval.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param("    return state.replace(batch_stats=cross_replica_mean(state.batch_stats))\n",
                 "    return state.replace(batch_stats=jnp.zeros(3))\n",
                 "`state.replace` has pmap's device axis here", id="a field swapped for a host value"),
    pytest.param("    if not state.batch_stats:\n",
                 "    if not state.batch_stats[\"dense\"].shape:\n",
                 "has pmap's device axis", id="a test of the device-axis shape"),
    pytest.param("        state = sync_batch_stats(state)\n",
                 "        if not batch:\n            continue\n        state = sync_batch_stats(state)\n",
                 "`batch` has pmap's device axis here", id="the truth of a split batch"),
])
def test_a_replicated_state_synced_by_a_helper_blocks_only_off_its_forms(old, new, reason):
    assert_variant_blocked_for(_SYNCED, old, new, reason)


_MADE = (FIXTURES / "step_made_by_a_function.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param("    train_step = make_train_step(optimizer)\n",
                 "    train_step = make_train_step(optimizer)\n    single = make_train_step(optimizer)\n",
                 "`make_train_step` makes the step pmapped at line", id="the maker called again"),
    pytest.param("    p_eval_step = jax.pmap(eval_step, axis_name=\"devices\")\n",
                 "    p_eval_step = jax.pmap(eval_step, axis_name=\"devices\")\n    steps = [train_step]\n",
                 "`train_step`, the step `make_train_step` makes for the pmap at line", id="what it makes used again"),
    pytest.param("    def train_step(params, opt_state, batch):\n",
                 "    @jax.named_call\n    def train_step(params, opt_state, batch):\n",
                 "is decorated: what the pmap runs is not its body", id="what it makes decorated"),
    pytest.param("    train_step = make_train_step(optimizer)\n    p_train_step = jax.pmap(train_step,",
                 "    single = make_train_step(optimizer)\n    p_train_step = jax.pmap(make_train_step(optimizer),",
                 "`make_train_step` makes the step pmapped at line", id="given straight to pmap, and called again"),
])
def test_a_step_a_function_makes_moves_only_where_the_pmap_alone_takes_it(old, new, reason):
    assert_variant_blocked_for(_MADE, old, new, reason)


def test_a_comment_over_dropped_pmeans_goes_with_them_where_it_speaks_of_them_alone():
    commented = _MADE.replace("        grads = jax.lax.pmean(grads, axis_name=\"devices\")\n",
                              "        # Average across devices.\n        grads = jax.lax.pmean(grads, axis_name=\"devices\")\n")
    assert commented != _MADE
    fixed = fix(commented, set())
    assert "Average across devices" not in fixed and "(params, batch)\n\n        updates, opt_state" in fixed
    # Followed by a statement that stays in the same paragraph, it may speak of that one too: it stays.
    kept = _TOKENS.replace("    grads = jax.lax.pmean(grads, axis_name=\"batch\")\n",
                           "    # Average, then update.\n    grads = jax.lax.pmean(grads, axis_name=\"batch\")\n")
    assert kept != _TOKENS and "    # Average, then update.\n    updates, opt_state" in fix(kept, set())
    # One that speaks of devices would be wrong of the global view wherever it is: it goes.
    devices = kept.replace("# Average, then update.", "# Every device has its own gradients: average them.")
    assert devices != kept and "Every device" not in fix(devices, set()) and "    updates, opt_state" in fix(devices, set())


def test_a_tree_map_of_a_dropped_pmean_goes_with_the_blank_line_its_block_leaves():
    fixed = fix(_MADE, set())
    assert "tree_map(lambda x: x, metrics)" not in fixed and "metrics = " not in fixed.split("def eval_step")[0]
    assert "(params, batch)\n\n        updates, opt_state" in fixed


_TOKENS = (FIXTURES / "token_rows_merged_in_the_loss.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("logits.reshape(B * T, C)", "logits.reshape(32, C)", "jax.lax.pmean(grads",
                 "a reshape of per-example values that does not keep whole rows leading", id="a fixed row count"),
    pytest.param("logits.reshape(B * T, C)", "logits.reshape(2, -1)", "jax.lax.pmean(grads",
                 "a reshape of per-example values that does not keep whole rows leading", id="the rows split in two"),
    pytest.param("labels = targets.reshape(B * T)", "labels = targets.reshape(B * T + 1)", "jax.lax.pmean(grads",
                 "`+` of", id="a row count added to"),
    pytest.param('    x = params["embed"][tokens]\n', '    x = params["embed"][:, tokens].T\n', "jax.lax.pmean(grads",
                 "a replicated value indexed by per-device values other than per-example indices first",
                 id="a table indexed by tokens along another axis"),
    pytest.param("    return jax.lax.pmean(loss.mean(), axis_name=\"batch\")\n",
                 "    return jax.lax.psum(jnp.sum(params[\"out\"][targets]), axis_name=\"batch\")\n",
                 None, None, id="rows gathered from a table are per example: their psum is a sum, dropped"),
    pytest.param("    n = jax.local_device_count()\n", "    n = jax.local_device_count()\n    print(x.shape)\n",
                 None, None, id="a batch function's host batch read before its split"),
    pytest.param("def update(params, opt_state, inputs, targets):\n",
                 "def update(params, opt_state, inputs, targets, scale=1.0):\n", None, None,
                 id="a step's parameter left to its default"),
    pytest.param("def update(params, opt_state, inputs, targets):\n",
                 "def update(params, opt_state, inputs, targets, scale):\n",
                 "params, opt_state, loss = p_update(", "`p_update` is called with 4 arguments",
                 id="a step's parameter without a default not given"),
    pytest.param("    xb, yb = get_batch(data, rng, 16)\n    losses.append",
                 "    xb, yb = get_batch(data, rng, 16)\n    print(xb.shape)\n    losses.append",
                 "print(xb.shape)", "`xb` has pmap's device axis here", id="the batch a function split, read"),
    pytest.param("    losses = []\n", "    losses = []\n    sources = [get_batch]\n", "sources = [get_batch]",
                 "`get_batch` returns batches it splits per device elsewhere", id="the batch function used as a value"),
])
def test_rows_merged_in_a_loss_and_batches_a_function_splits(old, new, marker, reason):
    if marker is None:
        text = _TOKENS.replace(old, new)
        assert text != _TOKENS
        assert plan_global(text).possible, plan_global(text).blocker
        if "psum" in new:
            fixed = fix(text, set())
            assert "return jnp.sum(params[\"out\"][targets])\n" in fixed
        return
    assert_variant_blocks(_TOKENS, old, new, marker, reason)


def test_the_dtype_of_a_per_example_array_is_every_devices():
    """`.astype(x.dtype)` of per-example values (a layer norm computed in float32 and cast back):
    the dtype is the same on every device and globally, as the rank is."""
    text = _TOKENS.replace('    x = jnp.tanh(x @ params["hidden"])\n',
                           '    x = jnp.tanh(x.astype(jnp.float32) @ params["hidden"]).astype(x.dtype)\n')
    assert text != _TOKENS and plan_global(text).possible, plan_global(text).blocker


@pytest.mark.parametrize(("argument", "possible"), [
    ("jnp.asarray(xb, dtype=jnp.int32)", True),
    ("np.array(xb)", True),
    ("xb.astype(np.int32)", True),
    ("xb.astype(dtype=np.int32)", True),
    ("jnp.asarray(xb, order=\"F\")", False),  # (a keyword other than the dtype)
    ("xb.view(np.int32)", False),  # (a reinterpretation, not a conversion of each element)
])
def test_a_split_batch_converted_element_by_element_is_the_same_split(argument, possible):
    text = _TOKENS.replace("p_update(params, opt_state, xb, yb)", f"p_update(params, opt_state, {argument}, yb)")
    assert text != _TOKENS
    view = plan_global(text)
    assert view.possible is possible, view.blocker
    if possible:  # (the layout around the conversion, however the lines are wrapped)
        squashed = "".join(fix(text, set()).split())
        assert "".join(f'NamedSharding(mesh, P("batch")), {argument}'.split()) in squashed


_CONV_NET = (FIXTURES / "conv_net_written_with_lax.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param('padding="SAME",\n', 'padding="SAME",\n        batch_group_count=2,\n',
                 "whose batch is not the first axis", id="examples convolved in groups"),
    pytest.param('("NHWC", "HWIO", "NHWC")', '("HNWC", "HWIO", "NHWC")', "whose batch is not the first axis",
                 id="the batch not the input's first axis"),
    pytest.param("tuple(range(1, probs.ndim))", "tuple(range(0, probs.ndim))", "`sum` over the batch axis",
                 id="every axis, the batch's too"),
])
def test_a_convolution_or_a_reduction_over_the_batch_axis_blocks(old, new, reason):
    assert_variant_blocks(_CONV_NET, old, new, "grads = lax.pmean(", reason)


_VMAPPED = (FIXTURES / "per_example_model_vmapped.in.py").read_text()
_VMAPPED_LOSS = "    logits = jax.vmap(predict, in_axes=(None, 0, None))(params, x, TIME)\n"


@pytest.mark.parametrize(("new", "reason"), [
    pytest.param("    logits = jax.vmap(predict, in_axes=(None, 0, None), axis_name='i')(params, x, TIME)\n",
                 "a `jax.vmap` with options other than `in_axes=`", id="a named vmap axis"),
    pytest.param("    logits = jax.vmap(predict, in_axes=(None, 1, None))(params, x, TIME)\n",
                 "`in_axes=` of a `jax.vmap` other than 0 or 0 / None per argument", id="mapped over another axis"),
    pytest.param("    logits = jax.vmap(predict, in_axes=(None, None, 0))(params, x, TIME)\n",
                 "a `jax.vmap` given a per-device value other than per-example rows mapped", id="the batch unmapped"),
    pytest.param("    center = x.mean(0)\n    logits = jax.vmap(lambda row: predict(params, row - center, TIME))(x)\n",
                 "a `jax.vmap`ped function that reads per-device values from around it", id="a closure over the batch"),
    pytest.param("    logits = jax.vmap(lambda row: jax.lax.pmean(predict(params, row, TIME), 'batch'))(x)\n",
                 "a collective inside a `jax.vmap`ped function", id="a collective inside"),
])
def test_a_vmap_over_the_examples_is_per_example_only_in_its_plain_forms(new, reason):
    assert_variant_blocked_for(_VMAPPED, _VMAPPED_LOSS, new, reason)


def test_an_equinox_model_vmapped_and_its_filtered_gradient_are_followed():
    # Equinox's idiom (a model for one example, `eqx.filter_value_and_grad`): read without equinox.
    text = _VMAPPED.replace("import optax\n", "import equinox as eqx\nimport optax\n").replace(
        "    loss, grads = jax.value_and_grad(compute_loss)(params, x, y)\n",
        "    loss, grads = eqx.filter_value_and_grad(compute_loss)(params, x, y)\n").replace(
        _VMAPPED_LOSS, "    logits = jax.vmap(params, in_axes=(0, None))(x, TIME)\n")
    assert "eqx.filter_value_and_grad" in text and "jax.vmap(params," in text
    view = plan_global(text)
    assert view.possible, view.blocker
    assert "grads = jax.lax.pmean" not in fix(text, set())


def test_a_helper_that_goes_takes_the_comment_right_above_it_and_leaves_one_set_apart():
    source = (FIXTURES / "replicate_helpers.in.py").read_text()
    text = source.replace("def replicate(tree):", "# Copies every leaf onto each local device.\ndef replicate(tree):").replace(
        "def unreplicate(tree):", "# Helpers.\n\n\ndef unreplicate(tree):")
    text += '\n\nif __name__ == "__main__":\n    train(None, [])\n'  # (a script's helpers may go)
    assert text.count("# ") >= source.count("# ") + 2
    fixed = fix(text, set())
    assert "def replicate(" not in fixed and "def unreplicate(" not in fixed
    assert "Copies every leaf" not in fixed and "# Helpers.\n" in fixed


@pytest.mark.parametrize("marker", ["# %%", "#%% helpers", "# In[3]:"])
def test_a_helper_that_goes_leaves_the_notebook_cell_marker_above_it(marker):
    source = (FIXTURES / "replicate_helpers.in.py").read_text()
    text = source.replace("def replicate(tree):", f"{marker}\n# Copies every leaf onto each device.\ndef replicate(tree):")
    text += '\n\nif __name__ == "__main__":\n    train(None, [])\n'
    fixed = fix(text, set())
    assert "def replicate(" not in fixed and "Copies every leaf" not in fixed
    assert f"\n{marker}\n" in fixed


_SEVERAL_PROCESSES = """import jax
import jax.numpy as jnp


def step(w, x):
    return w - 0.1 * jax.lax.pmean(jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w), "i")


def fit(w, x):
    jax.distributed.initialize()
    w = jax.device_put_replicated(w, jax.devices())
    x = x.reshape((jax.local_device_count(), -1) + x.shape[1:])
    return jax.pmap(step, axis_name="i")(w, x)[0]
"""


def test_a_replication_onto_jax_devices_is_every_local_device_wherever_it_runs():
    # With several processes `jax.devices()` holds devices this process cannot reach, and the copy
    # raises: where the original runs, they are the process's own.
    view = plan_global(_SEVERAL_PROCESSES)
    assert view.possible, view.blocker
    assert "jax.device_put(w, NamedSharding(mesh, P()))" in fix(_SEVERAL_PROCESSES, set())
    # Another list of every device is not shown to be the local ones.
    other = _SEVERAL_PROCESSES.replace("jax.devices())", "jax.devices()[:4])")
    assert not plan_global(other).possible


_GENERATORS = (FIXTURES / "batches_from_generators.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    batches = data_stream(32)\n",
                 "    batches = data_stream(32)\n    print(next(batches)[0].shape)\n",
                 "print(next(batches)", "has pmap's device axis here", id="a batch read on the host"),
    pytest.param("    batches = data_stream(32)\n", "    batches = data_stream(32)\n    seen = list(data_stream(8))\n",
                 "list(data_stream(8))", "has pmap's device axis here", id="the generator consumed whole"),
    pytest.param("        batch = shard(batch)\n", "        if steps > 1:\n            batch = shard(batch)\n",
                 "evaluate(replicated_params, batch)", "not made by a replicate, shard",
                 id="split on some paths only"),
])
def test_a_generators_batches_used_where_the_fix_cannot_lay_them_out_block(old, new, marker, reason):
    text = _GENERATORS.replace(old, new)
    assert text != _GENERATORS
    assert_blocks_at(text, marker, reason)


def test_jax_device_count_counts_the_devices_pmap_maps_only_in_one_process():
    several = _GENERATORS.replace("    num_devices = jax.device_count()\n",
                                  "    num_devices = jax.device_count()\n    print(jax.process_index())\n")
    view = plan_global(several)
    # (its `(num_devices,) + x.shape` is no longer a copy per local device, nor its reshapes a split)
    assert not view.possible and "(`replicated_params`) is not made by a replicate" in view.reason, view.blocker


def test_a_generator_of_host_batches_is_any_function_given_host_values():
    # run_clm_flax's data_loader reshapes its indices, yields host batches, and is called with a
    # keyword once: it is nothing the fix reads.
    text = _HF.replace("    for _ in range(steps):\n",
                       "    order = np.arange(steps * batch_size).reshape((steps, batch_size))\n"
                       "    for _ in order:\n").replace("data_loader(data, 16, 4)", "data_loader(data, 16, steps=4)")
    assert text.count("steps=4") == 1 and "order" in text
    view = plan_global(text)
    assert view.possible, view.blocker
    assert "order = np.arange(steps * batch_size).reshape((steps, batch_size))" in fix(text, set())


def test_a_batch_entry_popped_and_chained_on_the_host_has_its_rows_in_order():
    # run_flax_glue's evaluation: `labels = batch.pop("labels")`, `chain(*labels)` over the devices.
    text = _GENERATORS.replace("from functools import partial\n", "from functools import partial\nfrom itertools "
                               "import chain\n").replace(
        '    params = tree_map(lambda x: x[0], replicated_params)\n',
        '    for batch in eval_collator(rng, 16, 1):\n        targets = batch.pop("targets")\n'
        '        rows = list(chain(*targets))\n        kept = np.array(chain(*targets))\n'
        '    params = tree_map(lambda x: x[0], replicated_params)\n')
    assert text.count("chain") == 3
    view = plan_global(text)
    assert view.possible, view.blocker
    fixed = fix(text, set())
    assert "        rows = list(targets)\n" in fixed and "from itertools import chain" not in fixed
    # not iterated where it stands: still an iterator (the Hugging Face NER example's
    # `np.array(chain(*batch["attention_mask"]))` is an array of one object, and stays one)
    assert "        kept = np.array(iter(targets))\n" in fixed


def test_a_function_given_step_values_may_be_called_with_keywords_and_defaults():
    # run_summarization_flax calls its data_loader(..., shuffle=True)
    text = _READERS.replace("def save_checkpoint(params, step):", "def save_checkpoint(params, step, keep=3):").replace(
        "        save_checkpoint(params, step)", "        save_checkpoint(params, step=step)")
    assert text.count("step=step") == 1 and "keep=3" in text
    assert plan_global(text).possible, plan_global(text).blocker


_PREDICTIONS = (Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "global_eval_predictions"
                / "old.py").read_text()


def test_per_example_outputs_read_on_the_host_of_a_multi_process_module_are_each_process_own_rows():
    # pmap gives each process its own rows; the global array holds every process's, and
    # `multihost_utils.global_array_to_host_local_array` gives each its own back.
    assert "probs = probs.reshape" not in fix(_PREDICTIONS, set())  # one process: the reshape just goes
    several = _PREDICTIONS.replace("def main():\n", "def main():\n    print(jax.process_index())\n")
    assert plan_global(several).possible, plan_global(several).blocker
    fixed = fix(several, set())
    assert 'probs = multihost_utils.global_array_to_host_local_array(probs, mesh, P("batch"))' in fixed
    assert "from jax.experimental import multihost_utils" in fixed


@pytest.mark.parametrize(("reshape", "possible"), [
    pytest.param("probs.reshape(-1, probs.shape[-1])", True, id="rows of a feature size: the same either way"),
    pytest.param("probs.reshape(-1, 3)", True, id="rows of a size read elsewhere"),
    pytest.param("probs.reshape(-1, probs.shape[1])", False, id="the size of pmap's per-device axis"),
])
def test_a_reshape_into_rows_reads_the_same_rows_in_both_views(reshape, possible):
    text = _PREDICTIONS.replace("probs = probs.reshape((-1,) + probs.shape[2:])", f"probs = {reshape}")
    assert text != _PREDICTIONS
    view = plan_global(text)
    assert view.possible is possible, view.blocker
    if possible:
        assert f"probs = {reshape}" in fix(text, set())


def test_a_generator_of_batches_may_be_wrapped_in_enumerate_zip_and_a_progress_bar():
    # The Hugging Face examples' `for step, batch in enumerate(tqdm(collator(...), total=...), 1)`
    text = _GENERATORS.replace("from functools import partial\n", "from functools import partial\n\nfrom tqdm import "
                               "tqdm\n").replace(
        "    for batch in eval_collator(rng, 16, 2):\n",
        "    for _, (step, batch) in zip(range(2), enumerate(tqdm(eval_collator(rng, 16, 2), total=2), 1)):\n")
    assert "enumerate(tqdm(" in text
    view = plan_global(text)
    assert view.possible, view.blocker
    fixed = fix(text, set())
    assert "enumerate(tqdm(eval_collator(rng, 16, 2), total=2), 1)" in fixed
    assert 'jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), batch)' in fixed


def test_what_made_a_batch_is_named_through_the_functions_that_return_it():
    # flax's ImageNet example: `batch` of `train_iter`, of `create_input_iter(...)`, which returns
    # the iterator `prefetch_to_device` makes.
    text = textwrap.dedent('''\
        import functools

        import jax
        from flax import jax_utils


        @functools.partial(jax.pmap, axis_name="batch")
        def train_step(params, batch):
            return params - jax.lax.pmean(batch.mean(), "batch")


        def create_input_iter(ds):
            it = map(lambda x: x.reshape((jax.local_device_count(), -1) + x.shape[1:]), ds)
            it = jax_utils.prefetch_to_device(it, 2)
            return it


        def train(params, ds):
            params = jax_utils.replicate(params)
            train_iter = create_input_iter(ds)
            for step, batch in zip(range(3), train_iter):
                params = train_step(params, batch)
            return jax_utils.unreplicate(params)
        ''')
    view = plan_global(text)
    assert not view.possible and "`jax_utils.prefetch_to_device(it, 2)` (line 14) yields batches with pmap's " \
        "device axis" in view.reason, view.blocker


@pytest.mark.parametrize(("eval_step_change", "still"), [
    pytest.param(None, None, id="a step that would move: only the argument is named"),
    pytest.param(('batch["x"], mutable=False)', 'batch["x"], mutable=["batch_stats"])'),
                 "the step still would not compute the same over the whole batch: line 47: `pmean` of a value not "
                 "proven a per-shard mean; it is the model is applied with `mutable=`",
                 id="a step that keeps per-device statistics: that is named too"),
])
def test_an_argument_not_recognised_is_told_with_what_the_step_would_do_with_a_batch(eval_step_change, still):
    # flax's ImageNet example: its batches come from `prefetch_to_device`, its BatchNorm is per device.
    text = _FLAX_MODEL.replace("p_eval_step(state.params, shard(eval_batch))",
                               "p_eval_step(state.params, make_batches(eval_batch))")
    if eval_step_change is not None:
        text = text.replace(*eval_step_change)
    view = plan_global(text)
    assert not view.possible and "argument 2 of `p_eval_step` (`make_batches(eval_batch)`) is not made by" \
        in view.reason, view.blocker
    assert ("still would not" in view.reason) is (still is not None) and (still is None or still in view.reason), \
        view.blocker


_FIELDS = (FIXTURES / "state_with_function_fields.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("loss_fn=mse_loss)", "loss_fn=optax.l2_loss)", "grad = jax.lax.pmean(grad",
                 "`.loss_fn(...)` of per-device values is not known", id="a function the program does not define"),
    pytest.param("    state = create_train_state(model, params, is_regression=False, num_labels=3)\n",
                 "    state = create_train_state(model, params, is_regression=False, num_labels=3)\n"
                 "    makers = [create_train_state]\n", "grad = jax.lax.pmean(grad",
                 "`num_labels` is bound outside what the analysis follows",
                 id="made by a function also used as a value: its locals are not known host values"),
])
def test_functions_in_a_state_field_are_followed_where_the_program_stores_only_its_own(old, new, marker, reason):
    # (the loss reads `num_labels`, an argument of the function that made the state)
    closing = _FIELDS.replace("onehot(labels, num_classes=num_labels)", "jax.nn.one_hot(labels, num_labels)")
    assert closing != _FIELDS and plan_global(closing).possible, plan_global(closing).blocker
    text = closing.replace(old, new)
    assert text != closing
    assert_blocks_at(text, marker, reason)


@pytest.mark.parametrize(("comprehension", "possible"), [
    pytest.param("[t for t in chain(*targets)]", True, id="its first iterable, read here: the rows"),
    pytest.param("[t * replicated_params[0][1] for t in range(3)]", False,
                 id="a device-axis value read inside it, where this fix does not follow"),
])
def test_a_comprehension_is_read_where_its_first_iterable_is_evaluated(comprehension, possible):
    text = _GENERATORS.replace("from functools import partial\n", "from functools import partial\nfrom itertools "
                               "import chain\n").replace(
        '    params = tree_map(lambda x: x[0], replicated_params)\n',
        '    for batch in eval_collator(rng, 16, 1):\n        targets = batch.pop("targets")\n'
        f'        rows = {comprehension}\n    params = tree_map(lambda x: x[0], replicated_params)\n')
    assert comprehension in text
    assert plan_global(text).possible is possible, plan_global(text).blocker
    if not possible:  # the finding says where, and what to write instead
        assert_blocks_at(text, comprehension, "used inside a comprehension (write it as a loop)")


_OUTPUTS = (FIXTURES / "model_outputs_read_on_the_host.in.py").read_text()


@pytest.mark.parametrize(("read", "reason"), [
    pytest.param("predictions[0][0]", "`predictions[0][0]` indexes a value with pmap's device axis",
                 id="device 0's slice of a field: the global view's is row 0"),
    pytest.param("predictions.end_logits.shape", "`predictions.end_logits` has pmap's device axis here",
                 id="a field's shape counts pmap's device axis"),
])
def test_a_model_s_outputs_are_read_on_the_host_field_by_field(read, reason):
    # (a field by position or name: the rows, as the fixture reads them; anything else of them blocks)
    assert plan_global(_OUTPUTS).possible, plan_global(_OUTPUTS).blocker
    text = _OUTPUTS.replace("    return {\"params\": unreplicate", f"    shown = {read}\n    return {{\"params\": unreplicate")
    assert read in text
    assert_blocks_at(text, f"shown = {read}", reason)


def test_a_step_wrapped_in_pad_shard_unpad_is_followed_called_at_once_or_kept_under_a_name_only_called():
    called = _HF.replace("eval_metrics.append(p_eval_step(state.params, shard(batch)))",
                         "eval_metrics.append(jax_utils.pad_shard_unpad(p_eval_step, static_return=True)(\n"
                         "            state.params, batch))")
    assert "pad_shard_unpad" in called
    assert plan_global(called).possible, plan_global(called).blocker
    # (as flax's full-evaluation guide keeps it: the name goes, its calls call the step)
    stored = called.replace("eval_metrics.append(jax_utils.pad_shard_unpad(p_eval_step, static_return=True)(",
                            "padded = jax_utils.pad_shard_unpad(p_eval_step, static_return=True)\n"
                            "        eval_metrics.append(padded(")
    assert "padded(" in stored
    assert plan_global(stored).possible, plan_global(stored).blocker
    fixed = fix(stored, set())
    assert "pad_shard_unpad(" not in fixed and "padded(" not in fixed and "p_eval_step(\n" in fixed, fixed
    for use in ("        print(padded)\n", "        padded = print\n"):
        used = stored.replace("        eval_metrics.append(padded(", use + "        eval_metrics.append(padded(")
        assert_blocks_at(used, "pad_shard_unpad(p_eval_step", "`p_eval_step` is wrapped in `pad_shard_unpad`, which pads")


def test_a_host_literal_on_one_path_and_a_host_value_on_another_is_a_host_value():
    # (flax's cifar10 example: a learning-rate schedule's steps, a literal or parsed from a flag, read
    # by a nested function; it was taken for a value with pmap's device axis)
    text = _HF.replace("    schedule = optax.linear_schedule(1e-2, 1e-3, 8)\n",
                       "    if VOCAB > 8:\n        boundaries = [[4, 0.5], [6, 0.1]]\n    else:\n"
                       "        boundaries = list(range(2))\n\n    def make_schedule(base):\n"
                       "        return optax.piecewise_constant_schedule(base, dict(boundaries))\n\n"
                       "    schedule = make_schedule(1e-2)\n")
    assert "make_schedule(1e-2)" in text
    assert plan_global(text).possible, plan_global(text).blocker


_CLOSURE = (FIXTURES / "closure_reads_replicated_state.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("            history.append(run_eval(batches(rng, 2, batch_size)))\n",
                 "            history.append(run_eval(batches(rng, 2, batch_size)))\n"
                 "            evaluate = lambda: run_eval(batches(rng, 2, batch_size))\n",
                 "evaluate = lambda", "`run_eval` (which drives the pmapped step) is called inside a lambda",
                 id="called in a lambda too: there the values are not followed"),
    pytest.param("    def run_eval(eval_batches):\n", "    def run_eval(eval_batches, params=state.params):\n",
                 "def run_eval", "`state.params` has pmap's device axis here",
                 id="a default: evaluated where the function is defined"),
    pytest.param("    def run_eval(eval_batches):\n", "    @functools.lru_cache\n    def run_eval(eval_batches):\n",
                 "@functools.lru_cache", "`run_eval` reads values with pmap's device axis from the function that "
                 "defines it, and is decorated", id="decorated: its calls run what the decorator made"),
    pytest.param("    def run_eval(eval_batches):\n        eval_metrics = []\n",
                 "    def run_eval(eval_batches):\n        nonlocal state\n        state = state\n"
                 "        eval_metrics = []\n", "        state = state",
                 "`state` is declared `global` / `nonlocal` and gets a value with pmap's device axis",
                 id="nonlocal: binding the outer name to a device-axis value"),
    pytest.param("p_train_step(state, common_utils.shard(batch), dropout_rng=dropout_rngs)",
                 "p_train_step(state, common_utils.shard(batch), dropout_rngs)", "dropout_rngs)",
                 "is given argument 3 by position, after a parameter `partial(...)` binds by name",
                 id="by position after a bound parameter (a TypeError under pmap too)"),
    pytest.param('    metrics["learning_rate"] = learning_rate_fn(state.step)\n',
                 '    metrics["learning_rate"] = learning_rate_fn(state.step)\n    metrics["logits"] = logits\n',
                 'metrics["logits"] = logits', "assignment to an attribute or item is not followed",
                 id="an item of another kind in a dict of metrics"),
])
def test_a_closure_is_read_at_its_calls_in_the_function_that_defines_it(old, new, marker, reason):
    assert_variant_blocks(_CLOSURE, old, new, marker, reason)


# LRA's evaluation one call further: `train` calls `evaluate_once`, which calls `run_eval`.
_CLOSURE_CHAIN = _CLOSURE.replace(
    "    rng = np.random.default_rng(0)\n    history = []\n",
    "    def evaluate_once():\n        return run_eval(batches(rng, 2, batch_size))\n\n"
    "    rng = np.random.default_rng(0)\n    history = []\n").replace(
    "history.append(run_eval(batches(rng, 2, batch_size)))", "history.append(evaluate_once())")


def test_a_closure_called_from_another_closure_is_read_with_the_defining_functions_values():
    assert _CLOSURE_CHAIN.count("evaluate_once") == 2
    view = plan_global(_CLOSURE_CHAIN)
    assert view.possible, view.blocker
    assert "state.params,\n" in fix(_CLOSURE_CHAIN, set())  # run_eval's call of the step, state placed


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    def evaluate_once():\n", "    def evaluate_once():\n        state = None\n",
                 "p_eval_step(state.params", "`state` is a name of `train`, which defines `run_eval`: this fix "
                 "reads `run_eval` with `train`'s values only at its calls in `train`, or in another function",
                 id="the caller binds a name of its own that the callee reads from the defining function"),
    pytest.param("        return run_eval(batches(rng, 2, batch_size))\n",
                 "        evaluate = run_eval\n        return evaluate(batches(rng, 2, batch_size))\n",
                 "evaluate = run_eval", "`run_eval` (which drives the pmapped step) is used other than by calling it",
                 id="the inner one used as a value in the outer one"),
    pytest.param("history.append(evaluate_once())", "history.append((lambda: evaluate_once())())",
                 "lambda: evaluate_once()", "`evaluate_once` (which drives the pmapped step) is called inside a lambda",
                 id="the outer one called in a lambda"),
    pytest.param("    history = []\n", "    history = []\n    evaluators = [evaluate_once]\n",
                 "evaluators = [evaluate_once]", "`evaluate_once` (which drives the pmapped step) is used other "
                 "than by calling it", id="the outer one used as a value"),
])
def test_a_closure_called_from_another_closure_blocks_where_the_values_are_not_known(old, new, marker, reason):
    text = _CLOSURE_CHAIN.replace(old, new)
    assert text != _CLOSURE_CHAIN
    assert_blocks_at(text, marker, reason)


_NAMED_SCOPE = (FIXTURES / "named_scope_in_step.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param('    with jax.named_scope("forward"):\n', "    with contextlib.nullcontext(inputs):\n",
                 "contextlib.nullcontext(inputs)", "a `with` over a value not known the same on every device "
                 "(`.nullcontext(...)` of per-device values",
                 id="a context made of each device's slice (as 2020 flax's `nn.stochastic(key)` of a key per device)"),
    pytest.param('    with jax.named_scope("forward"):\n', "    with jax.named_scope(str(inputs.sum())):\n",
                 "str(inputs.sum())", "a `with` over a value not known the same on every device (",
                 id="a context of a value the analysis cannot tell"),
])
def test_a_with_over_a_per_device_value_blocks(old, new, marker, reason):
    assert_variant_blocks(_NAMED_SCOPE, old, new, marker, reason)


_LEFTOVER = "    if jax.process_index() == 0:\n        leftover_predictions = eval_step(unreplicate(state), leftover)\n"


@pytest.mark.parametrize(("new", "written"), [
    pytest.param(_LEFTOVER, "eval_step(jax.tree.map(lambda x: x.addressable_data(0), state), leftover)",
                 id="computed with by process 0 alone: the copy it holds"),
    pytest.param(_LEFTOVER + "        saved = jax.device_get(unreplicate(state.params))\n",
                 "saved = jax.device_get(state.params)\n", id="fetched to the host: the global array itself"),
    pytest.param("    everywhere = eval_step(unreplicate(state), leftover)\n" + _LEFTOVER,
                 "    everywhere = eval_step(state, leftover)\n", id="computed with by every process"),
    pytest.param("    is_main = jax.process_index() == 0\n" + _LEFTOVER.replace("jax.process_index() == 0", "is_main"),
                 "eval_step(jax.tree.map(lambda x: x.addressable_data(0), state), leftover)",
                 id="the branch's test a name bound to the process index's test"),
])
def test_unreplicate_in_a_branch_some_processes_take(new, written):
    assert _LEFTOVER in _OUTPUTS
    assert written in fix(_OUTPUTS.replace(_LEFTOVER, new), set())


_PADDED = (FIXTURES / "padded_evaluation.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("static_return=True)(", "static_return=False)(", "static_return=False)(",
                 "without `static_return=True` un-pads the step's outputs", id="outputs un-padded"),
    pytest.param("pad_shard_unpad(p_eval_step, static_return=True)(", "pad_shard_unpad(p_eval_step)(",
                 "pad_shard_unpad(p_eval_step)(", "without `static_return=True`", id="static_return left False"),
    pytest.param("static_return=True)(", "static_return=True, static_argnames=('params',))(",
                 "static_argnames=", "options other than literal `static_argnums` and `static_return`",
                 id="static arguments by name"),
    pytest.param("state.params, batch, min_device_batch", "state.params, shard(batch), min_device_batch",
                 "shard(batch), min_device_batch", "`shard(batch)`, which `pad_shard_unpad` pads and splits per "
                 "device, is not a host value", id="a batch split per device already"),
    pytest.param("state.params, batch, min_device_batch", "params, batch, min_device_batch",
                 "params, batch, min_device_batch", "argument 1 of `p_eval_step` (`params`) is not made by a "
                 "replicate", id="the parameters as they were, not replicated"),
    pytest.param('        return jax.lax.pmean(metrics, axis_name="batch")',
                 '        return jax.lax.pmean(metrics, axis_name="batch"), logits',
                 "metrics = pad_shard_unpad", "returns values that are not replicated",
                 id="per-example outputs, which come back padded and split"),
])
def test_a_padded_evaluation_blocks_where_the_padding_is_not_the_fixes_to_write(old, new, marker, reason):
    assert_variant_blocks(_PADDED, old, new, marker, reason)


_STATIC = (FIXTURES / "static_arguments.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("static_broadcasted_argnums=(2, 3),", "static_broadcasted_argnums=STATIC,", "p_predict_step =",
                 "`static_broadcasted_argnums=` other than literal positions", id="positions in a name"),
    pytest.param("static_broadcasted_argnums=(2, 3),", "static_broadcasted_argnums=(2, 4),", "p_predict_step =",
                 "`static_broadcasted_argnums=` other than literal positions",
                 id="past the parameters a partial leaves"),
    pytest.param("p_predict_step(params, x, EOS_ID, 4)", "p_predict_step(params, x, EOS_ID, max_length=4)",
                 "max_length=4", "argument 4 of `p_predict_step` is static (`static_broadcasted_argnums=`) but "
                 "passed by keyword, which pmap maps", id="a static argument by keyword"),
    pytest.param("= train_step(params, x, y, learning_rate)", "= train_step(params, x, y, y)", "= train_step(",
                 "argument 4 of `train_step` is static (`static_broadcasted_argnums=`) but has pmap's device axis",
                 id="a static position given a value with the device axis"),
])
def test_static_arguments_block_where_jit_would_not_take_them_as_pmap_did(old, new, marker, reason):
    assert_variant_blocks(_STATIC, old, new, marker, reason)


def test_static_and_donated_arguments_both_go_to_jit():
    text = _STATIC.replace("static_broadcasted_argnums=(3,))", "static_broadcasted_argnums=(3,), donate_argnums=(0,))")
    assert text != _STATIC
    assert "@functools.partial(jax.jit, static_argnums=(3,), donate_argnums=(0,))\n" in fix(text, set())


_UNMAPPED = (FIXTURES / "unmapped_outputs.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    return params - 0.5 * grads, jax.lax.pmean(loss, axis_name=\"batch\")",
                 "    return params - 0.5 * grads, loss", "params, loss = p_train_step(",
                 "`out_axes=None` takes output 2 of `p_train_step` unmapped, where the step returns a per-shard "
                 "mean: pmap gives device 0's", id="an output each device computes alone"),
    pytest.param("out_axes=(0, None))", "out_axes=None)", "predictions, accuracy = p_eval_step(",
                 "`out_axes=None` takes its output of `p_eval_step` unmapped, where the step returns",
                 id="every output unmapped, the predictions too"),
    pytest.param("out_axes=(0, None))", "out_axes=(0, None, None))", "predictions, accuracy = p_eval_step(",
                 "`p_eval_step` is given `out_axes=` one per output, but its return is not shown to be a tuple "
                 "of 3 values", id="more axes than outputs"),
    pytest.param("out_axes=(0, None))", "out_axes=(0, 1))", "p_eval_step = jax.pmap(",
                 "`out_axes=` other than 0 or None, or a tuple of them, one per output", id="another axis"),
])
def test_unmapped_outputs_block_where_pmap_would_give_device_zeros_value(old, new, marker, reason):
    assert_variant_blocks(_UNMAPPED, old, new, marker, reason)


_LOCAL_AXIS = (FIXTURES / "local_axis_name.in.py").read_text()


def test_an_axis_name_bound_once_to_a_string_in_the_function_is_read_as_that_string():
    fixed = fix(_LOCAL_AXIS, set())
    assert "p_step = jax.jit(step)" in fixed and "pmean" not in fixed
    assert "axis_name = \"batch\"" not in fixed  # read only by what the fix rewrote, it goes with them


def test_an_axis_name_read_elsewhere_too_stays():
    text = _LOCAL_AXIS.replace("    return jax.tree.map(lambda p: p[0], params)",
                               "    print(axis_name)\n    return jax.tree.map(lambda p: p[0], params)")
    assert text != _LOCAL_AXIS
    assert '    axis_name = "batch"\n' in fix(text, set())


def test_an_axis_name_bound_more_than_once_is_not_read():
    text = _LOCAL_AXIS.replace('    axis_name = "batch"\n', '    axis_name = "batch"\n    axis_name = "i"\n')
    assert_blocks_at(text, "p_step = jax.pmap", "`axis_name=` is not a literal string")


_PASSED = (FIXTURES / "step_passed_to_function.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    losses, evals = [], []\n    for _ in range(3):\n"
                 "        params, loss = run_epoch(p_train_step, params, batches)\n",
                 "    p_slow_step = jax.pmap(functools.partial(train_step, learning_rate=0.1), axis_name=\"batch\")\n"
                 "    losses, evals = [], []\n    for _ in range(3):\n"
                 "        params, loss = run_epoch(p_train_step, params, batches)\n"
                 "        params, loss = run_epoch(p_slow_step, params, batches)\n",
                 "run_epoch(p_slow_step", "`run_epoch` is given the pmapped step `p_slow_step` here and "
                 "`p_train_step` at line", id="two steps through one parameter: one text cannot call both"),
    pytest.param("        params, loss = step(params, x, y)\n",
                 "        params, loss = step(params, x, y)\n        print(step)\n", "print(step)",
                 "`step` (the pmapped step `p_train_step`) is used other than by calling it",
                 id="the parameter used as a value"),
    pytest.param("        params, loss = step(params, x, y)\n",
                 "        params, loss = step(params, x, y)\n        again = lambda: step\n", "lambda: step",
                 "`step` (the pmapped step `p_train_step`) is used other than by calling it",
                 id="read in a lambda, which this fix does not follow"),
    pytest.param("    losses, evals = [], []\n", "    losses, evals = [], []\n    steps = [p_train_step]\n",
                 "steps = [p_train_step]", "`p_train_step` is used other than by calling it",
                 id="the step held in a list besides"),
])
def test_a_step_passed_to_a_function_of_the_module_is_followed_to_its_calls_there(old, new, marker, reason):
    assert_variant_blocks(_PASSED, old, new, marker, reason)


def test_a_script_s_functions_take_the_mesh_with_no_note_for_other_modules():
    view = plan_global(_PASSED)
    assert view.possible and not any("now take the mesh" in note for note in view.notes), view.notes
    assert "def run_epoch(step, params, batches, mesh):" in fix(_PASSED, set())


def test_a_step_passed_on_to_another_function_of_the_module_is_followed_there_too():
    text = _PASSED.replace("        params, loss = step(params, x, y)\n",
                           "        params, loss = one_step(step, params, x, y)\n").replace(
        "def run_epoch(", "def one_step(step, params, x, y):\n    return step(params, x, y)\n\n\ndef run_epoch(")
    assert "one_step(step, params, x, y)" in text
    assert plan_global(text).possible, plan_global(text).blocker
    fixed = fix(text, set())
    assert "def one_step(step, params, x, y):\n    return step(params, x, y)\n" in fixed
    assert not any(isinstance(n, ast.Attribute) and n.attr == "pmap" for n in ast.walk(ast.parse(fixed)))


_DRIVING = (FIXTURES / "driving_functions.in.py").read_text()
def test_a_split_batch_unpacked_names_the_form_the_fix_follows():
    """`x, y = shard(pair)` may unpack a tuple, or one array along pmap's device axis (on as many
    devices as there are names): the text does not say which. The finding says how to write it so
    that it does, and that form is taken."""
    unpacked = _DRIVING.replace(
        "        batch = common_utils.shard(batch)\n        params, loss = train_step(params, batch)\n",
        "        pair = batch[\"x\"], batch[\"y\"]\n        x, y = common_utils.shard(pair)\n"
        "        params, loss = train_step(params, {\"x\": x, \"y\": y})\n")
    assert unpacked != _DRIVING
    assert_blocks_at(unpacked, "x, y = common_utils.shard(pair)",
                     "(`common_utils.shard(pair)` may be one array, whose device axis the unpacking would iterate, "
                     "or a tuple: this fix cannot tell. Unpack the host value first and shard the tuple: `x, y = "
                     "pair`, then `x, y = shard((x, y))`)")
    advised = unpacked.replace("        x, y = common_utils.shard(pair)\n",
                               "        x, y = pair\n        x, y = common_utils.shard((x, y))\n")
    assert plan_global(advised).possible, plan_global(advised).blocker


_RUN = "def run(params, batches):\n    return train_epoch(params, batches)\n\n\ndef train_and_evaluate("


@pytest.mark.parametrize(("old", "new", "written"), [
    pytest.param("", "", ["def train_epoch(params, batches, mesh):", "def evaluate(params, batch, mesh):",
                          "train_epoch(params, batches, mesh)", "evaluate(params, eval_batch, mesh)"],
                 id="each function that lays out values takes the mesh last"),
    pytest.param("def evaluate(params, batch):", "def evaluate(params, batch, scale=1.0):",
                 ["def evaluate(params, batch, scale=1.0, *, mesh):", "evaluate(params, eval_batch, mesh=mesh)"],
                 id="keyword-only after defaults"),
    pytest.param("evaluate(params, eval_batch)", "evaluate(params, batch=eval_batch)",
                 ["evaluate(params, batch=eval_batch, mesh=mesh)"], id="by name where the call names its arguments"),
    pytest.param("def train_and_evaluate(", _RUN,
                 ["def run(params, batches, mesh):\n    return train_epoch(params, batches, mesh)\n",
                  "params, loss = run(params, batches, mesh)"], id="through a function that only passes it on"),
    pytest.param("    params = jax_utils.replicate(params)\n",
                 '    device_mesh = Mesh(jax.devices(), ("batch",))\n    params = jax_utils.replicate(params)\n',
                 ["def train_epoch(params, batches, device_mesh):", "evaluate(params, eval_batch, device_mesh)",
                  "NamedSharding(device_mesh, P())"], id="the program's own mesh, under its name"),
])
def test_one_mesh_is_built_where_training_starts_and_handed_to_the_functions_it_calls(old, new, written):
    text = _DRIVING.replace(old, new)
    if old == "def train_and_evaluate(":
        text = text.replace("params, loss = train_epoch(params, batches)", "params, loss = run(params, batches)")
    if "Mesh(" in new:
        text = text.replace("import jax\n", "import jax\nfrom jax.sharding import Mesh\n", 1)
    assert old in _DRIVING and text != _DRIVING or not old
    fixed = fix(text, set())
    meshes = fixed.count("make_mesh(") + fixed.count(" Mesh(")
    assert meshes == 1, fixed
    for line in written:
        assert line in fixed, fixed
    assert fix(fixed, set()) == fixed
    # (a library module: other modules may call its public functions, and must now pass the mesh)
    assert "now take the mesh as a parameter" in " ".join(plan_global(text).notes)


@pytest.mark.parametrize(("old", "new", "meshes"), [
    pytest.param("def train_and_evaluate(",
                 "def smoke_test(params, batch):\n    return evaluate(jax_utils.replicate(params), batch)\n\n\n"
                 "def train_and_evaluate(", 4, id="two functions that start from host values, neither calling the other"),
    pytest.param("def evaluate(params, batch):\n",
                 "def evaluate(params, batch):\n    jax.distributed.initialize()\n", 3,
                 id="a function that starts jax.distributed: a mesh built before the call would miss the other processes"),
])
def test_where_the_mesh_cannot_be_handed_down_each_function_builds_the_same_mesh(old, new, meshes):
    text = _DRIVING.replace(old, new)
    assert text != _DRIVING
    view = plan_global(text)
    assert view.possible, view.blocker
    fixed = fix(text, set())
    assert fixed.count("make_mesh(") == meshes and ", mesh)" not in fixed, fixed


_WEIGHT_DECAY = (FIXTURES / "weight_decay_epochs.in.py").read_text()


@pytest.mark.parametrize(("condition", "reason"), [
    ("if images.shape[0] > 8", "an operation on the number of the device's examples"),
    ("if loss", "a comprehension filtered on a per-shard mean"),
])
def test_a_comprehension_filtered_on_a_per_device_value_blocks(condition, reason):
    """`if x.ndim > 1` is the same on every device (the fixture takes the global view); a filter on
    the device's slice of the batch or on its own mean would keep other items on each."""
    assert plan_global(_WEIGHT_DECAY).possible
    text = _WEIGHT_DECAY.replace("if x.ndim > 1]", f"{condition}]")
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if condition in t)
    assert not view.possible and reason in view.reason and f"(line {line})" in view.reason, view.blocker


_MEAN_WRITTEN_OUT = (FIXTURES / "mean_written_out.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param("/ x.shape[0]", "/ len(x)", None, id="len(x) is the device's rows too"),
    pytest.param("jnp.sum((x @ params) ** 2)", "sum(jnp.sum((x @ params) ** 2, axis=1))", None,
                 id="Python's sum over the rows is a per-shard sum"),
    pytest.param("jnp.sum((x @ params) ** 2)", "sum([jnp.sum(x @ params), jnp.sum((x @ params) ** 2)])", None,
                 id="Python's sum of a list of per-shard sums"),
    pytest.param("jnp.sum((x @ params) ** 2)", "sum(jnp.mean((x @ params) ** 2, axis=0))",
                 "`sum` over a per-shard mean", id="Python's sum over a mean's items is not followed"),
    pytest.param("/ x.shape[0]", "/ x.shape[1]", "`pmean` of a value not proven a per-shard mean",
                 id="a sum over a feature size stays a per-shard sum"),
    pytest.param("/ x.shape[0]", "* x.shape[0]", "`pmean` of a value not proven a per-shard mean",
                 id="a sum times the rows"),
    pytest.param('rows = jax.lax.psum(x.shape[0], "batch")', 'rows = jax.lax.pmean(x.shape[0], "batch")',
                 "`pmean` of a value not proven a per-shard mean; it is the number of the device's examples",
                 id="the mean of the devices' row counts is no count of the global view"),
    pytest.param('rows = jax.lax.psum(x.shape[0], "batch")', "rows = x.shape[0]",
                 "`train_step` returns the number of the device's examples", id="the device's count returned"),
])
def test_a_mean_written_out_over_the_device_rows_is_a_per_shard_mean(old, new, reason):
    text = _MEAN_WRITTEN_OUT.replace(old, new)
    assert text != _MEAN_WRITTEN_OUT
    view = plan_global(text)
    if reason is None:
        assert view.possible, view.blocker
    else:
        assert not view.possible and reason in view.reason, view.blocker


@pytest.mark.parametrize("reshape", ["jnp.reshape(x, (jax.local_device_count(), -1) + x.shape[1:])",
                                     "np.reshape(x, (jax.local_device_count(), -1, *x.shape[1:]))"])
def test_the_function_form_of_a_device_count_reshape_splits_the_batch_too(reshape):
    text = _MEAN_WRITTEN_OUT.replace("x.reshape((jax.local_device_count(), -1) + x.shape[1:])", reshape)
    assert text != _MEAN_WRITTEN_OUT
    fixed = fix(text, set())
    assert 'jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), x)' in fixed, fixed
    assert "reshape(x" not in fixed


def test_a_step_made_in_a_function_and_never_used_is_left_as_it_is_and_named_as_such():
    text = _WEIGHT_DECAY.replace("metrics = eval_epoch(p_eval_step, state, test_it, test_steps)", "metrics = {}")
    assert text != _WEIGHT_DECAY
    view = plan_global(text)
    line = next(i + 1 for i, t in enumerate(text.splitlines()) if "p_eval_step = jax.pmap" in t)
    assert view.possible and view.unused == {line: "`p_eval_step` is made in `main` and never used (delete it if it "
                                                   "is not needed)"}, view.blocker
    assert "p_eval_step = jax.pmap" in fix(text, set())


_KEYS_IN_A_DICT = (FIXTURES / "keys_in_a_dict.in.py").read_text()


def test_a_dict_literal_of_keys_per_device_is_one_key_tree_and_one_mixed_with_host_values_blocks():
    assert plan_global(_KEYS_IN_A_DICT).possible, plan_global(_KEYS_IN_A_DICT).blocker
    mixed = _KEYS_IN_A_DICT.replace('{"dropout": jax.random.split(rng, num=jax.local_device_count())}',
                                    '{"dropout": jax.random.split(rng, num=jax.local_device_count()), "rate": 0.1}')
    assert mixed != _KEYS_IN_A_DICT
    assert_blocks_at(mixed, '"rate": 0.1', "mixes values with and without pmap's device axis")


def test_keys_split_by_a_count_that_is_not_the_device_count_are_not_keys_per_device():
    two = _KEYS_IN_A_DICT.replace("jax.random.split(rng, num=jax.local_device_count())", "jax.random.split(rng, num=2)")
    assert two != _KEYS_IN_A_DICT
    assert_blocks_at(two, "p_train_step(state, shard(batch), dropout_rngs)", "argument 3 of `p_train_step`")


def test_a_split_by_every_process_devices_is_named_where_the_module_runs_as_several_processes():
    source = (FIXTURES / "mean_written_out.in.py").read_text()
    every = source.replace("x.reshape((jax.local_device_count(), -1)", "x.reshape((jax.device_count(), -1)")
    assert every != source and plan_global(every).possible, plan_global(every).blocker  # one process: the same count
    several = every.replace("        seen.append(rows[0])\n",
                            "        seen.append(rows[0])\n        if jax.process_index() == 0:\n            print(rows[0])\n")
    assert several != every
    assert_blocks_at(several, "params, rows = train_step(", "splits by `jax.device_count()`, which counts the devices "
                     "of every process, where pmap maps over this process's own: this module runs as several "
                     "processes (`jax.process_index` at line 33); split by `jax.local_device_count()`")


_METRICS_AVERAGED = (FIXTURES / "metrics_averaged_on_the_host.in.py").read_text()
_OWN = "is each device's own value"


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    # Averaged over this process's devices only, where the global view averages over every one.
    ("    num_devices = jax.local_device_count()\n",
     "    num_devices = jax.local_device_count()\n    print(jax.process_index())\n",
     "train_loss = metrics['loss'].mean().item()", "under pmap the devices are this process's only"),
    # A sum of per-shard means is N times the global one; a quotient by one is not linear in it.
    ("print('Training accuracy:', jnp.mean(accuracy))", "print('Training accuracy:', jnp.sum(accuracy))",
     "jnp.sum(accuracy)", _OWN),
    ("accuracy = accuracy + metrics['accuracy'] * 0.5", "accuracy = accuracy + 0.5 / metrics['accuracy']",
     "0.5 / metrics['accuracy']", _OWN),
    ("accuracy = accuracy + metrics['accuracy'] * 0.5", "accuracy = accuracy + metrics['accuracy'] * metrics['loss']",
     "metrics['accuracy'] * metrics['loss']", _OWN),
    # A host array may weigh each device's mean differently (its length the device count).
    ("accuracy = accuracy + metrics['accuracy'] * 0.5",
     "accuracy = accuracy + metrics['accuracy'] * np.linspace(0, 1, num_devices)",
     "metrics['accuracy'] * np.linspace", _OWN),
    ("        accuracy /= n\n", "        accuracy /= np.arange(1, num_devices + 1)\n", "accuracy /= np.arange", _OWN),
    # Added to a replicated value: the per-shard mean is the one named.
    ("            accuracy += metrics['accuracy']\n",
     "            accuracy += metrics['accuracy']\n            state.step += metrics['loss']\n",
     "state.step += metrics['loss']", "`metrics['loss']` is each device's own value"),
    # Device 0's mean is not the global one.
    ("train_loss = metrics['loss'].mean().item()", "train_loss = metrics['loss'][0].item()",
     "train_loss = metrics['loss'][0]", _OWN),
    ("'epoch_loss': np.mean(losses)", "'epoch_loss': losses[0]", "'epoch_loss': losses[0]", _OWN),
    # A tree map of something other than a mean (device 0's copy of each leaf).
    ("last = jax.tree.map(jnp.mean, metrics)", "last = jax.tree.map(lambda x: x[0], metrics)",
     "last = jax.tree.map(lambda x: x[0], metrics)", _OWN),
    # A host value among the means: the list is no longer one of them.
    ("            losses.append(metrics['loss'])\n",
     "            losses.append(metrics['loss'])\n            losses.append(0.0)\n", "losses.append(0.0)", _OWN),
])
def test_per_shard_means_are_read_on_the_host_only_where_averaging_them_gives_the_global_mean(old, new, marker,
                                                                                               reason):
    assert_variant_blocks(_METRICS_AVERAGED, old, new, marker, reason)


def test_the_fix_says_which_host_lines_average_per_shard_means_and_what_they_read_then():
    view = plan_global(_METRICS_AVERAGED)
    lines = [i + 1 for i, line in enumerate(_METRICS_AVERAGED.splitlines()) if line.startswith("    ") and (
        "jnp.mean(accuracy" in line or ".mean().item()" in line or "np.mean(jax.device_get" in line
        or "np.mean(losses)" in line or "jax.tree.map(jnp.mean" in line)]
    assert view.possible and len(lines) == 7, view.blocker
    assert f"(lines {', '.join(map(str, lines))}) stay: they are the global mean the steps now compute, as pmap's " \
        "was in one process" in " ".join(view.notes), view.notes


def test_a_per_shard_mean_read_otherwise_says_how_it_could_be_read():
    text = _METRICS_AVERAGED.replace("jnp.mean(accuracy))", "accuracy)")
    assert_blocks_at(text, "print('Training accuracy:', accuracy)", "at last averages them, `jnp.mean(x)`, reads the "
                     "global mean in both views")


_REPLICATED_TOGETHER = (FIXTURES / "replicated_together.in.py").read_text()


@pytest.mark.parametrize(("old", "new"), [
    ("    @partial(jax.value_and_grad)\n    def loss_fn(p):", "    @jax.value_and_grad\n    def loss_fn(p):"),
    ("    @partial(jax.value_and_grad)\n    def loss_fn(p):\n", "    @partial(jax.value_and_grad, has_aux=True)\n"
     "    def loss_fn(p):\n"),
])
def test_a_loss_decorated_with_a_gradient_transform_is_that_gradient(old, new):
    text = _REPLICATED_TOGETHER.replace(old, new)
    if "has_aux" in new:
        text = text.replace("        return loss.mean()\n", "        return loss.mean(), logits\n").replace(
            "    loss, grads = loss_fn(params)", "    (loss, _), grads = loss_fn(params)")
    assert text != _REPLICATED_TOGETHER
    assert plan_global(text).possible, plan_global(text).blocker


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    # Another decorator: what it makes of the def is not known.
    ("    @partial(jax.value_and_grad)\n", "    @jax.jit\n", "def loss_fn(p):", "the decorated inner function `loss_fn`"),
    # Unpacking a replicated array (not a tuple literal) iterates over pmap's device axis.
    ("    params, opt_state = replicate((params, opt_state))",
     "    params = replicate(params)\n    w, b = replicate(np.zeros((2, 3)))",
     "w, b = replicate(", "unpacked in a way this fix does not follow"),
])
def test_what_the_tuple_and_decorator_forms_do_not_cover_still_blocks(old, new, marker, reason):
    assert_variant_blocks(_REPLICATED_TOGETHER, old, new, marker, reason)


_ABSL_APP = (FIXTURES / "run_by_absl_app.in.py").read_text()


@pytest.mark.parametrize(("module", "run"), [("fire", "fire.Fire(main)"), ("typer", "typer.run(main)"),
                                           ("tyro", "tyro.cli(main)"), ("hydra", "main()"), ("click", "main()")])
def test_a_main_run_by_fire_typer_tyro_hydra_or_click_is_an_entry_point_as_one_run_by_absl_app(module, run):
    text = _ABSL_APP.replace("from absl import app\n", f"import {module}\n").replace(
        '        raise app.UsageError("Too many command-line arguments.")', '        raise ValueError(argv)').replace(
        "    app.run(main)", f"    {run}")
    if module == "hydra":  # the decorator hands main its configuration, which `main()` does not pass
        text = text.replace('def main(argv=("train",)):', '@hydra.main(config_path=None, config_name="train", '
                            'version_base=None)\ndef main(argv):')
    if module == "click":  # the command parses its options from the command line
        text = text.replace('def main(argv=("train",)):', '@click.command()\n@click.option("--argv", multiple=True)'
                            '\ndef main(argv):')
    assert run in text and "app." not in text.split('"""')[2]
    assert plan_global(text).possible, plan_global(text).blocker
    fixed = fix(text, set())
    assert run in fixed and "jax.pmap" not in fixed


_STATE_MADE_BY_A_FUNCTION = (FIXTURES / "state_made_by_a_function.in.py").read_text()


def test_a_state_made_by_a_function_of_the_module_replicates_itself_as_one_made_in_place():
    view = plan_global(_STATE_MADE_BY_A_FUNCTION)
    assert view.possible, view.blocker
    # A function that may return something else: `state.replicate()` is not known to be that method.
    other = _STATE_MADE_BY_A_FUNCTION.replace(
        "def create_train_state(model, schedule, dropout_rng):\n",
        "def create_train_state(model, schedule, dropout_rng):\n    if schedule is None:\n        return model\n")
    assert_blocks_at(other, "p_train_step(state, shard(batch))", "argument 1 of `p_train_step` (`state`) is not made by")


_TWO_EVAL_STEPS = (FIXTURES / "steps_of_one_name.in.py").read_text()


def test_steps_of_one_name_made_in_two_functions_are_two_steps():
    view = plan_global(_TWO_EVAL_STEPS)
    assert view.possible, view.blocker
    fixed = fix(_TWO_EVAL_STEPS, set())
    code = fixed.split('"""', 2)[2]
    assert code.count("p_eval_step = jax.jit(eval_step)") == 2 and "jax.pmap" not in code
    # Bound twice in one function and read between, it is one name for two pmaps: the fix does not
    # guess which a call means. (Bound again before any read, the first is dead, and goes.)
    twice = _TWO_EVAL_STEPS.replace("    p_eval_step = jax.pmap(eval_step, axis_name='batch')\n    return",
                                    "    p_eval_step = jax.pmap(eval_step, axis_name='batch')\n"
                                    "    print(p_eval_step)\n"
                                    "    p_eval_step = jax.pmap(eval_step, axis_name='batch')\n    return")
    view = plan_global(twice)
    second = [i + 1 for i, t in enumerate(twice.splitlines())
              if t == "    p_eval_step = jax.pmap(eval_step, axis_name='batch')"][1]
    assert not view.possible and view.line == second and "is bound to more than one pmap" in view.reason


_DICT = (FIXTURES / "steps_in_a_dict.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("    losses, evals = [], []\n", "    losses, evals = [], []\n    print(steps)\n", "print(steps)",
                 "`steps`, which holds the pmapped steps, is used other than by calling `steps[key](...)`",
                 id="the dict read as a value"),
    pytest.param("    losses, evals = [], []\n", "    losses, evals = [], []\n    steps[\"last\"] = steps[\"eval\"]\n",
                 'steps["last"] =', "is used other than by calling", id="an entry stored"),
    pytest.param('        params, loss = steps["train"](params, x, y)\n',
                 '        key = "train"\n        params, loss = steps[key](params, x, y)\n', "steps[key]",
                 "is used other than by calling `steps[key](...)` with the key of a step", id="a key not written out"),
    pytest.param("    losses, evals = [], []\n", "    losses, evals = [], []\n    steps = dict(steps)\n",
                 "steps = dict(steps)", "`steps`, which holds the pmapped steps, is bound again",
                 id="the name bound again"),
])
def test_steps_in_a_dict_are_followed_only_where_each_is_called_by_its_key(old, new, marker, reason):
    assert_variant_blocks(_DICT, old, new, marker, reason)


_PSUM_OF_LOSS = (Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "global_replicate_helpers"
                 / "old.py").read_text()


@pytest.mark.parametrize(("old", "new", "scaled"), [
    pytest.param(None, None, "total = loss * jax.device_count()", id="the value of value_and_grad: an array"),
    pytest.param("    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)\n",
                 "    (loss, _), grads = jax.value_and_grad(lambda p: (loss_fn(p, x, y), 0.0), has_aux=True)(params)\n",
                 "total = loss * jax.device_count()", id="with has_aux, unpacked: the loss, an array"),
    pytest.param("    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)\n",
                 "    loss, grads = jax.value_and_grad(lambda p: (loss_fn(p, x, y), jnp.mean(x)), has_aux=True)(params)\n",
                 "jax.tree.map(lambda x: x * jax.device_count(), loss)", id="with has_aux, not unpacked: a tuple"),
])
def test_a_psum_of_a_mean_is_scaled_as_an_array_where_it_is_one(old, new, scaled):
    text = _PSUM_OF_LOSS.replace(old, new) if old else _PSUM_OF_LOSS
    assert text != _PSUM_OF_LOSS or old is None
    assert plan_global(text).possible, plan_global(text).blocker
    assert scaled in fix(text, set())


_PREFETCHED = (FIXTURES / "prefetched_batches.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    pytest.param("prefetch_to_device(it, 2)", "prefetch_to_device(it, 2, jax.local_devices()[:2])",
                 "jax_utils.prefetch_to_device(it, 2,", "`prefetch_to_device` is given the devices to place each "
                 "batch on",
                 id="prefetched to some of the devices"),
    pytest.param("    it = map(prepare_batch, batches)\n", "    it = map(prepare_batch, batches)\n"
                 "    print(next(it))\n", "print(next(it))", "has pmap's device axis here",
                 id="a batch split per device read on the host"),
    pytest.param("    losses = []\n", "    losses = []\n    print(prepare_batch(batches[0]))\n",
                 "print(prepare_batch(", "`prepare_batch` splits the batches mapped at a call this fix rewrites, "
                 "and is used here too", id="the preparer called besides: there its batch would come out whole"),
])
def test_mapped_and_prefetched_batches_read_where_the_fix_cannot_lay_them_out_block(old, new, marker, reason):
    assert_variant_blocks(_PREFETCHED, old, new, marker, reason)


_LOGGED = (FIXTURES / "replicated_metrics_logged.in.py").read_text()
_HERE = "has pmap's device axis here"


def test_the_fix_says_which_lines_print_or_log_replicated_values():
    view = plan_global(_LOGGED)
    lines = [i + 1 for i, line in enumerate(_LOGGED.splitlines())
             if line.lstrip().startswith(("logger.info(", "logging.info(", "print("))]
    assert view.possible and len(lines) == 3, view.blocker
    assert f"lines {', '.join(map(str, lines))} print or log replicated values: the one value now, where pmap's " \
        "showed one copy per device" in view.notes, view.notes


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    # A batch split per device would be written as other numbers: the global batch, not one slice per device.
    ("            logger.info(train_metric)\n", "            logger.info(batch)\n", "logger.info(batch)", _HERE),
    ("{train_metric['loss']}", "{batch['inputs']}", "print(f\"Step", _HERE),
    # Unpacked into the call: its items are pmap's devices.
    ("            logger.info(train_metric)\n", "            print(*train_metric['loss'])\n", "print(*train_metric",
     _HERE),
    # A logger the module does not get from `logging.getLogger`: what it does with the value is not known.
    ("logger = logging.getLogger(__name__)", "logger = make_logger(__name__)", "            logger.info(train_metric)",
     _HERE),
    # Another method of a logger: not a call that only writes its arguments out.
    ("            logger.info(train_metric)\n", "            logger.addFilter(train_metric)\n",
     "logger.addFilter(train_metric)", _HERE),
])
def test_only_replicated_values_written_out_by_print_or_a_logger_are_taken(old, new, marker, reason):
    assert_variant_blocks(_LOGGED, old, new, marker, reason)


@pytest.mark.parametrize("form", ["absl.logging.info(train_metric)", "logging.warning('%s', train_metric)",
                                  "print('loss', train_metric['loss'], sep=': ')",
                                  "print(f'{train_metric[\"loss\"]:.4f}')"])
def test_other_forms_of_writing_a_replicated_value_out_are_taken(form):
    text = _LOGGED.replace("            logger.info(train_metric)\n", f"            {form}\n")
    if form.startswith("absl"):
        text = text.replace("import logging\n", "import logging\n\nimport absl.logging\n")
    assert text != _LOGGED and plan_global(text).possible, plan_global(text).blocker


_UNUSED_STEP = (FIXTURES / "unused_eval_step_kept.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "marker", "reason"), [
    # Read, though not called: the values it is meant for are not known.
    ("    state = jax_utils.replicate(state)\n", "    state = jax_utils.replicate(state)\n    steps = [p_eval_step]\n",
     "steps = [p_eval_step]", "`p_eval_step` is used other than by calling it"),
    # The only step, never used: nothing moves, and the finding says why.
    ("    p_train_step = jax.pmap(train_step, \"batch\", donate_argnums=(0,))\n", "",
     "p_eval_step = jax.pmap(", "`p_eval_step` is made in `main` and never called"),
    # Left as it is, it would map a function whose collectives the moving step loses.
    ("    p_eval_step = jax.pmap(eval_step, \"batch\")  # left: never used\n",
     "    p_eval_step = jax.pmap(train_step, \"batch\")  # left: never used\n",
     "p_eval_step = jax.pmap(", "it maps the function a step that moves maps"),
])
def test_a_step_left_unused_is_one_made_in_a_function_and_never_read_beside_a_step_that_moves(old, new, marker,
                                                                                            reason):
    text = _UNUSED_STEP.replace(old, new)
    if not new:  # (the loop that called the training step goes with it)
        text = text.replace("state, train_metric = p_train_step(state, shard(next(train_loader)))",
                            "train_metric = {'loss': shard(next(train_loader))['targets']}")
    assert_variant_blocks(_UNUSED_STEP, old, new, marker, reason) if new else assert_blocks_at(text, marker, reason)


def test_a_step_never_used_of_a_function_that_moves_goes():
    """`p_test_step = jax.pmap(train_step, ...)` made beside the step that moves and never called
    (timesfm's fine-tuning script): dead code that would map a function whose collectives go, so
    it goes too, and the fix says so; with a comment on its line it stays, and blocks."""
    text = _UNUSED_STEP.replace("    p_eval_step = jax.pmap(eval_step, \"batch\")  # left: never used\n",
                                "    p_eval_step = jax.pmap(functools.partial(train_step), \"batch\")\n")
    text = text.replace("import jax\n", "import functools\n\nimport jax\n", 1)
    view = plan_global(text)
    assert view.possible, view.blocker
    assert any("`p_eval_step`, a pmap never used" in note for note in view.notes), view.notes
    code = fix(text, set()).split('"""', 2)[2]
    assert "p_eval_step" not in code and "jax.pmap" not in code and "functools" not in code


_REBOUND = """import jax
import numpy as np
from flax import jax_utils
from flax.training.common_utils import shard


def eval_step(params, batch):
    return jax.lax.pmean(((batch @ params) ** 2).mean(), "batch")


def main():
    params = jax_utils.replicate(np.ones((4, 2), np.float32))
    p_eval_step = jax.pmap(eval_step, "batch")
    p_eval_step = jax.pmap(eval_step, "batch")
    out = []
    for i in range(3):
        batch = shard(np.ones((16, 4), np.float32) * i)
        out.append(float(jax_utils.unreplicate(p_eval_step(params, batch))))
    return out
"""


@pytest.mark.parametrize(("old", "new", "possible"), [
    pytest.param(None, None, True, id="bound again before any use: the first goes"),
    pytest.param("    p_eval_step = jax.pmap(eval_step, \"batch\")\n    p_eval_step = jax.pmap(",
                 "    p_eval_step = jax.pmap(eval_step, \"batch\")\n    print(p_eval_step)\n    p_eval_step = jax.pmap(",
                 False, id="read between"),
    pytest.param("    out = []\n", "    out = []\n    if out:\n        p_eval_step = jax.pmap(eval_step, \"batch\")\n",
                 False, id="bound again on one path only"),
])
def test_a_step_bound_again_before_any_use_goes(old, new, possible):
    text = _REBOUND.replace(old, new) if old else _REBOUND
    assert text != _REBOUND or old is None
    view = plan_global(text)
    assert view.possible is possible, view.blocker
    if possible:
        fixed = fix(text, set())
        assert fixed.count("p_eval_step = ") == 1 and "jax.pmap" not in fixed and "p_eval_step = jax.jit(eval_step)" in fixed
        assert any("bound again at line 14 before any use, goes" in note for note in view.notes)
    else:
        assert "bound to more than one pmap" in view.blocker


def test_the_finding_of_a_step_left_unused_names_it_and_offers_no_global_view_fix():
    findings = [f for f in lint_text(_UNUSED_STEP, "x.py", JM101, TARGET) if f.code == "JM101"]
    by_line = {_UNUSED_STEP.splitlines()[f.line - 1].strip().split(" =")[0]: f for f in findings}
    assert set(by_line) == {"p_train_step", "p_eval_step"}
    assert by_line["p_train_step"].fix is not None and by_line["p_train_step"].fix.whole_module
    left = by_line["p_eval_step"]
    assert "the global view leaves it: line" in left.message and "never used" in left.message
    assert left.fix is None or not left.fix.whole_module


def test_a_step_the_main_block_makes_and_never_uses_is_left_unused_too():
    """The same script run from its `if __name__ == "__main__":` block, as a Kaggle text
    classifier writes it: no importer runs that block, so its unused `p_eval_step` is dead code
    too. Bound at a module's top level outside that block, an importer may call it: it blocks."""
    ending = '    return {"params": jax_utils.unreplicate(state).params, "losses": get_metrics(train_metrics)["loss"]}\n'
    script = _UNUSED_STEP.replace("def main():\n", 'if __name__ == "__main__":\n').replace(
        ending + '\n\nif __name__ == "__main__":\n    main()\n',
        '    print(jax_utils.unreplicate(state).params, get_metrics(train_metrics)["loss"])\n')
    assert "def main" not in script and script.count("__main__") == 1
    findings = {f.line: f for f in lint_text(script, "x.py", JM101, TARGET) if f.code == "JM101"}
    lines = script.splitlines()
    left = next(f for line, f in findings.items() if lines[line - 1].lstrip().startswith("p_eval_step ="))
    assert "`p_eval_step` is made in the `__main__` block and never used" in left.message, left.message
    fixed = fix(script, set())
    assert "p_train_step = jax.jit(train_step, donate_argnums=(0,))" in fixed
    assert 'p_eval_step = jax.pmap(eval_step, "batch")  # left: never used' in fixed
    top_level = script.replace('if __name__ == "__main__":\n', "if True:\n")
    assert not plan_global(top_level).possible


_ONTO_A_MESH = (FIXTURES / "replicated_onto_a_mesh.in.py").read_text()
_NOT_MADE = "argument 1 of `train_step` (`params`) is not made by a replicate"


@pytest.mark.parametrize(("old", "new"), [
    # Not a copy per device: fewer devices, or fewer copies, than pmap maps over.
    ("Mesh(np.array(devices), (\"d\",))", "Mesh(np.array(devices[:2]), (\"d\",))"),
    ("[x] * len(devices)", "[x] * 2"),
    # The copies along another axis than the mesh's, or every copy on every device.
    ("P(\"d\"))\n", "P(\"e\"))\n"),
    ("P(\"d\"))\n", "P())\n"),
    # Not every local device.
    ("devices = jax.local_devices()", "devices = jax.local_devices()[1:]"),
])
def test_copies_laid_out_on_a_mesh_are_a_replication_only_one_per_local_device(old, new):
    assert_variant_blocks(_ONTO_A_MESH, old, new, "params, loss = train_step(", _NOT_MADE)


def test_copies_laid_out_on_a_mesh_of_every_device_are_a_replication_in_one_process():
    text = _ONTO_A_MESH.replace("devices = jax.local_devices()", "devices = jax.devices()")
    assert text != _ONTO_A_MESH and plan_global(text).possible, plan_global(text).blocker
    several = text.replace("    rng = np.random.default_rng(0)\n",
                           "    rng = np.random.default_rng(jax.process_index())\n")
    assert several != text
    assert_blocks_at(several, "params, loss = train_step(", _NOT_MADE)


def test_a_mesh_naming_its_one_axis_by_a_string_lays_copies_out_one_per_device_too():
    """`Mesh(np.array(devices), "d")`, as a plain-JAX GPT-2 writes its replication's mesh."""
    text = _ONTO_A_MESH.replace('Mesh(np.array(devices), ("d",))', 'Mesh(np.array(devices), "d")')
    assert text != _ONTO_A_MESH and plan_global(text).possible, plan_global(text).blocker
    assert_variant_blocks(text, 'P("d"))\n', 'P("e"))\n', "params, loss = train_step(", _NOT_MADE)


_GIVEN_DEVICES = (FIXTURES / "replicated_by_a_helper_given_devices.in.py").read_text()


@pytest.mark.parametrize(("old", "new"), [
    # Called with some of the devices: copies on those only, where pmap's mesh would span them all.
    ("device_put_replicated(params, devices)", "device_put_replicated(params, devices[:2])"),
    ("devices = jax.local_devices()", "devices = jax.local_devices()[:2]"),
    # The copies along another axis than the mesh's.
    ('jax.sharding.PartitionSpec("_device_put_replicated")', 'jax.sharding.PartitionSpec()'),
    # A leaf function that does more than lay the copies out.
    ("        return jax.device_put(jnp.stack([x] * len(devices)), sharding)\n",
     "        y = jnp.stack([x] * len(devices))\n        return jax.device_put(y, sharding)\n"),
    # The tree itself read beside the tree map.
    ("    return jax.tree.map(_device_put_replicated, x)\n",
     "    print(x)\n    return jax.tree.map(_device_put_replicated, x)\n"),
])
def test_a_helper_given_the_device_list_is_a_replication_only_of_every_local_device(old, new):
    assert_variant_blocks(_GIVEN_DEVICES, old, new, "params, loss = train_step(", _NOT_MADE)


def test_a_helper_given_the_device_list_goes_with_the_list_and_the_count_read_only_from_it():
    new = fix(_GIVEN_DEVICES, set()).split('"""', 2)[2]  # (the code, not the docstring)
    assert "def device_put_replicated" not in new and "jax.local_devices()" not in new and "len(devices)" not in new
    assert "params = jax.device_put(params, NamedSharding(" in new
    # A list read elsewhere too stays; the count only the reshapes read goes.
    kept = _GIVEN_DEVICES.replace("    losses = []\n", "    losses = []\n    print(devices)\n")
    assert kept != _GIVEN_DEVICES
    assert "devices = jax.local_devices()" in fix(kept, set()) and "n = len(devices)" not in fix(kept, set())


_LEAF_FUNCTION = (FIXTURES / "replicated_by_a_leaf_function.in.py").read_text()


@pytest.mark.parametrize(("old", "new"), [
    # The leaf function changes the values, not only their type.
    ("        x = jnp.asarray(x)\n", "        x = jnp.asarray(x) * 2\n"),
    ("        x = jnp.asarray(x)\n", "        x = jnp.asarray(x)\n        print(x)\n"),
])
def test_a_leaf_function_is_read_as_its_return_only_after_making_the_leaf_an_array(old, new):
    assert_variant_blocks(_LEAF_FUNCTION, old, new, "params, loss = train_step(",
                          "argument 1 of `train_step` (`params`) is not made by a replicate")


def test_a_copy_other_than_device_zeros_fetched_to_the_host_is_not_an_unreplicate():
    assert_variant_blocks(_LEAF_FUNCTION, "jax.device_get(x[0])", "jax.device_get(x[1])",
                          "return jax.tree.map(lambda x: jax.device_get(x[1]), tree)", "has pmap's device axis here")


def test_device_zeros_copies_fetched_by_a_helper_are_the_replicated_values_fetched():
    new = fix(_LEAF_FUNCTION, set())
    assert "history.append(jax.device_get(loss))" in new and "host_params = jax.device_get(params)" in new


@pytest.mark.parametrize(("count", "taken"), [
    ("num_devices", True),
    ("jax.local_device_count()", True),
    ("len(jax.local_devices())", True),
    ("jax.device_count()", True),  # (in one process)
    ("2", False),
    ("num_devices // 2", False),
])
def test_a_split_helper_given_the_device_count_is_a_split_only_of_the_local_device_count(count, taken):
    text = _LEAF_FUNCTION.replace("shard_batch(tokens, num_devices)", f"shard_batch(tokens, {count})")
    assert plan_global(text).possible == taken, plan_global(text).blocker
    if not taken:
        assert_blocks_at(text, "params, loss = train_step(", "argument 2 of `train_step` (`tokens_b`) is not made by")


def _split_in_a_function(count: str, name: str = "_step_once") -> str:
    """The leaf-function fixture with the split in a function of the module given the count."""
    text = _LEAF_FUNCTION.replace(
        "def main():\n",
        f"def {name}(params, tokens, targets, count):\n"
        "    return train_step(params, shard_batch(tokens, count), shard_batch(targets, count))\n\n\n"
        "def main():\n").replace(
        "        tokens_b = shard_batch(tokens, num_devices)\n        targets_b = shard_batch(targets, num_devices)\n"
        "        params, loss = train_step(params, tokens_b, targets_b)\n",
        f"        params, loss = {name}(params, tokens, targets, {count})\n")
    assert text.count(f"{name}(") == 2
    return text


def test_a_count_a_function_is_given_at_every_call_is_the_device_count():
    assert plan_global(_split_in_a_function("num_devices")).possible, plan_global(_split_in_a_function("num_devices")).blocker
    assert plan_global(_split_in_a_function("count=num_devices")).possible
    # Another count at a call, or a public function of a module another may import (not a script).
    assert_blocks_at(_split_in_a_function("2"), "return train_step(params, shard_batch(", "argument 2 of `train_step`")
    library = _split_in_a_function("num_devices", "step_once").replace('\n\nif __name__ == "__main__":\n    print(main())\n', "\n")
    assert_blocks_at(library, "return train_step(params, shard_batch(", "argument 2 of `train_step`")


_TWO_PASSES = (
    "    def _device_put_replicated(x):\n        return jax.device_put(jnp.stack([x] * len(devices)), sharding)\n\n"
    "    return jax.tree.map(_device_put_replicated, x)\n",
    "    stacked = jax.tree.map(lambda v: jnp.stack([v] * len(devices)), x)\n"
    "    return jax.tree.map(lambda v: jax.device_put(v, sharding), stacked)\n")


@pytest.mark.parametrize(("old", "new"), [
    # The copies read again before they are laid out.
    ("    return jax.tree.map(lambda v: jax.device_put(v, sharding), stacked)\n",
     "    print(stacked)\n    return jax.tree.map(lambda v: jax.device_put(v, sharding), stacked)\n"),
    # The second pass does more than lay them out, or the first does not copy.
    ("jax.device_put(v, sharding)", "jax.device_put(v * 2, sharding)"),
    ("jnp.stack([v] * len(devices))", "jnp.stack([v] * 2)"),
])
def test_a_replicate_helper_in_two_passes_is_one_only_when_they_copy_then_lay_out(old, new):
    two = _GIVEN_DEVICES.replace(*_TWO_PASSES)
    assert two != _GIVEN_DEVICES
    assert_variant_blocks(two, old, new, "params, loss = train_step(", _NOT_MADE)


def test_the_mesh_takes_the_name_a_deleted_helper_used_and_not_one_a_kept_helper_uses():
    assert "    mesh = jax.make_mesh(" in fix(_GIVEN_DEVICES, set())  # (the helper's own `mesh` goes with it)
    library = _GIVEN_DEVICES.replace('\n\nif __name__ == "__main__":\n    print(main())\n', "\n")
    assert library != _GIVEN_DEVICES
    new = fix(library, set())
    assert "def device_put_replicated" in new and "    batch_mesh = jax.make_mesh(" in new


_MLP = (FIXTURES / "mlp.in.py").read_text()
_TWO_PMEANS = '    grads = lax.pmean(grads, axis_name="batch")\n    loss = lax.pmean(loss, "batch")\n'


@pytest.mark.parametrize(("pmean", "left"), [
    pytest.param('    loss, grads = lax.pmean((loss, grads), "batch")\n', None, id="the same names"),
    pytest.param('    avg_loss, grads = lax.pmean((loss, grads), "batch")\n', "    avg_loss, grads = loss, grads\n",
                 id="new names"),
])
def test_a_dropped_pmean_of_a_tuple_leaves_no_parentheses_or_self_assignment(pmean, left):
    text = _MLP.replace(_TWO_PMEANS, pmean).replace("return params, loss", "return params, avg_loss" if left else
                                                    "return params, loss")
    assert text != _MLP
    fixed = fix(text, set())
    assert "pmean" not in fixed and "= (loss, grads)" not in fixed
    if left is None:
        assert "loss, grads =" not in fixed.replace("loss, grads = jax.value_and_grad", "")
    else:
        assert left in fixed


def test_a_device_count_a_script_reads_only_where_the_fix_rewrote_goes_with_the_reads():
    script = _MLP + '\n\nif __name__ == "__main__":\n    train({"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}, [])\n'
    fixed = fix(script, set())
    assert "N_DEVICES" not in fixed and "PartitionSpec as P\n\n\ndef loss_fn" in fixed
    # A module other modules import may export it: it stays; so does one the script reads elsewhere.
    assert "N_DEVICES = jax.local_device_count()" in fix(_MLP, set())
    read = script.replace('print("loss", loss[0])', 'print("loss", loss[0], N_DEVICES)')
    assert "N_DEVICES = jax.local_device_count()" in fix(read, set())


_COMMENTED = (FIXTURES / "comments_in_the_pmap_call.in.py").read_text()


def test_comments_inside_a_pmap_call_stay_where_the_call_is_edited_in_place():
    fixed = fix(_COMMENTED, set())
    assert "# donate_argnums=(0,),  (not on CPU)" in fixed and "# the old parameters are not read again" in fixed
    assert "the data-parallel axis" not in fixed  # (it ended the line of the option that went)
    # The lines aligned under the opening bracket move with it.
    assert "    p_eval_step = jax.jit(eval_step,\n                          # in_axes" in fixed


@pytest.mark.parametrize(("old", "new"), [
    pytest.param('        train_step,\n        axis_name="batch",', '        train_step, axis_name="batch",',
                 id="between an option that goes and one that stays"),
    pytest.param("jax.pmap(eval_step,", "jax.jit(jax.pmap(eval_step,", id="in a jit"),
])
def test_a_comment_the_in_place_edit_would_delete_still_blocks(old, new):
    text = _COMMENTED.replace(old, new)
    if "jax.jit(jax.pmap" in text:
        text = text.replace("                           )\n", "                           ))\n")
    assert_variant_blocked_for(_COMMENTED, _COMMENTED, text, "comments inside the pmap call would be lost")


@pytest.mark.parametrize("change", [
    pytest.param(("jax.value_and_grad(loss_fn)(params, batch)", "jax.value_and_grad(loss_fn)(params, batch=batch)"),
                 id="a gradient function"),
    pytest.param(("def loss_fn(params, batch):", "def loss_fn(params, batch, *, scale=1.0):"),
                 id="a keyword-only parameter left to its default"),
    pytest.param(("    return jnp.mean(jnp.sum((logits - targets) ** 2, axis=-1))",
                  "    return squared_error(targets=targets, logits=logits)\n\n\n"
                  "def squared_error(logits, targets):\n"
                  "    return jnp.mean(jnp.sum((logits - targets) ** 2, axis=-1))"), id="a module function"),
])
def test_a_function_the_step_calls_with_keywords_is_read_with_them(change):
    text = _MLP.replace(*change)
    assert text != _MLP
    assert plan_global(text).possible, plan_global(text).blocker
    # What the keyword carries is read as it is: a per-device value where the function needs
    # a replicated one still blocks.
    sorted_rows = text.replace("jnp.mean(jnp.sum((logits - targets) ** 2, axis=-1))",
                               "jnp.mean(jnp.sort(logits - targets, axis=0))")
    assert sorted_rows != text
    assert not plan_global(sorted_rows).possible


_MLP_LOSS = "jnp.mean(jnp.sum((logits - targets) ** 2, axis=-1))"


@pytest.mark.parametrize(("loss", "blocked"), [
    pytest.param("jnp.mean(optax.losses.cosine_distance(logits, targets))", None, id="optax.losses"),
    pytest.param("jnp.mean(optax.kl_divergence(jax.nn.log_softmax(logits), targets, 1))", None, id="axis 1"),
    pytest.param("jnp.mean(optax.cosine_similarity(logits, targets, axis=0))", "`cosine_similarity` along the batch axis",
                 id="axis 0"),
    pytest.param("jnp.mean(optax.softmax_cross_entropy(logits, targets, 0))", "`softmax_cross_entropy` along the batch",
                 id="axis 0 by position"),
    pytest.param("jnp.mean(jax.nn.softmax(logits, axis=-2))", "`softmax` along the batch axis", id="axis -2"),
])
def test_optax_losses_are_per_example_along_an_axis_other_than_the_batchs(loss, blocked):
    text = _MLP.replace("import jax.numpy as jnp\n", "import jax.numpy as jnp\nimport optax\n").replace(_MLP_LOSS, loss)
    view = plan_global(text)
    if blocked is None:
        assert view.possible, view.blocker
    else:
        assert not view.possible and blocked in view.blocker, view.blocker


@pytest.mark.parametrize("loss", [
    "jnp.mean(jnp.real(jnp.exp2(logits - targets)))",  # (tensorcircuit's circuits give complex logits)
    "jnp.mean(jnp.arctan2(logits, targets) ** 2)",
    "jnp.mean(jnp.hypot(logits - targets, 1.0))",
    "jnp.mean(jax.nn.mish(logits) - jax.nn.hard_tanh(targets))",
])
def test_elementwise_functions_of_per_example_values_are_per_example(loss):
    text = _MLP.replace(_MLP_LOSS, loss)
    assert text != _MLP
    assert plan_global(text).possible, plan_global(text).blocker
    # (`jnp.sort` along the batch is not: the control)
    assert not plan_global(_MLP.replace(_MLP_LOSS, "jnp.mean(jnp.real(jnp.sort(logits - targets, axis=0)))")).possible


@pytest.mark.parametrize(("loss", "blocked"), [
    pytest.param("jnp.mean(jnp.sum((logits - targets) ** 2, axis=1))", None, id="a positive axis"),
    pytest.param("jnp.mean(jnp.sum((logits - targets) ** 2, axis=-2))", "`sum` over the batch axis",
                 id="-2, the batch axis of (examples, features)"),
    pytest.param("jnp.mean((logits - targets) ** 2) * logits.shape[-2]", "is not its global `.shape`",
                 id="a shape read at -2"),
])
def test_only_the_last_axis_counts_from_the_end_as_a_feature_axis(loss, blocked):
    text = _MLP.replace(_MLP_LOSS, loss)
    view = plan_global(text)
    if blocked is None:
        assert view.possible, view.blocker
    else:
        assert not view.possible and blocked in view.blocker, view.blocker


def test_copies_of_any_value_made_once_are_a_replicate():
    made_inline = _COMMENTED
    assert "    params = jax.device_put(jnp.zeros((4, 2)), NamedSharding(mesh, P()))\n" in fix(made_inline, set())
    # A Python number has no dtype of its own to keep; a comprehension evaluates its element n times.
    for copies in ("jnp.array([0.0] * n)", "jnp.stack([jnp.zeros((4, 2)) for _ in range(n)])"):
        assert not plan_global(made_inline.replace("jnp.stack([jnp.zeros((4, 2))] * n)", copies)).possible


_EINOPS = (FIXTURES / "batches_split_by_einops.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param('"(d b) -> d b", d=n)', '"(b d) -> d b", d=n)', "argument 3 of `p_train_step` (`labels`) is not made",
                 id="rows dealt out one by one"),
    pytest.param('"(d b) c h w -> d b h w c", d=n)', '"(d b) c h w -> b d h w c", d=n)', "(`images`) is not made",
                 id="the device axis second"),
    pytest.param('"(d b) -> d b", d=n)', '"(d b) -> d b", d=2)', "(`labels`) is not made", id="a count of two"),
    pytest.param('repeat(x, "... -> d ...", d=n)', 'repeat(x, "... -> ... d", d=n)', "(`params`) is not made",
                 id="copies on the last axis"),
])
def test_an_einops_pattern_that_is_not_pmaps_split_blocks(old, new, reason):
    assert_variant_blocked_for(_EINOPS, old, new, reason)


def test_an_einops_split_in_a_tree_map_is_a_split():
    mapped = _EINOPS.replace('labels = rearrange(labels, "(d b) -> d b", d=n)',
                             'labels = jax.tree.map(lambda x: rearrange(x, "(d b) ... -> d b ...", d=n), labels)')
    assert mapped != _EINOPS
    fixed = fix(mapped, set())
    assert 'labels = jax.make_array_from_process_local_data(NamedSharding(mesh, P("devices")), labels)' in fixed


_UNDER_A_FLAG = (FIXTURES / "batches_split_under_a_flag.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param("get_batch(data, rng, 2, for_pmap=True)", "get_batch(data, rng, 2, for_pmap=step >= 0)",
                 "argument 3 of `p_update` (`xb`) is not made", id="a flag that is not a literal"),
    pytest.param("    if for_pmap:\n        batch_size = ",
                 "    for_pmap = for_pmap and jax.device_count() > 1\n    if for_pmap:\n        batch_size = ",
                 "argument 3 of `p_update` (`xb`) is not made", id="a flag the function rebinds"),
    pytest.param("get_batch(data, rng, 4, for_pmap=False)", "get_batch(data, rng, 4, for_pmap=True)",
                 "`get_batch` returns batches it splits per device elsewhere", id="split at a call not read"),
])
def test_a_split_under_a_flag_is_read_only_where_a_literal_flag_decides_it(old, new, reason):
    assert_variant_blocked_for(_UNDER_A_FLAG, old, new, reason)


def test_a_split_in_the_else_or_elif_of_a_negated_flag_is_the_flagged_calls():
    negated = _UNDER_A_FLAG.replace("def get_batch(data, rng, batch_size, for_pmap=False):",
                                    "def get_batch(data, rng, batch_size, plain=True):").replace(
        "    if for_pmap:\n        batch_size", "    if not plain:\n        batch_size").replace(
        "    if for_pmap:\n        x = rearrange(", "    if plain:\n        pass\n    else:\n        x = rearrange(").replace(
        "for_pmap=False", "plain=True").replace("for_pmap=True", "plain=False")
    assert "for_pmap" not in negated
    fixed = fix(negated, set())
    assert "rearrange(" not in fixed and "    if plain:\n        pass\n    return x, y" in fixed
    chained = _UNDER_A_FLAG.replace("    if for_pmap:\n        x = rearrange(",
                                    "    if not for_pmap:\n        pass\n    elif for_pmap:\n        x = rearrange(")
    assert chained != _UNDER_A_FLAG
    fixed = fix(chained, set())
    assert "rearrange(" not in fixed and "    if not for_pmap:\n        pass\n    return x, y" in fixed


def test_a_split_in_a_conditional_expression_on_the_flag_goes_whole():
    """`x = rearrange(x, ...) if for_pmap else x`: the flagged call's branch is the split, which
    goes, and the statement then binds `x` to itself: it goes too."""
    start = _UNDER_A_FLAG.index("    if for_pmap:\n        x = rearrange(")
    end = _UNDER_A_FLAG.index("    return x, y")
    text = _UNDER_A_FLAG[:start] + (
        '    x = rearrange(x, "(d b) t -> d b t", d=jax.device_count()) if for_pmap else x\n'
        '    y = rearrange(y, "(d b) t -> d b t", d=jax.device_count()) if for_pmap else y\n') + _UNDER_A_FLAG[end:]
    fixed = fix(text, set())
    assert "rearrange(" not in fixed and "for i in starts])\n    return x, y\n" in fixed


def test_steps_drawing_for_the_batch_say_the_random_streams_change():
    """A model given a key the step makes (`rngs={"dropout": jax.random.PRNGKey(seed)}`, the same on
    every device under pmap, as a Premchand-text GPT's `update` does) draws its masks for the whole
    batch in the global view: the note says so, as it does for keys split per device."""
    dropout = (FIXTURES / "flax_dropout_model.in.py").read_text()
    own_key = dropout.replace('rngs={"dropout": dropout_rng}', 'rngs={"dropout": jax.random.PRNGKey(0)}').replace(
        "dropout_rngs = jax.random.split(rng, jax.local_device_count())", "dropout_rngs = jax_utils.replicate(rng)")
    assert own_key.count("PRNGKey(0)") == 2 and "jax_utils.replicate(rng)" in own_key
    notes = plan_global(own_key).notes
    assert any("random draws for the batch's examples (line 34)" in note and "the random streams change" in note
               for note in notes), notes
    split = plan_global(dropout).notes  # (the keys split per device say it already)
    assert [note for note in split if "random streams" in note] == [
        "per-device RNG keys become the one key they were split from: the random streams change"]
    assert not any("random" in note for note in plan_global(_UNDER_A_FLAG).notes)


_DROPOUT = (FIXTURES / "flax_dropout_model.in.py").read_text()
_KEYS_SPLIT = "dropout_rngs = jax.random.split(rng, jax.local_device_count())"


@pytest.mark.parametrize("stack", ["jnp.stack", "np.stack", "jnp.asarray", "np.array"])
def test_keys_split_per_device_and_stacked_are_the_keys_split(stack):
    """`np.stack(jax.random.split(rng, n_devices))` (trax's trainer, brax's PPO) is the split's keys,
    one row per device: the stack goes with the split, as the split alone does."""
    text = _DROPOUT.replace(_KEYS_SPLIT, f"dropout_rngs = {stack}(jax.random.split(rng, jax.local_device_count()))")
    assert text != _DROPOUT
    view = plan_global(text)
    assert view.possible, view.blocker
    assert fix(text, set()) == fix(_DROPOUT, set())


@pytest.mark.parametrize(("stacked", "reason"), [
    pytest.param("jnp.stack(jax.random.split(rng, 2))",
                 "line 67: argument 3 of `p_train_step` (`dropout_rngs`) is not made by", id="not one key per device"),
    pytest.param("jnp.stack(jax.random.split(rng, jax.local_device_count()), axis=1)",
                 "line 62: `jax.random.split(rng, jax.local_device_count())` has pmap's device axis here",
                 id="the keys' words across"),
    pytest.param("jnp.concatenate(jax.random.split(rng, jax.local_device_count()))",
                 "line 62: `jax.random.split(rng, jax.local_device_count())` has pmap's device axis here",
                 id="one long key"),
])
def test_keys_stacked_otherwise_block(stacked, reason):
    assert_variant_blocked_for(_DROPOUT, _KEYS_SPLIT, f"dropout_rngs = {stacked}", reason)


_SIZES_WRITTEN = (FIXTURES / "batch_split_with_its_sizes_written.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    # (n, k, -1) would need `n * k` written for the merged size, k a later -1 beside it
    pytest.param("x.reshape(n_devices, per_device, 8)", "x.reshape(n_devices, per_device, -1)",
                 "argument 2 of `p_train_step` (`x`) is not made", id="a later -1"),
    pytest.param("x.reshape(n_devices, per_device, 8)", "x.reshape(2, per_device, 8)",
                 "argument 2 of `p_train_step` (`x`) is not made", id="not the device count"),
])
def test_a_split_with_its_sizes_written_that_cannot_be_merged_blocks(old, new, reason):
    assert_variant_blocked_for(_SIZES_WRITTEN, old, new, reason)


def test_the_sizes_a_merged_split_alone_read_go_with_it():
    fixed = fix(_SIZES_WRITTEN, set()).split("def main")[1]
    assert "per_device" not in fixed and "n_devices" not in fixed
    # A size the kept reshape still reads stays.
    kept = _SIZES_WRITTEN.replace("    per_device = 32 // n_devices\n", "    per_device = 32 // n_devices\n    width = 8\n")
    kept = kept.replace("x.reshape(n_devices, per_device, 8)", "x.reshape(n_devices, per_device, width)")
    assert "    width = 8\n" in fix(kept, set()) and "x.reshape(-1, width)" in fix(kept, set())


def test_out_axes_other_than_zero_or_none_blocks():
    assert_variant_blocked_for(_SIZES_WRITTEN, "out_axes=(0, 0)", "out_axes=(0, 1)", "`out_axes=` other than 0 or None")


def test_an_unmapped_replicated_output_is_read_as_the_value_it_is():
    # (`unmapped_outputs.*` runs such a program; here the loss alone, the parameters mapped)
    text = _SIZES_WRITTEN.replace("out_axes=(0, 0)", "out_axes=(0, None)").replace("losses.append(loss[0])",
                                                                                   "losses.append(loss)")
    fixed = fix(text, set())
    assert "p_train_step = jax.jit(train_step)" in fixed and "        losses.append(loss)\n" in fixed


def test_a_helper_that_goes_takes_the_comments_inside_it():
    source = (FIXTURES / "replicated_by_a_helper_given_devices.in.py").read_text()
    commented = source.replace("    mesh = jax.sharding.Mesh(np.array(devices), (\"_device_put_replicated\",))\n",
                               "    # one copy per device\n"
                               "    mesh = jax.sharding.Mesh(np.array(devices), (\"_device_put_replicated\",))  # 1-D\n")
    assert commented != source
    fixed = fix(commented, set())
    assert "def device_put_replicated" not in fixed and "one copy per device" not in fixed and "# 1-D" not in fixed


def test_a_value_the_kept_batch_reads_stays_where_its_split_goes():
    # (`targets = inputs @ TRUE_W + 1.0` is read in `(inputs, targets)`, which the layout keeps)
    source = (Path(__file__).resolve().parents[1] / "fixtures" / "runtime" / "global_psum_array_means" / "old.py")
    fixed = fix(source.read_text(), set())
    assert "        targets = inputs @ TRUE_W + 1.0\n" in fixed and "(inputs, targets)" in fixed


_DATA_OBJECT = (FIXTURES / "batches_from_a_data_object.in.py").read_text()


@pytest.mark.parametrize(("old", "new", "reason"), [
    pytest.param('        epoch = batch.pop("epoch", 0)\n', "        epoch = 0\n",
                 "also holds host values at 'epoch'", id="an entry the step would take"),
    pytest.param('        epoch = batch.pop("epoch", 0)\n', '        if step:\n            epoch = batch.pop("epoch", 0)\n',
                 "argument 2 of `p_train_step` (`batch`) is not made", id="an entry popped on one path"),
    pytest.param('            batch["epoch"] = epoch\n', '            batch["epoch"] = shard(np.zeros(8))\n',
                 "stored in an attribute or container", id="an entry with the device axis"),
    pytest.param("\n\ndef train_step(", "\n\nclass Shuffled(DataStream):\n    pass\n\n\ndef train_step(",
                 "argument 2 of `p_train_step` (`batch`) is not made", id="a class deriving from it"),
    pytest.param("class DataStream:", "class DataStream(Base):",
                 "argument 2 of `p_train_step` (`batch`) is not made", id="a base class"),
    pytest.param("    def train_iter(self):",
                 "    def __getattribute__(self, name):\n        return object.__getattribute__(self, name)\n\n"
                 "    def train_iter(self):",
                 "argument 2 of `p_train_step` (`batch`) is not made", id="attribute reads intercepted"),
    pytest.param("    def train_iter(self):",
                 "    def __new__(cls, *args, **kwargs):\n        return object.__new__(Other)\n\n"
                 "    def train_iter(self):",
                 "argument 2 of `p_train_step` (`batch`) is not made", id="an instance of another class made"),
    pytest.param("    stream = DataStream(batch_size=16, steps=3)\n",
                 "    stream = DataStream(batch_size=16, steps=3)\n    stream.generate = None\n",
                 "argument 2 of `p_train_step` (`batch`) is not made", id="the method's name assigned"),
    pytest.param('    params = {"w"', '    stream = DataStream(batch_size=8, steps=3)\n    params = {"w"',
                 "argument 2 of `p_train_step` (`batch`) is not made", id="the object bound twice"),
    pytest.param("    for i, eval_batch in enumerate(stream.eval_iter()):",
                 "    more = stream.train_iter\n    for i, eval_batch in enumerate(stream.eval_iter()):",
                 "`train_iter` returns batches it splits per device elsewhere", id="the method used as a value"),
])
def test_batches_from_a_data_object_are_read_only_where_its_class_and_entries_are_known(old, new, reason):
    assert_variant_blocked_for(_DATA_OBJECT, old, new, reason)


_OPTIMIZER_STATE_READ = '''
import jax
import jax.numpy as jnp
import optax
from flax import jax_utils
from flax.training.common_utils import shard

tx = optax.chain(optax.adam(1e-3), optax.clip(1.0))


def step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((batch @ p["w"]) ** 2))(params)
    grads = jax.lax.pmean(grads, "batch")
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "batch")


def main():
    params = {"w": jnp.ones((4, 2))}
    opt_state = tx.init(params)
    params, opt_state = jax_utils.replicate((params, opt_state))
    p_step = jax.pmap(step, "batch")
    for i in range(3):
        params, opt_state, loss = p_step(params, opt_state, shard(jnp.ones((16, 4))))
        print(loss[0], opt_state[0][0].count[0])
    return jax_utils.unreplicate(params)
'''


def test_an_index_of_a_replicated_optimizer_state_is_not_read_as_device_zero():
    """optax's states are tuples: `opt_state[0]` is the chain's first state under pmap, and only
    the `.count[0]` below it reads device 0's copy. Read as device 0's, the fix gave the program
    `opt_state[0].count[0]` (the whole state where its first part was)."""
    view = plan_global(_OPTIMIZER_STATE_READ)
    assert not view.possible and "`opt_state[0]` may take the first part of a tuple" in view.blocker, view.blocker
    read_by_a_field = _OPTIMIZER_STATE_READ.replace("opt_state[0][0].count[0]", "loss[0]")
    fixed = fix(read_by_a_field, set())
    assert "print(loss, loss)" in fixed, fixed


@pytest.mark.parametrize("read", ["state.opt_state[0]", "jax.device_get(opt_state)[0]"])
def test_other_reads_of_an_optimizer_state_by_index_are_not_device_zero(read):
    text = _OPTIMIZER_STATE_READ.replace("print(loss[0], opt_state[0][0].count[0])",
                                         f"state = jax_utils.replicate(make_state())\n        print(loss[0], {read})")
    view = plan_global(text)
    assert not view.possible and "may take the first part of a tuple or list" in view.blocker, view.blocker


_PAIR_READ = '''
import jax
import jax.numpy as jnp


def make():
    return jnp.zeros(3), jnp.ones(3)


def step(w, x):
    return jax.lax.pmean(w + x.mean(), "i")


def main():
    n = jax.local_device_count()
    both = jax.device_put_replicated(make(), jax.local_devices())
    w = jax.device_put_replicated(jnp.zeros(3), jax.local_devices())
    p_step = jax.pmap(step, axis_name="i")
    for _ in range(3):
        w = p_step(w, jnp.ones((n * 4, 3)).reshape((n, 4, 3)))
    print(both[0], w[0])
'''


def test_an_index_of_a_replicated_tuple_is_its_first_part_not_device_zero():
    """`both[0]` of a replicated pair is the pair's first array under pmap (with the device axis):
    the fix once gave the program `print(both, w)`, the whole pair where its first part was."""
    view = plan_global(_PAIR_READ)
    line = _PAIR_READ.splitlines().index("    print(both[0], w[0])") + 1
    assert not view.possible and view.line == line, view.blocker
    assert "`both[0]` may take the first part of a tuple or list" in view.blocker, view.blocker
    one_array = _PAIR_READ.replace("return jnp.zeros(3), jnp.ones(3)", "return jnp.zeros(3)")
    assert "    print(both, w)\n" in fix(one_array, set())


def test_a_helper_that_indexes_its_argument_reads_device_zero_only_of_one_array():
    """`def first(v): return v[0]` is an unreplicate of one array; of the replicated pair it gives
    the pair's first part, which the fix once rewrote to the whole pair."""
    helper = _PAIR_READ.replace("def step(w, x):", "def first(v):\n    return v[0]\n\n\ndef step(w, x):")
    view = plan_global(helper.replace("print(both[0], w[0])", "print(first(both), first(w))"))
    assert not view.possible and "`first(both)` may take the first part of a tuple" in view.blocker, view.blocker
    fixed = fix(helper.replace("print(both[0], w[0])", "print(first(w))"), set())
    assert "    print(w)\n" in fixed


def test_a_parameter_nothing_here_passes_blocks_and_the_finding_names_the_annotation_that_proves_it():
    """`fit(w, x)`, called only from outside the module: `w[0]` is device 0's copy only if `w` is
    an array, which the module cannot show; the finding says which annotation would."""
    annotated = (FIXTURES / "devices_every_device.in.py").read_text()
    text = annotated.replace("def fit(w: jax.Array, x: jax.Array):", "def fit(w, x):")
    assert text != annotated and plan_global(annotated).possible
    view = plan_global(text)
    line = text.splitlines().index("def fit(w, x):") + 1
    assert not view.possible and f"parameter `w` (line {line}) is annotated `jax.Array`" in view.blocker, view.blocker
    assert "annotated" not in plan_global(_PAIR_READ).blocker  # (no annotation makes a pair one array)


def test_the_last_devices_copy_of_a_replicated_value_is_device_zeros():
    """`loss[-1]` of a `pmean`ed loss (nanoGPT logs it so): every device holds the same value, so the
    last device's copy is the one value the global view computes (tests/test_runtime_global_view.py
    runs it against pmap)."""
    text = (FIXTURES / "keyword_arguments.in.py").read_text().replace("losses.append(loss[0])",
                                                                     "losses.append(loss[-1])")
    assert "losses.append(loss[-1])" in text
    assert "        losses.append(loss)\n" in fix(text, set())
    pair = _PAIR_READ.replace("print(both[0], w[0])", "print(both[-1], w[-1])")
    view = plan_global(pair)
    assert not view.possible and "`both[-1]` may take the first part of a tuple" in view.blocker, view.blocker


_PUT_SHARDED = (FIXTURES / "batches_put_sharded_by_split.in.py").read_text()


@pytest.mark.parametrize("split", [
    "jax.device_put_sharded(jnp.split(bx, 2, axis=0), devices)",  # not one part per device
    "jax.device_put_sharded(jnp.split(bx, n_devices, axis=1), devices)",  # the features split
    "jax.device_put_sharded(jnp.array_split(bx, n_devices), devices)",  # parts that may differ
    "jax.device_put_sharded(jnp.split(bx, n_devices, axis=0), devices[:2])",  # some devices
    "jax.device_put_sharded(jnp.split(bx, [4, 8]), devices)",  # cut at given rows
])
def test_a_split_put_on_devices_that_is_not_one_equal_part_per_device_blocks(split):
    assert_variant_blocks(_PUT_SHARDED, "jax.device_put_sharded(jnp.split(bx, n_devices, axis=0), devices)", split,
                          "params, loss = p_train_step(", "argument 2 of `p_train_step` (`bx`) is not made by")


_PUT_SHARDED_IN_GENERATORS = (FIXTURES / "batches_put_sharded_by_split_in_generators.in.py").read_text()


@pytest.mark.parametrize("split", [
    "jax.device_put_sharded(np.split(bx, 2), devices)",  # not one part per device
    "jax.device_put_sharded(np.split(bx, n_devices, axis=1), devices)",  # the features split
    "jax.device_put_sharded(np.array_split(bx, n_devices), devices)",  # parts that may differ
    "jax.device_put_sharded(np.split(bx, n_devices), devices[:2])",  # some devices
])
def test_a_generator_that_puts_other_splits_on_devices_blocks(split):
    """A generator's split goes only where it is one equal part per local device, as in the loop."""
    assert_variant_blocks(_PUT_SHARDED_IN_GENERATORS, "jax.device_put_sharded(np.split(bx, n_devices), devices)",
                          split, "params, loss = p_train_step(",
                          "argument 2 of `p_train_step` (`batch`) mixes values a generator split per device with others")


def test_a_generator_that_yields_its_splits_put_on_devices_yields_the_host_batch():
    """`yield (jax.device_put_sharded(np.split(bx, n), devices), ...)`: the yield keeps its layout,
    each part the host array it split."""
    text = _PUT_SHARDED_IN_GENERATORS.replace(
        "        bx = jax.device_put_sharded(np.split(bx, n_devices), devices)\n"
        "        by = jax.device_put_sharded(jnp.split(by, n_devices, axis=0), devices)\n"
        "        yield bx, by\n",
        "        yield (jax.device_put_sharded(np.split(bx, n_devices), devices),\n"
        "               jax.device_put_sharded(jnp.split(by, n_devices, axis=0), devices))\n")
    assert "yield (jax.device_put_sharded" in text
    fixed = fix(text, set())
    assert "        yield (bx,\n               by)\n" in fixed, fixed
    called = {n.attr for n in ast.walk(ast.parse(fixed)) if isinstance(n, ast.Attribute)}
    assert not called & {"device_put_sharded", "pmap"}, fixed


_DEVICES_BY_NAME = '''
import jax
import jax.numpy as jnp
import numpy as np


def total_loss(w, x):
    return jax.lax.psum(jnp.mean(x @ w), axis_name="batch")


def main():
    DEVICES
    p_total_loss = jax.pmap(total_loss, axis_name="batch", devices=devices)
    n = jax.local_device_count()
    w = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), jnp.ones((3, 2)))
    x = np.ones((16, 3), np.float32)
    return p_total_loss(w, x.reshape((n, -1) + x.shape[1:]))[0]
'''


@pytest.mark.parametrize(("bound", "possible"), [
    pytest.param("devices = jax.devices()", True, id="every device, bound in the function"),
    pytest.param("jax.distributed.initialize()\n    devices = jax.devices()", True,
                 id="bound below the function's initialize, several processes"),
    pytest.param("devices = jax.devices()\n    jax.distributed.initialize()", False,
                 id="bound above initialize: this process's devices"),
    pytest.param("devices = jax.devices()[:2]", False, id="a subset"),
    pytest.param("pass", False, id="bound at import"),
])
def test_devices_given_by_a_name_are_every_device_only_where_bound_so(bound, possible):
    text = _DEVICES_BY_NAME.replace("    DEVICES", f"    {bound}")
    if bound == "pass":
        text = text.replace("\n\ndef main():", "\n\ndevices = jax.devices()\n\n\ndef main():")
    view = plan_global(text)
    assert view.possible == possible, view.blocker
    if not possible:
        assert "`devices=`" in view.blocker, view.blocker


def test_devices_bound_to_a_name_in_a_scripts_main_block_are_every_device():
    """The script's `__main__` block runs where no importer does: a name bound there to
    `jax.devices()` is every device, as in a function."""
    body = _DEVICES_BY_NAME[_DEVICES_BY_NAME.index("def main():"):].replace("    return ", "    print(")
    script = _DEVICES_BY_NAME[:_DEVICES_BY_NAME.index("def main():")] + body.replace(
        "def main():", 'if __name__ == "__main__":').replace("    DEVICES", "    devices = jax.devices()") + ")\n"
    view = plan_global(script)
    assert view.possible, view.blocker


_STACKED = (FIXTURES / "batches_stacked_one_per_device.in.py").read_text()


@pytest.mark.parametrize(("old", "new"), [
    pytest.param("            ys.append(np.asarray(y))\n",
                 "            ys.append(np.asarray(y))\n            if x.shape[0] == 0:\n                break\n",
                 id="a loop that may end early"),
    pytest.param("            xs.append(np.asarray(x))\n", "            xs.append(np.asarray(x))\n            xs.append(x)\n",
                 id="two draws a device"),
    pytest.param("        for _ in range(n_devices):\n", "        for _ in range(2):\n", id="not one per device"),
    pytest.param("        return jnp.stack(xs), jnp.stack(ys)", "        return jnp.stack(xs, axis=1), jnp.stack(ys)",
                 id="stacked on another axis"),
    pytest.param("        return jnp.stack(xs), jnp.stack(ys)", "        xs.reverse()\n        return jnp.stack(xs), jnp.stack(ys)",
                 id="the list used otherwise"),
    pytest.param("        xs, ys = [], []\n        for _ in range(n_devices):",
                 "        xs, ys = [np.zeros((4, 6), np.float32)], []\n        for _ in range(n_devices):",
                 id="a list not empty at first"),
    pytest.param("        return jnp.stack(xs), jnp.stack(ys)",
                 "        def drop_last():\n            xs.pop()\n\n        drop_last()\n"
                 "        return jnp.stack(xs), jnp.stack(ys)", id="the list used by a nested function"),
])
def test_batches_stacked_one_per_device_only_where_the_list_holds_one_draw_per_device(old, new):
    # (where only `xs` is not one draw per device, the batch mixes it with `ys`, which is)
    assert_variant_blocked_for(_STACKED, old, new, "argument 2 of `p_train_step` (`batch`)")
