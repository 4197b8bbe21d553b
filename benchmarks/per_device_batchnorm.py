"""Is the global view of a real pmap program the same program? haiku's ImageNet trainer, run both ways.

    python benchmarks/per_device_batchnorm.py [--steps 3] [--device-batch 2]

dm-haiku 0.0.10's ``examples/imagenet/train.py`` (in its sdist, fetched once with ``pip download
--no-deps --no-binary :all:`` into the corpus cache) is the data-parallel pmap program JAX users
copied: a replicated ``TrainState``, a batch split over the devices, ``pmean`` of the gradients and
of the logged scalars. Its ResNet-50's BatchNorm takes no ``cross_replica_axis``, so each device
normalises with the statistics of its own slice, and the step returns each device's own BatchNorm
state, of which ``evaluate`` reads device 0's copy. ``jaxmigrate`` refuses the global view there
(the state is not reduced across devices; the finding names the line that reads device 0's copy).

This script shows what that refusal prevents. On 8 CPU devices it runs the program's own
``initial_state`` and ``train_step`` (the module imported whole; only its ImageNet reader is
replaced by random images) twice:

* as written: ``jax.pmap``, each device given its slice of the batch;
* as the global view would run them: one ``jax.jit`` over the whole batch, the same function body,
  its ``pmean``s taken over an axis of one member (the identity), which is what removing them does.

and once more with every BatchNorm given ``cross_replica_axis="i"`` (statistics over all devices), the
control: there the two should agree up to float rounding. It prints the training loss of each step
and how far apart the parameters end, ``|old - new| / |new|`` over all parameters as one vector.
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import subprocess
import sys
import tarfile
import types
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import default_cache  # noqa: E402
from real_programs import Venv  # noqa: E402

HAIKU = ("dm-haiku", "0.0.10")
# haiku 0.0.10 itself needs `jax.linear_util` (gone in 0.4.24); 0.0.13 runs its examples unchanged.
VENV = Venv("jax-0.4.30+haiku", ("jax[cpu]==0.4.30", "dm-haiku==0.0.13", "jmp", "dm-tree", "optax==0.2.2",
                                 "absl-py", "numpy<2"))


def haiku_examples() -> Path:
    """The unpacked dm-haiku 0.0.10 sdist (its examples are not in the wheel)."""
    cache = default_cache()
    project, version = HAIKU
    root = cache / "src" / project / f"{project}-{version}"
    if (root / "examples" / "imagenet" / "train.py").is_file():
        return root
    downloads = cache / "dl"
    archive = downloads / f"{project}-{version}.tar.gz"
    if not archive.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--dest", str(downloads), f"{project}=={version}"], check=True)
    with tarfile.open(archive) as sdist:
        sdist.extractall(cache / "src" / project, filter="data")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device-batch", type=int, default=2)
    parser.add_argument("--child", choices=["as-written", "synced"], help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_compare(args.root, args.child == "synced", args.steps, args.device_batch)))
        return 0
    root, python = haiku_examples(), VENV.ensure()
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    for batchnorm in ("as-written", "synced"):
        done = subprocess.run([str(python), __file__, "--child", batchnorm, "--root", str(root),
                               "--steps", str(args.steps), "--device-batch", str(args.device_batch)],
                              env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.stderr.write(done.stderr[-4000:])
            return done.returncode
        result = json.loads(done.stdout.splitlines()[-1])
        print(f"BatchNorm {batchnorm:10}  loss per step, pmap: {_floats(result['loss_pmap'])}")
        print(f"{'':22}  loss per step, global view: {_floats(result['loss_global'])}")
        print(f"{'':22}  parameters |pmap - global| / |global| = {result['params_rel_diff']:.3g}")
    return 0


def _floats(values: list[float]) -> str:
    return ", ".join(f"{v:.7g}" for v in values)


def _compare(root: Path, synced: bool, steps: int, device_batch: int) -> dict:
    """Runs in the venv, on 8 devices: the example's step as pmap and as one jit over the whole batch."""
    import haiku as hk  # the venv's haiku, imported before the sdist (which holds haiku 0.0.10) is on the path
    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(root))
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        del sys.modules[name]  # haiku 0.0.13's wheel installs an `examples` package of its own
    import examples.imagenet

    assert examples.imagenet.__file__.startswith(str(root)), examples.imagenet.__file__
    # Its reader needs tensorflow_datasets and ImageNet; the step reads only these two names of it.
    dataset = types.ModuleType("examples.imagenet.dataset")
    dataset.Batch = Mapping[str, np.ndarray]
    dataset.Split = enum.Enum("Split", {"TRAIN_AND_VALID": 2})
    dataset.Split.from_string = classmethod(lambda cls, name: cls[name])
    dataset.Split.num_examples = property(lambda self: 1281167)
    sys.modules["examples.imagenet.dataset"] = examples.imagenet.dataset = dataset
    if synced:
        unsynced = hk.BatchNorm.__init__

        def across_devices(self, *args, **kwargs):
            kwargs.setdefault("cross_replica_axis", "i")
            unsynced(self, *args, **kwargs)

        hk.BatchNorm.__init__ = across_devices
    from examples.imagenet import train

    # No warm-up, so that the few steps move the parameters (the example warms up over 5 epochs).
    train.FLAGS(["train", f"--train_device_batch_size={device_batch}", "--train_lr_warmup_epochs=0"])
    n = jax.local_device_count()
    rng = np.random.RandomState(0)
    images = rng.rand(n, device_batch, 32, 32, 3).astype(np.float32)
    labels = rng.randint(0, 1000, size=(n, device_batch)).astype(np.int32)
    key = jax.random.PRNGKey(42)

    sliced = {"images": images, "labels": labels}
    # The example pmaps `initial_state` without an axis name; the synced control's BatchNorm needs one.
    state = jax.pmap(train.initial_state, axis_name="i")(jnp.broadcast_to(key, (n, *key.shape)), sliced)
    loss_pmap = []
    for _ in range(steps):
        state, scalars = train.train_step(state, sliced)
        loss_pmap.append(float(np.asarray(scalars["train_loss"])[0]))
    params_pmap = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), state.params)

    def one(tree):
        return jax.tree_util.tree_map(lambda x: x[None], tree)

    def first(tree):
        return jax.tree_util.tree_map(lambda x: x[0], tree)

    def global_view(fn):
        return jax.jit(lambda *a: first(jax.vmap(fn, axis_name="i")(*map(one, a))))

    whole = {"images": images.reshape(n * device_batch, 32, 32, 3), "labels": labels.reshape(-1)}
    state = global_view(train.initial_state)(key, whole)
    step = global_view(train.train_step.__wrapped__)
    loss_global = []
    for _ in range(steps):
        state, scalars = step(state, whole)
        loss_global.append(float(scalars["train_loss"]))

    def flat(tree):
        return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree_util.tree_leaves(tree)])

    new = flat(state.params)
    return {"loss_pmap": loss_pmap, "loss_global": loss_global,
            "params_rel_diff": float(np.linalg.norm(flat(params_pmap) - new) / np.linalg.norm(new))}


if __name__ == "__main__":
    sys.exit(main())
