"""Data-parallel training of a small MLP, written the pmap way (JAX 0.4-era).

Everything here is what jaxmigrate migrates: pmap with a named axis, gradients averaged with
lax.pmean, parameters replicated onto every device with a leading device axis, per-device RNG
keys, the batch reshaped to (devices, per_device_batch, ...), and results read back from device 0.
Runs as it was written on jax[cpu]==0.4.30 with
XLA_FLAGS=--xla_force_host_platform_device_count=8.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

LEARNING_RATE = 0.1
KEEP_PROB = 0.9  # dropout's
N_DEVICES = jax.local_device_count()


def init_params(key, sizes=(16, 32, 4)):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, w_key = jax.random.split(key)
        params.append({
            "w": jax.random.normal(w_key, (n_in, n_out)) / np.sqrt(n_in),
            "b": jnp.zeros((n_out,)),
        })
    return params


def forward(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, batch, dropout_key):
    x, y = batch
    keep = jax.random.bernoulli(dropout_key, KEEP_PROB, x.shape)
    logits = forward(params, jnp.where(keep, x / KEEP_PROB, 0.0))
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@functools.partial(jax.pmap, axis_name="batch")
def train_step(params, batch, dropout_key):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, dropout_key)
    # Every device computed gradients on its own shard: average them across devices.
    grads = lax.pmean(grads, axis_name="batch")
    loss = lax.pmean(loss, axis_name="batch")
    new_params = jax.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return new_params, loss


def synthetic_batch(step, batch_size=64):
    rng = np.random.default_rng(step)
    x = rng.normal(size=(batch_size, 16)).astype(np.float32)
    labels = rng.integers(0, 4, size=batch_size)
    y = np.eye(4, dtype=np.float32)[labels]
    # pmap convention: a leading axis of one slice per device.
    return (
        x.reshape((N_DEVICES, -1) + x.shape[1:]),
        y.reshape((N_DEVICES, -1) + y.shape[1:]),
    )


def main(steps=5):
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    params = jax.device_put_replicated(params, jax.local_devices())
    losses = []
    for step in range(steps):
        key, step_key = jax.random.split(key)
        dropout_keys = jax.random.split(step_key, N_DEVICES)
        params, loss = train_step(params, synthetic_batch(step), dropout_keys)
        losses.append(loss[0])
    final_params = jax.tree_map(lambda x: x[0], params)
    return {"losses": jnp.stack(losses), "params": final_params}


if __name__ == "__main__":
    print(main())
