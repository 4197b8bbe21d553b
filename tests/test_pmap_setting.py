"""Where JM101's exact rewrite is right (``jaxmigrate/migrate/_pmap_setting.py``): the step built
once, in the program's driver, in one process, called with one slice per device."""

from __future__ import annotations

import ast
import textwrap

import pytest

from jaxmigrate.migrate.pmap_to_shard_map import rewrite_module
from pmap_driver import driven


def _site(code: str):
    (site,) = rewrite_module(code).sites
    return site


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("params = jax.numpy.zeros(2)\nparams = jax.device_put_replicated(params, jax.devices())\n"
                     "for _ in range(3):\n    params = step(params, x)\nreturn params\n",
                     id="rebound by a replicate, then by the step in a loop"),
        pytest.param("return step(x, (x, x))\n", id="a tuple of sized values"),
        pytest.param("state, metrics = step(x, x)\nreturn step(state, metrics)\n", id="the step's outputs"),
        pytest.param("n = jax.local_device_count()\n"
                     "params = jax.tree.map(lambda p: jax.numpy.broadcast_to(p, (n, *p.shape)), {'w': x[0]})\n"
                     "return step(params, x)\n", id="broadcast leaf by leaf to the device count"),
        pytest.param("keys = jax.random.split(jax.random.PRNGKey(0), jax.local_device_count())\nreturn step(x, keys)\n",
                     id="a key per device"),
        pytest.param("keys = jax.random.split(jax.random.PRNGKey(0), num=jax.local_device_count())\n"
                     "return step(x, keys)\n", id="a key per device, the count by keyword"),
        pytest.param("n = jax.local_device_count()\nreturn step(jax.numpy.zeros((n, 3)), jax.numpy.full((n,), 0.5))\n",
                     id="zeros and full with the device count leading"),
        pytest.param("steps = jax.numpy.broadcast_to(0, [jax.local_device_count()])\nreturn step(steps, x)\n",
                     id="a shape given as a list (jaxline's global step)"),
    ],
)
def test_values_shown_to_have_one_slice_per_device_let_the_rewrite_through(body):
    assert _site(driven("step = jax.pmap(f, 'i')\n" + body)).rewritable


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param("params = jax.numpy.zeros(2)\nif x.size:\n    params = jax.device_put_replicated(params, jax.devices())\n"
                     "return step(params, x)\n", "argument 1 of the call at line 10 (`params`)",
                     id="replicated on one path only"),
        pytest.param("return step(x, (x, 1.0))\n", "argument 2", id="a tuple with an unsized leaf"),
        pytest.param("return step(x, jax.tree.map(lambda p: jax.numpy.broadcast_to(p, (2, *p.shape)), x))\n",
                     "argument 2", id="broadcast to 2"),
        pytest.param("return step(x, jax.numpy.ones((2, 3)))\n", "is not shown to have the device count",
                     id="two slices"),
        pytest.param("return step(x, jax.numpy.zeros((3, jax.local_device_count())))\n", "argument 2",
                     id="the device count not leading"),
    ],
)
def test_values_not_shown_to_have_one_slice_per_device_keep_the_pmap(body, reason):
    site = _site(driven("step = jax.pmap(f, 'i')\n" + body))
    assert not site.rewritable and reason in site.reason


def test_a_parameter_replicated_unconditionally_is_sized_from_there_on():
    code = textwrap.dedent("""\
        import jax
        from flax import jax_utils


        def main(params, batch):
            step = jax.pmap(f, "i")
            {before}params = jax_utils.replicate(params)
            return step(params, jax_utils.replicate(batch))


        if __name__ == "__main__":
            main(1.0, 2.0)
        """)
    assert _site(code.format(before="")).rewritable
    # Before the replicate, the parameter is what the caller passed.
    kept = _site(code.format(before="step(params, params)\n    "))
    assert not kept.rewritable and "argument 1 of the call at line 7 (`params`)" in kept.reason


@pytest.mark.parametrize(
    ("main_block", "rewritable", "reason"),
    [
        pytest.param("    main()\n", True, None, id="called once"),
        pytest.param("    app.run(main)\n", True, None, id="app.run"),
        pytest.param("    fire.Fire(main)\n", True, None, id="fire.Fire"),
        pytest.param("    fire.Fire(main)\n    fire.Fire(main)\n", False, "not shown to run once", id="fire.Fire twice"),
        pytest.param("    for _ in range(2):\n        main()\n", False, "not shown to run once", id="in a loop"),
        # Each run would build a new jit step and compile it again; pmap's cache compiled it once.
        pytest.param("    main()\n    main()\n", False, "not shown to run once", id="called twice"),
    ],
)
def test_the_driver_is_what_the_main_block_runs(main_block, rewritable, reason):
    code = driven("return jax.pmap(f, 'i')(x)\n", head="import jax\nimport fire\nfrom absl import app\n")
    code = code.replace("    main()\n", main_block)
    site = _site(code)
    assert site.rewritable is rewritable and (reason is None or reason in site.reason)


def test_a_driver_also_called_elsewhere_is_not_shown_to_run_once():
    code = driven("return jax.pmap(f, 'i')(x)\n") + "\n\ndef again():\n    return main()\n"
    site = _site(code)
    assert not site.rewritable and "not shown to run once" in site.reason


