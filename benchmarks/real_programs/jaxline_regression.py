"""jaxline 0.0.8's training loop (`jaxline.train.train` running `AbstractExperiment.train_loop` of
`jaxline/experiment.py`, with `jaxline/utils.py`'s device helpers and in-memory checkpointer) on a
tiny experiment written here, as a jaxline user writes one: a pmapped SGD step on a linear
regression, its parameters broadcast with jaxline's own `bcast_local_devices`. Only the experiment,
the data and the configuration are chosen here."""

import numpy as np

import jax
import jax.numpy as jnp
import optax
from absl import flags
from jaxline import base_config
from jaxline import experiment
from jaxline import train
from jaxline import utils

STEPS, BATCH, FEATURES = 6, 32, 4


class Experiment(experiment.AbstractExperiment):
    CHECKPOINT_ATTRS = {"_params": "params", "_opt_state": "opt_state"}

    def __init__(self, mode, init_rng):
        super().__init__(mode=mode, init_rng=init_rng)
        self._optimizer = optax.adam(0.05)
        w = jax.random.normal(init_rng, (FEATURES,))
        params = {"w": w, "b": jnp.zeros(())}
        self._params = utils.bcast_local_devices(params)
        self._opt_state = utils.bcast_local_devices(self._optimizer.init(params))
        self._update = jax.pmap(self._update_fn, axis_name="i")

    def _update_fn(self, params, opt_state, batch, rng):
        noise = 0.01 * jax.random.normal(rng, batch["y"].shape)

        def loss_fn(p):
            pred = batch["x"] @ p["w"] + p["b"]
            return jnp.mean((pred - batch["y"] - noise) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        grads = jax.lax.pmean(grads, axis_name="i")
        updates, opt_state = self._optimizer.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {"loss": jax.lax.pmean(loss, axis_name="i")}

    def step(self, *, global_step, rng, writer):
        step = int(utils.get_first(global_step))
        data = np.random.RandomState(step)
        x = data.normal(size=(BATCH, FEATURES)).astype(np.float32)
        y = (x @ np.arange(1.0, FEATURES + 1.0, dtype=np.float32) + 0.5).astype(np.float32)
        devices = jax.local_device_count()
        batch = {"x": x.reshape(devices, -1, FEATURES), "y": y.reshape(devices, -1)}
        self._params, self._opt_state, scalars = self._update(self._params, self._opt_state, batch, rng)
        return utils.get_first(scalars)

    def evaluate(self, *, global_step, rng, writer):
        return {}


class _Writer:
    def __init__(self):
        self.scalars = []

    def write_scalars(self, global_step, scalars):
        self.scalars.append((global_step, float(scalars["loss"])))

    def write_images(self, global_step, images):
        pass


def main():
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["jaxline_regression"])
    utils.GLOBAL_CHECKPOINT_DICT.clear()
    config = base_config.get_base_config()
    config.training_steps = STEPS
    config.interval_type = "steps"
    config.log_train_data_interval = 1
    config.log_tensors_interval = 1
    config.log_async = False
    config.save_checkpoint_interval = 0
    config.random_seed = 3
    config.train_checkpoint_all_hosts = True  # every process returns its state (several processes)
    config.log_all_hosts = True
    config.lock()
    writer = _Writer()
    train.train(Experiment, config, utils.InMemoryCheckpointer(config, "train"), writer)
    snapshot = utils.GLOBAL_CHECKPOINT_DICT["latest"].history[-1].pickle_nest
    module = snapshot["experiment_module"]
    return {"params": jax.tree_util.tree_map(np.asarray, dict(module["params"])),
            "losses": np.asarray([loss for _, loss in writer.scalars], np.float32),
            "global_step": np.asarray(snapshot["global_step"])}
