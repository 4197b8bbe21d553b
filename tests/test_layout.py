"""Rewritten lines stay within the file's width, broken the way a formatter breaks them."""

from __future__ import annotations

import pytest

from jaxmigrate.core.edits import Edit, splice
from jaxmigrate.core.source import continuation_unit, indent_unit
from jaxmigrate.migrate._layout import fit_edits, line_limit


def _rewrite(original: str, old: str, new: str) -> str:
    start = original.index(old)
    edits = [Edit(start, start + len(old), new)]
    return fit_edits(original, edits, splice(original, edits))


@pytest.mark.parametrize(
    ("longest", "limit"),
    [pytest.param(60, 88, id="too short to tell: 88"), pytest.param(76, 79, id="79"),
     pytest.param(80, 80, id="80 columns"),
     pytest.param(85, 88, id="black's 88"), pytest.param(97, 100, id="100"),
     pytest.param(300, 120, id="never above 120")],
)
def test_the_width_is_the_files_own(longest, limit):
    assert line_limit("x = 1\n" + ("#" * longest + "\n") * 2) == limit


def test_one_stray_long_line_does_not_widen_it():
    assert line_limit("x = 1\n" + "#" * 150 + "\n" + "#" * 86 + "\n") == 88


def test_a_lengthened_call_is_broken_one_argument_per_line():
    original = "def f():\n    out = pjit(layer, in_shardings=(a, b), out_shardings=c)\n"
    new = "jax.jit(layer, in_shardings=(NamedSharding(mesh, P(None, 'model')), NamedSharding(mesh, P('data', 'model'))), out_shardings=c)"
    assert _rewrite(original, "pjit(layer, in_shardings=(a, b), out_shardings=c)", new) == (
        "def f():\n"
        "    out = jax.jit(\n"
        "        layer,\n"
        "        in_shardings=(\n"
        "            NamedSharding(mesh, P(None, 'model')),\n"
        "            NamedSharding(mesh, P('data', 'model')),\n"
        "        ),\n"
        "        out_shardings=c,\n"
        "    )\n"
    )


def test_an_element_still_too_long_is_broken_too():
    original = "x = f(a)\n" + "#" * 70 + "\n"
    new = "g(first_argument_name, (some_long_element_number_one, some_long_element_number_two, some_long_element_number_three))"
    out = _rewrite(original, "f(a)", new)
    assert all(len(line) <= 79 for line in out.splitlines())
    assert out.startswith("x = g(\n    first_argument_name,\n    (\n        some_long_element_number_one,\n")


def test_two_rewrites_side_by_side_are_each_broken_as_black_breaks_them():
    original = "def f():\n    a, b = rep(a), rep(b)\n"
    put = "jax.device_put(jax.tree.map(lambda x: np.broadcast_to(x, (n, *np.shape(x))), {}), NamedSharding(m, P('d')))"
    edits = [Edit(original.index(f"rep({name})"), original.index(f"rep({name})") + 6, put.format(name))
             for name in "ab"]
    out = fit_edits(original, edits, splice(original, edits))
    assert all(len(line) <= 88 for line in out.splitlines()), out
    assert out == (
        "def f():\n"
        "    a, b = jax.device_put(\n"
        "        jax.tree.map(lambda x: np.broadcast_to(x, (n, *np.shape(x))), a),\n"
        "        NamedSharding(m, P('d')),\n"
        "    ), jax.device_put(\n"
        "        jax.tree.map(lambda x: np.broadcast_to(x, (n, *np.shape(x))), b),\n"
        "        NamedSharding(m, P('d')),\n"
        "    )\n"
    )


def test_the_files_indentation_unit_is_used():
    original = "def f():\n  return k(a)\n"
    out = _rewrite(original, "k(a)", "k(" + ", ".join(f"argument_{i}" for i in range(10)) + ")")
    assert out.splitlines()[1:3] == ["  return k(", "    argument_0,"]
    assert indent_unit(original) == "  "


def test_the_files_own_continuation_step_is_used():
    # Google style: a 2-space file whose bracket continuations step 4.
    original = "def f():\n  y = g(\n      a)\n  return k(a)\n"
    out = _rewrite(original, "k(a)", "k(" + ", ".join(f"argument_{i}" for i in range(10)) + ")")
    assert out.splitlines()[3:5] == ["  return k(", "      argument_0,"]
    assert (indent_unit(original), continuation_unit(original)) == ("  ", "    ")


