"""Data-parallel MLP training, the pmap way (784-512-512-10, batch 64, SGD, 5 steps).

Parameters are replicated onto every device with a leading device axis, the batch is reshaped to
(devices, per-device batch, ...), gradients and loss are averaged with `lax.pmean`, and results are
read back from device 0. `jaxmigrate --fix --unsafe-fixes` moves it to the global view: plain
`jax.jit` over arrays laid out on a mesh, the pmeans gone (tests/test_examples.py runs both).
Runs as it was written on jax[cpu]==0.4.30 with
XLA_FLAGS=--xla_force_host_platform_device_count=8.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

LAYER_SIZES = (784, 512, 512, 10)
BATCH_SIZE = 64
STEP_SIZE = 0.01
N_DEVICES = jax.local_device_count()


def init_params(key, sizes=LAYER_SIZES):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, w_key, b_key = jax.random.split(key, 3)
        params.append((jax.random.normal(w_key, (n_in, n_out)) / jnp.sqrt(n_in),
                       jax.random.normal(b_key, (n_out,)) * 0.01))
    return params


def predict(params, inputs):
    for w, b in params[:-1]:
        inputs = jnp.tanh(jnp.dot(inputs, w) + b)
    w, b = params[-1]
    logits = jnp.dot(inputs, w) + b
    return logits - jax.nn.logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


@functools.partial(jax.pmap, axis_name="batch")
def update(params, batch):
    value, grads = jax.value_and_grad(loss)(params, batch)
    grads = lax.pmean(grads, axis_name="batch")
    value = lax.pmean(value, axis_name="batch")
    new_params = [(w - STEP_SIZE * dw, b - STEP_SIZE * db) for (w, b), (dw, db) in zip(params, grads)]
    return new_params, value


def data(step):
    rng = np.random.default_rng(step)
    images = rng.normal(size=(BATCH_SIZE, LAYER_SIZES[0])).astype(np.float32)
    labels = np.eye(LAYER_SIZES[-1], dtype=np.float32)[rng.integers(0, LAYER_SIZES[-1], BATCH_SIZE)]
    return images, labels


def main(steps=5):
    params = init_params(jax.random.PRNGKey(0))
    replicated_params = jax.device_put_replicated(params, jax.local_devices())
    losses = []
    for step in range(steps):
        images, labels = data(step)
        images = images.reshape((N_DEVICES, -1) + images.shape[1:])
        labels = labels.reshape((N_DEVICES, -1) + labels.shape[1:])
        replicated_params, value = update(replicated_params, (images, labels))
        losses.append(value[0])
    params = jax.tree.map(lambda x: x[0], replicated_params)
    return {"losses": jnp.stack(losses), "params": params}
