"""Which leaf expressions copy a value onto pmap's leading device axis (``shapes.leaf_action``):
those that provably give ``(n, *x.shape)``, n the local device count, and none that tile or repeat
the leaf's own axes (`tests/test_runtime_global_view.py` runs the accepted ones against pmap)."""

from __future__ import annotations

import ast

import pytest

from jaxmigrate.core.module import parse_module
from jaxmigrate.migrate.global_view.shapes import DeviceAxisShapes


def _action(body: str) -> str | None:
    text = ("import jax\nimport jax.numpy as jnp\nimport numpy as np\nn = jax.local_device_count()\n"
            f"devices = jax.local_devices()\nother = jax.devices('cpu')\nf = lambda x: {body}\n")
    module = parse_module(text)
    fn = next(node for node in ast.walk(module.tree) if isinstance(node, ast.Lambda))
    return DeviceAxisShapes(module).tree_map_action(fn)


@pytest.mark.parametrize("body", [
    "np.broadcast_to(x, (n,) + x.shape)",
    "jnp.stack([x] * n)",
    "np.asarray([x for _ in range(n)])",
    "np.repeat(x[None], n, axis=0)",
    "np.repeat(x[np.newaxis, ...], n, 0)",
    "jnp.repeat(jnp.expand_dims(x, 0), n, axis=0)",
    "x[None].repeat(n, axis=0)",
    "np.tile(x[None], (n,) + (1,) * x.ndim)",
    "np.tile(x, (n,) + (1,) * np.ndim(x))",
    "jnp.tile(x, [n] + [1] * len(x.shape))",
    "jax.device_put_sharded(len(devices) * [x], devices)",
    "jax.device_put_sharded([x] * jax.local_device_count(), jax.local_devices())",
    "jax.device_put_replicated(x, devices)",
])
def test_a_copy_per_device_along_a_new_leading_axis_is_a_replication(body):
    assert _action(body) == "replicate"


@pytest.mark.parametrize("body", [
    "np.tile(x[None], (n, 1))",  # for a leaf of 2 or more axes, tiles its own axes
    "np.tile(x, (n,) + (1,) * y.ndim)",  # another array's rank
    "np.tile(x, [n] + (1,) * x.ndim)",  # (a list plus a tuple raises)
    "np.repeat(x, n, axis=0)",  # repeats the leaf's own rows
    "np.repeat(x[None], n, axis=1)",
    "np.repeat(x[None], n)",  # flattens
    "np.repeat(np.expand_dims(x, 1), n, axis=0)",
    "np.stack([x for x in range(n)])",  # the loop's own numbers
    "np.stack([x for _ in range(n) if _])",
    "np.stack([x for _ in range(2)])",
    "jax.device_put_sharded(len(devices) * [x], devices[:2])",  # some of the devices
    "jax.device_put_sharded(len(devices) * [x], other)",
    "jax.device_put_replicated(x, jax.local_devices()[1:])",
])
def test_other_repeats_and_tiles_are_not(body):
    assert _action(body) is None


_PREPARER = """
import jax
import numpy as np

def prepare(xs):
    n = jax.local_device_count()

    def _prepare(x):
        {leaf}

    return jax.tree_util.tree_map(_prepare, xs)

it = map(prepare, [])
"""


@pytest.mark.parametrize(("leaf", "split"), [
    ("x = x._numpy()\n        return x.reshape((n, -1) + x.shape[1:])", True),
    ("x = np.asarray(x)\n        x = x.astype(np.float32)\n        return x.reshape((n, -1) + x.shape[1:])", True),
    ("return x.reshape((n, -1) + x.shape[1:])", True),
    ("y = x._numpy()\n        return y.reshape((n, -1) + y.shape[1:])", False),  # a new name: not the leaf
    ("x = x._numpy()\n        return x.reshape((2, -1) + x.shape[1:])", False),  # not the device count
    ("x = x._numpy()\n        return x", False),  # prepares only
])
def test_a_batch_preparer_is_a_function_whose_leaf_function_ends_in_a_device_count_split(leaf, split):
    from jaxmigrate.migrate.global_view.helpers import batch_preparer

    module = parse_module(_PREPARER.format(leaf=leaf))
    mapped = next(n for n in ast.walk(module.tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "map")
    found = batch_preparer(module, DeviceAxisShapes(module), mapped.args[0])
    assert (found is not None) is split
    if split:
        assert found.split.func.attr == "reshape" and found.leaf.id == "x"


@pytest.mark.parametrize(("body", "action"), [
    ("x.reshape((n, -1) + x.shape[1:])", "shard"),
    ("jnp.reshape(x, (n, -1) + x.shape[1:])", "shard"),
    ("np.reshape(x, (n, -1, *x.shape[1:]))", "shard"),
    ("jnp.reshape(x, (2, -1) + x.shape[1:])", None),  # not the device count
    ("jnp.reshape(x, (n, -1) + x.shape[2:])", None),  # merges the leaf's own axes
])
def test_a_device_count_reshape_splits_in_either_form(body, action):
    assert _action(body) == action


@pytest.mark.parametrize(("body", "action"), [
    ("jax.device_put_sharded(np.split(x, n), devices)", "shard"),
    ("jax.device_put_sharded(jnp.split(x, len(devices), axis=0), jax.local_devices())", "shard"),
    ("jax.device_put_sharded(np.split(x, n, 0), devices)", "shard"),
    ("jax.device_put_sharded(np.split(x, n, axis=-1), devices)", None),  # the last axis
    ("jax.device_put_sharded(np.split(x, 2), devices)", None),  # not the device count
    ("jax.device_put_sharded(np.split(x, n), other)", None),  # other devices
])
def test_a_split_into_one_part_per_device_put_there_is_a_shard(body, action):
    assert _action(body) == action