def test_a_line_the_edit_did_not_lengthen_is_left_alone():
    long_line = "y = h(" + ", ".join(f"argument_{i}" for i in range(12)) + ")  # the user's own long line"
    original = long_line + "\n"
    out = _rewrite(original, "argument_0", "argument0")
    assert out == original.replace("argument_0", "argument0")


_STEP = ("def step(params, grads):\n"
         "    grads = jax.lax.pmean(grads, axis_name='batch')\n"
         "    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)  # the user's own long line\n")


@pytest.mark.parametrize("old, new", [
    pytest.param("    grads = jax.lax.pmean(grads, axis_name='batch')\n", "", id="whole lines removed above it"),
    pytest.param("    grads = jax.lax.pmean(grads, axis_name='batch')\n", "    grads = grads\n",
                 id="a whole line rewritten above it"),
    pytest.param("    grads = jax.lax.pmean(grads, axis_name='batch')\n",
                 "    grads = jax.lax.pmean(grads, axis_name='batch')\n    n = 1\n", id="a line inserted above it"),
])
def test_the_unchanged_line_after_an_edit_of_whole_lines_is_left_alone(old, new):
    assert len(_STEP.splitlines()[2]) > line_limit(_STEP)
    assert _rewrite(_STEP, old, new) == _STEP.replace(old, new)


def test_a_comment_inside_the_brackets_is_never_moved():
    original = "x = f(a)  # keep\n"
    out = _rewrite(original, "f(a)", "f(" + ", ".join(f"argument_{i}" for i in range(12)) + ")")
    assert out.endswith("    argument_11,\n)  # keep\n")


def test_a_line_holding_every_element_of_the_bracket_above_breaks_that_bracket():
    # jaxline's bcast_local_devices: `tree_map(` ends the line above, its two elements and its
    # closing bracket are the rewritten line (163 characters in a file of 80)
    original = ("def bcast_local_devices(value):\n"
                "  devices = jax.local_devices()\n"
                "  return jax.tree_util.tree_map(\n"
                "      lambda v: jax.device_put_sharded(len(devices) * [v], devices), value)\n"
                + "#" * 78 + "\n")
    new = ('jax.device_put(jax.tree.map(lambda x: np.broadcast_to(x, (len(devices), *np.shape(x))), v), '
           'NamedSharding(Mesh(devices, ("i",)), P("i")))')
    out = _rewrite(original, "jax.device_put_sharded(len(devices) * [v], devices)", new)
    assert out == (
        "def bcast_local_devices(value):\n"
        "  devices = jax.local_devices()\n"
        "  return jax.tree_util.tree_map(\n"
        "      lambda v: jax.device_put(\n"
        "          jax.tree.map(\n"
        "              lambda x: np.broadcast_to(x, (len(devices), *np.shape(x))),\n"
        "              v,\n"
        "          ),\n"
        '          NamedSharding(Mesh(devices, ("i",)), P("i")),\n'
        "      ),\n"
        "      value,\n"
        "  )\n"
        + "#" * 78 + "\n")


def test_a_continuation_line_of_the_users_own_bracket_is_left_to_the_user():
    original = "y = jax.tree_map(f,\n                 tree,\n                 is_leaf=lambda x: isinstance(x, pjit.PartitionSpec))\n"
    out = _rewrite(original, "pjit.PartitionSpec", "jax.sharding.PartitionSpec")
    assert out == original.replace("pjit.PartitionSpec", "jax.sharding.PartitionSpec")


def test_a_comprehension_is_broken_a_clause_a_line_and_the_call_inside_it_kept_whole():
    # `[f(\n    a,\n) for a in b]` is no one's layout; black's breaks the comprehension itself.
    original = "grads = [f(dw) for dw in grads if dw is not None]\n" + "#" * 75 + "\n"
    out = _rewrite(original, "f(dw)", "jax.tree.map(lambda x: x * jax.device_count(), dw)")
    assert out.splitlines()[:5] == [
        "grads = [",
        "    jax.tree.map(lambda x: x * jax.device_count(), dw)",
        "    for dw in grads",
        "    if dw is not None",
        "]",
    ]


