"""Which values the global view proves one array (``global_view.arrays``): only of those is `x[0]`
of the value replicated device 0's copy. Of a tuple or list (an optimizer's state, a helper's pair)
it is the first part under pmap too, and dropping the index would put the whole tuple in its place."""

from __future__ import annotations

import ast

import pytest

from jaxmigrate.core.module import parse_module
from jaxmigrate.migrate.global_view.arrays import ArrayProof

_HEADER = '''import jax
import jax.numpy as jnp
import numpy as np
import optax


def loss_fn(p):
    return jnp.mean(p ** 2), {"norm": jnp.sum(p)}


def make_array():
    return jnp.ones(3)


def make_pair():
    return jnp.ones(3), jnp.zeros(3)


def identity(v):
    return v


def probe(y, a, b, k, ps, pairs):
'''


def _proven(body: str, header: str = _HEADER) -> bool:
    """Whether ``x``, read after ``body`` (in ``probe``), is proven one array."""
    return _print_proven(header + "".join(f"    {line}\n" for line in body.splitlines()) + "    print(x)\n")


def _print_proven(text: str) -> bool:
    """Whether the ``x`` of the program's ``print(x)`` is proven one array."""
    module = parse_module(text)
    read = next(n.args[0] for n in ast.walk(module.tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name) and n.func.id == "print")
    return ArrayProof(module).one_array(read)


@pytest.mark.parametrize("body", [
    "x = jnp.zeros(3)",
    "x = np.asarray(y)",
    "x = float(y)",
    "x = jnp.ones(3).mean()",
    "x = y.astype(jnp.float32)",  # (only arrays have `astype`)
    "x = y.shape[0]",
    "x = a - b",
    "x = -a",
    "x = jnp.mean(y) * k",
    "x = a + jnp.sum(y)",
    "x = jax.lax.pmean(jnp.mean(y), 'i')",
    "x = jax.device_put_replicated(jnp.ones(3), jax.local_devices())",
    "x = optax.softmax_cross_entropy_with_integer_labels(a, b).mean()",
    "x, grads = jax.value_and_grad(lambda p: jnp.sum(p))(y)",
    "(x, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(y)",
    "(value, x), grads = jax.value_and_grad(lambda p: (jnp.sum(p), jnp.mean(p)), has_aux=True)(y)",
    "value, x = jax.value_and_grad(loss_fn, has_aux=True)(jnp.ones(3))",
    "x = jax.grad(lambda p: jnp.sum(p))(jnp.ones(3))",
    "x = make_array()",
    "x = identity(jnp.ones(3))",
    "x = jax.jit(make_array)()",
    "x, z = [jax.lax.pmean(v, 'i') for v in (jnp.ones(2), jnp.ones(3))]",
    "x, z = jax.lax.pmean((jnp.ones(2), a), 'i')",
    "x = sum(jnp.sum(p) for p in ps)",
    "x = jax.tree.map(lambda v: v * 2.0, jnp.ones(3))",
    "x = a\nx = jnp.ones(3)",
    "x = make_pair()[1]",
    "pair = jax.device_put_replicated(make_pair(), jax.local_devices())\nx = pair[0]",
])
def test_what_is_proven_one_array(body):
    assert _proven(body)


@pytest.mark.parametrize("body", [
    "x = y",  # a parameter nothing in the module passes
    "x = make_pair()",
    "x = identity(make_pair())",
    "x = optax.adam(1e-3).init(y)",
    "x = 2 * y",  # a tuple repeated
    "x = jnp.split(y, 2)",
    "x = jnp.linalg.svd(y)",
    "x = y.shape",
    "x = y.tolist()",
    "x = y.mean()",  # (`mean` of an object of unknown kind: any class may define one)
    "x = sum(pairs, ())",
    "x, grads = jax.value_and_grad(loss_fn, has_aux=True)(y)",  # `x` is `(loss, aux)`
    "value, x = jax.value_and_grad(loss_fn)(y)",  # the grads, shaped like `y`
    "x = jax.device_put_replicated(make_pair(), jax.local_devices())",
    "x = jax.tree.map(lambda v: (v, v), jnp.ones(3))",
    "(value, x), grads = jax.value_and_grad(loss_fn, has_aux=True)(y)",  # a dict
    "x = jax.tree.map(lambda v: v * 2.0, make_pair())",
    "x = a if k else make_pair()",
    "x = jnp.ones(3)\nif k:\n    x = make_pair()",
    "x = jnp.ones(3)\nfor _ in range(k):\n    x = make_pair()",
    "x, z = [v for v in (make_pair(), a)]",
    "x = jnp.ones(3)\nfor x in pairs:\n    pass",
    "x = jnp.ones(3)\nwith k as x:\n    pass",
    "x = a | b",  # dicts merged
    "x = (make_pair(), 1)[0]",
])
def test_what_is_not_proven_one_array(body):
    assert not _proven(body)


def _given(calls: str) -> str:
    probe = "def probe(x):\n    print(x)\n\n\ndef main():\n"
    return _HEADER.replace("def probe(y, a, b, k, ps, pairs):\n", probe + calls)


@pytest.mark.parametrize(("calls", "proven"), [
    ("    probe(jnp.ones(3))\n    probe(x=make_array())\n", True),
    ("    probe(jnp.ones(3))\n    probe(make_pair())\n", False),  # one call gives a pair
    ("    probe(jnp.ones(3))\n    jax.tree.map(probe, [1])\n", False),  # passed as a value: given anything
    ("    pass\n", False),  # never called here
])
def test_a_parameter_is_what_every_call_of_its_function_gives_it(calls, proven):
    assert _print_proven(_given(calls)) is proven


@pytest.mark.parametrize(("annotation", "proven"), [
    ("jax.Array", True), ("jnp.ndarray", True), ("np.ndarray", True), ("tuple", False),
])
def test_a_parameter_annotated_as_an_array_is_one(annotation, proven):
    header = _HEADER.replace("def probe(y, a, b, k, ps, pairs):", f"def probe(x: {annotation}):")
    assert _proven("pass", header=header) is proven


@pytest.mark.parametrize(("terms", "proven"), [(100, True), (1000, False)])
def test_a_value_made_by_too_many_ways_is_not_proven(terms, proven):
    """`x0 or x0 or ...`: the proof reads every term. It reads at most a fixed number of expressions
    for one value (``arrays._STEPS``), so a module that branches wide cannot make it slow; past
    that, the value is not proven (and the global view blocks)."""
    assert _proven("x0 = jnp.ones(3)\nx = " + " or ".join(["x0"] * terms)) is proven