def test_a_pmap_compiled_by_the_users_jit_keeps_that_jit_and_gets_no_second_one():
    result = rewrite_module(driven("step = jax.jit(jax.pmap(lambda v: jax.lax.psum(v, 'i') - v, 'i'))\n"
                                   "return step(x)\n"))
    assert [s.rewritable for s in result.sites] == [True]
    jits = [n for n in ast.walk(ast.parse(result.text)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "jax.jit"]
    assert len(jits) == 1 and ast.unparse(jits[0].args[0].func) == "jax.shard_map", result.text


def test_the_program_built_by_the_tools_own_replicate_rewrite_is_sized():
    # `--fix` runs the replicate rewrite and the pmap rewrite in separate passes: either order works.
    body = ("params = jax.device_put(jax.tree.map(lambda v: jax.numpy.broadcast_to(v, (jax.local_device_count(), "
            "*jax.numpy.shape(v))), {'w': x[0]}), None)\nreturn step(params, x)\n")
    assert _site(driven("step = jax.pmap(f, 'i')\n" + body)).rewritable


def test_a_step_mapping_a_module_function_built_in_a_nested_function_is_not_said_to_be_built_at_import():
    site = _site("import jax\n\ndef main(x):\n    def build():\n        return jax.pmap(abs)\n    return build()(x)\n")
    assert not site.rewritable
    assert "at import" not in site.reason and "`build` (line 4), a method or nested function" in site.reason


@pytest.mark.parametrize("code", [
    # jaxline's experiment loop: a step decorated inside a method.
    "import functools\nimport jax\n\nclass Experiment:\n    def train_loop(self):\n"
    "        @functools.partial(jax.pmap, axis_name='i')\n        def next_state(s):\n            return s + 1\n"
    "        n = jax.local_device_count()\n        return next_state(jax.numpy.zeros((n, 2)))\n",
    # brax's train(): a library function, called any number of times, mapping its own closure.
    "import jax\n\ndef train(scale):\n    def step(y):\n        return y * scale\n"
    "    n = jax.local_device_count()\n    return jax.pmap(step)(jax.numpy.zeros((n, 2)))\n",
    "import functools\nimport jax\n\ndef f(y, k):\n    return y * k\n\ndef train():\n"
    "    n = jax.local_device_count()\n    return jax.pmap(functools.partial(f, k=2))(jax.numpy.zeros((n, 2)))\n",
])
def test_a_function_made_anew_where_the_step_is_built_was_compiled_anew_by_pmap_too(code):
    # pmap's cache is keyed by the function it maps: a def, lambda or partial made at each call
    # compiled at each call under pmap as well, so the rewrite need not be shown to run once.
    assert _site(code).rewritable


def test_a_step_built_in_a_loop_from_a_function_made_outside_it_stays():
    code = ("import jax\n\ndef train():\n    def step(y):\n        return y + 1\n"
            "    n = jax.local_device_count()\n    for _ in range(3):\n        jax.pmap(step)(jax.numpy.zeros((n, 2)))\n")
    site = _site(code)
    assert not site.rewritable and "inside a loop" in site.reason


@pytest.mark.parametrize(("guard", "one_process"), [
    ("if jax.process_count() > 1:\n    raise ValueError('one host only')\n", True),
    ("process_count = jax.process_count()\nif process_count > 1:\n    raise ValueError('one host only')\n", True),
    ("assert jax.process_count() == 1\n", True),
    ("if 1 != jax.process_count():\n    raise SystemExit\n", True),
    ("if jax.process_count() > 1:\n    print('several hosts')\n", False),
    ("process_count = jax.process_count()\nif process_count > 1:\n    raise ValueError\nshards = process_count * 2\n",
     False),
])
def test_a_process_count_read_only_to_refuse_several_processes_shows_one(guard, one_process):
    # brax's ES and ARS: `if process_count > 1: raise ValueError(...)`.
    site = _site(driven(guard + "step = jax.pmap(f, 'i')\nreturn step(x)\n"))
    assert site.rewritable is one_process
    assert one_process or "several processes" in site.reason


_SUBSET = """import jax

def train(max_devices=None):
    n = jax.local_device_count()
    if max_devices:
        n = min(n, max_devices)

    def episode(params, key):
        return params * jax.random.normal(key, params.shape)

    step = jax.pmap(episode)

    @jax.jit
    def epoch(params, key):
        params = jax.numpy.reshape(params, (n, -1) + params.shape[1:])
        {keys}
        return step(params, keys)
{after}
    return epoch(jax.numpy.ones((8, 3)), jax.random.PRNGKey(0))
"""


def test_a_step_mapped_over_a_named_count_of_devices_gets_a_mesh_of_that_many():
    # brax's ES / ARS: every local device, or at most max_devices_per_host of them; the step is
    # called in a jitted closure. pmap ran on the first n devices, the mesh holds those.
    code = _SUBSET.format(keys="keys = jax.random.split(key, n)", after="")
    assert _site(code).rewritable
    text = rewrite_module(code).text
    assert "mesh = jax.make_mesh(\n        (n,),\n        (\"devices\",),\n        devices=jax.local_devices()[:n],\n" in text


@pytest.mark.parametrize(("keys", "after", "reason"), [
    ("keys = jax.random.split(key, jax.local_device_count())", "", "argument 2"),  # two counts
    ("keys = jax.random.split(key, n)", "    n = 2\n", "argument 1"),  # rebound after the step is built
])
def test_a_named_count_must_be_the_one_count_and_settled_before_the_step(keys, after, reason):
    site = _site(_SUBSET.format(keys=keys, after=after))
    assert not site.rewritable and reason in site.reason