def test_an_element_of_a_broken_comprehension_still_too_long_is_broken_too():
    original = "def step(grads):\n    grads = [(f(dw), f(db)) for dw, db in grads]\n" + "#" * 75 + "\n"
    scaled = "jax.tree.map(lambda x: x * jax.device_count(), {})"
    out = _rewrite(original, "(f(dw), f(db))", f"({scaled.format('dw')}, {scaled.format('db')})")
    assert out.splitlines()[1:9] == [
        "    grads = [",
        "        (",
        "            jax.tree.map(lambda x: x * jax.device_count(), dw),",
        "            jax.tree.map(lambda x: x * jax.device_count(), db),",
        "        )",
        "        for dw, db in grads",
        "    ]",
        "#" * 75,
    ]


def test_a_configured_width_wins_over_the_files_own():
    from jaxmigrate.migrate._layout import line_width

    original = "x = f(a)\n"
    new = "f(" + ", ".join(f"argument_{i}" for i in range(8)) + ")"
    assert _rewrite(original, "f(a)", new).count("\n") > 1  # 97 columns: past the 88 of a short file
    with line_width(120):
        assert _rewrite(original, "f(a)", new) == f"x = {new}\n"
    with line_width(40):
        assert _rewrite(original, "f(a)", new).startswith("x = f(\n    argument_0,\n")


def test_a_tuple_that_starts_with_a_bracketed_element_is_not_taken_for_a_bracket():
    # `(a, b), c = ...`: the `(` is the first element's, so the call on the right is what breaks.
    original = "(first_long_target_name, second_long_target_name), third_long_target_name = step(a)\n"
    out = _rewrite(original, "step(a)", "step(params, batch)")
    assert out == (
        "(first_long_target_name, second_long_target_name), third_long_target_name = step(\n"
        "    params,\n"
        "    batch,\n"
        ")\n"
    )


_HUGGED = ("def train(state, x, y):\n"
           "    state, loss = p_train_step(\n"
           "        state, jnp.array(x), jnp.array(y)\n"
           "    )\n"
           + ("#" * 110 + "\n") * 2)  # (a file 120 wide)
_LAID_OUT = 'jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), jnp.array({}))'


def test_arguments_on_a_line_of_their_own_become_one_a_line():
    """black's layout for arguments that fit one line (the opener ends the line above, the closer
    starts the line below), lengthened past the width: black's next layout, one a line."""
    edits = [Edit(_HUGGED.index(f"jnp.array({name})"), _HUGGED.index(f"jnp.array({name})") + 12,
                  _LAID_OUT.format(name)) for name in "xy"]
    out = fit_edits(_HUGGED, edits, splice(_HUGGED, edits))
    assert out == ("def train(state, x, y):\n"
                   "    state, loss = p_train_step(\n"
                   "        state,\n"
                   f"        {_LAID_OUT.format('x')},\n"
                   f"        {_LAID_OUT.format('y')},\n"
                   "    )\n"
                   + ("#" * 110 + "\n") * 2)


def test_an_argument_on_a_line_of_its_own_still_too_long_is_broken_too():
    out = _rewrite(_HUGGED, "jnp.array(x)", _LAID_OUT.format("x").replace("jnp.array(x)", "jnp.array(x_" + "x" * 40 + ")"))
    assert out.splitlines()[2:5] == ["        state,", "        jax.make_array_from_process_local_data(",
                                     '            NamedSharding(mesh, P("batch")),']
    assert all(len(line) <= 120 for line in out.splitlines())


def test_arguments_on_a_line_of_their_own_beside_a_comment_keep_it_there():
    """A comment ends the line: the elements stay on it (moving them would part them from it), and
    the long one is broken at its own bracket, as any lengthened line."""
    original = _HUGGED.replace("jnp.array(y)\n", "jnp.array(y)  # the labels\n")
    out = _rewrite(original, "jnp.array(x)", _LAID_OUT.format("x").replace("jnp.array(x)", "jnp.array(x_" + "x" * 40 + ")"))
    assert out.splitlines()[2] == "        state, jax.make_array_from_process_local_data("
    assert "), jnp.array(y)  # the labels" in out
