"""evojax 0.2.17's `Trainer` (`evojax/trainer.py` driving `evojax/sim_mgr.py`, which pmaps the
rollouts over the local devices) training evojax's `MLPPolicy` with `PGPE` on its `CartPoleSwingUp`
task, as evojax's `examples/train_cartpole.py` does, for a few iterations. Only sizes, steps and the
seed are chosen here."""

import logging
import tempfile

import numpy as np

from evojax import Trainer
from evojax.algo import PGPE
from evojax.policy import MLPPolicy
from evojax.task.cartpole import CartPoleSwingUp


def main():
    logger = logging.getLogger("evojax_cartpole")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    train_task = CartPoleSwingUp(max_steps=20, test=False)
    test_task = CartPoleSwingUp(max_steps=20, test=True)
    policy = MLPPolicy(input_dim=train_task.obs_shape[0], hidden_dims=[8, 8],
                       output_dim=train_task.act_shape[0], logger=logger)
    solver = PGPE(pop_size=16, param_size=policy.num_params, optimizer="adam",
                  center_learning_rate=0.05, stdev_learning_rate=0.1, init_stdev=0.1, seed=7, logger=logger)
    with tempfile.TemporaryDirectory() as log_dir:
        trainer = Trainer(policy=policy, solver=solver, train_task=train_task, test_task=test_task,
                          max_iter=4, log_interval=1, test_interval=2, n_repeats=2, test_n_repeats=1,
                          n_evaluations=8, seed=7, log_dir=log_dir, logger=logger)
        best_score = trainer.run(demo_mode=False)
    return {"best_score": np.asarray(best_score), "best_params": np.asarray(solver.best_params)}
