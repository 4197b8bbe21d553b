"""JAX's own `examples/spmd_mnist_classifier_fromscratch.py` (fetched from GitHub with the
`examples/datasets.py` it imports, not on PyPI; `benchmarks/real_programs.py` copies both beside this
driver), run whole: its logic is its `if __name__ == "__main__":` block, which main() runs with
`runpy.run_path(..., run_name="__main__")`. The script's constants stay as written (10 epochs,
batches of 128, layers 784-1024-1024-10, step size 0.001, parameters from `npr.RandomState(0)`,
batches shuffled by `npr.RandomState(0)`); only the data is chosen: `TRAIN_EXAMPLES` (1024: 8
batches an epoch, none ragged, 16 examples a device on 8 devices) training and `TEST_EXAMPLES`
(256) test images, made here (below). Not many more: with 8192 training images (64 steps an epoch
dispatched back to back) jax 0.10.2 on a 2-core host with 8 CPU devices aborted in an all-reduce's
rendezvous ("Termination timeout ...: Expected 8 threads to join the rendezvous, but only 7 of them
arrived", 4 in another run), the original (pmap kept) as well as the migrated script; jax 0.4.30
ran the original.

The shims, the same on both sides (each installed at the first call of main()):

- `from examples import datasets`: the script is meant to run from the root of JAX's repository.
  The driver puts in `sys.modules` a package `examples` whose `__path__` is the folder holding this
  driver (where the script and `datasets.py` are copied), so that the fetched `datasets.py` itself
  is imported (and not another `examples` the working directory may hold). Its `mnist_raw()`
  downloads MNIST; the driver replaces it (and only it: `datasets.mnist()`, which the script calls,
  runs as written, flattening the images to float32 in [0, 1] and one-hot encoding the labels as
  float32) by synthetic raw data of MNIST's kinds, from a fixed NumPy seed: uint8 labels in 0..9
  and uint8 images of 28 x 28 pixels, each half its class's fixed random pattern and half noise,
  so that the labels are learnable and the accuracy moves over the 10 epochs at the script's small
  step size (the 8 batches an epoch make 80 steps in all: from 0.10 to 0.77 on the training set,
  0.10 to 0.68 on the test set; labels of a random linear teacher over uniform noise barely moved,
  0.09 to 0.11).
- `from jax.config import config`: the module `jax.config` was removed in JAX 0.4.25 (neither
  0.4.30 nor 0.10.2 has it; both still have the object `jax.config`). Where it cannot be imported
  the driver puts in `sys.modules["jax.config"]` a module whose `config` is `jax.config`. The old
  side needs it; the migrated script imports `from jax import config` instead, which the entry in
  `sys.modules` does not change.
- `xla_bridge.device_count()` (`from jax.lib import xla_bridge`): jax 0.4.30's `jax.lib.xla_bridge`
  no longer has `device_count`, and jax 0.10.2 has no `jax.lib.xla_bridge` (removed in 0.8.0; the
  fix leaves the line as it is, JM602: migrate it by hand). The driver gives `jax.lib` a module
  `xla_bridge` where it has none, and the module `device_count = jax.device_count` where it has
  none.

The script prints each epoch's time and accuracies; the driver captures its standard output and
returns the printed accuracies of every epoch (not the times).

main() returns what the script's globals hold at the end: `params` after the last epoch (the old
side's device 0 copy of the replicated parameters, the new side's global arrays; as NumPy, via
`jax.device_get`), `train_acc` and `test_acc` (the last epoch's), and each epoch's training and
test accuracy as printed."""

import contextlib
import importlib
import io
import re
import runpy
import sys
import types
from pathlib import Path

import jax
import numpy as np

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "spmd_mnist_classifier_fromscratch.py"
TRAIN_EXAMPLES = 1024
TEST_EXAMPLES = 256


def _mnist_raw():
    """MNIST's raw arrays, made up: uint8 images (n, 28, 28), each half its class's fixed random
    pattern and half noise, and their uint8 labels (0..9)."""
    rng = np.random.RandomState(0)
    patterns = rng.rand(10, 28, 28)

    def split(n):
        labels = rng.randint(0, 10, size=n).astype(np.uint8)
        pixels = 0.5 * patterns[labels] + 0.5 * rng.rand(n, 28, 28)
        return np.round(255 * pixels).astype(np.uint8), labels

    train_images, train_labels = split(TRAIN_EXAMPLES)
    test_images, test_labels = split(TEST_EXAMPLES)
    return train_images, train_labels, test_images, test_labels


def _shims():
    examples = sys.modules.get("examples")
    if list(getattr(examples, "__path__", None) or []) != [str(HERE)]:
        examples = types.ModuleType("examples")
        examples.__path__ = [str(HERE)]
        sys.modules["examples"] = examples
    from examples import datasets

    datasets.mnist_raw = _mnist_raw
    try:
        importlib.import_module("jax.config")
    except ImportError:
        module = types.ModuleType("jax.config")
        module.config = jax.config
        sys.modules["jax.config"] = module
    try:
        xla_bridge = importlib.import_module("jax.lib.xla_bridge")
    except ImportError:
        xla_bridge = types.ModuleType("jax.lib.xla_bridge")
        sys.modules["jax.lib.xla_bridge"] = xla_bridge
        importlib.import_module("jax.lib").xla_bridge = xla_bridge
    if not hasattr(xla_bridge, "device_count"):
        xla_bridge.device_count = jax.device_count


def main():
    _shims()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        ran = runpy.run_path(str(SCRIPT), run_name="__main__")
    accuracies = {kind: np.asarray([float(v) for v in re.findall(rf"^{kind} set accuracy (\S+)$",
                                                                  printed.getvalue(), re.M)], np.float32)
                  for kind in ("Training", "Test")}
    return {"params": jax.device_get(ran["params"]),
            "train_acc": np.asarray(jax.device_get(ran["train_acc"])),
            "test_acc": np.asarray(jax.device_get(ran["test_acc"])),
            "epochs": {"train_acc": accuracies["Training"], "test_acc": accuracies["Test"]}}
