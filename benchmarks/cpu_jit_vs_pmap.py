"""One data-parallel step, as pmap and as the global view's jit, on forced CPU devices.

    python benchmarks/cpu_jit_vs_pmap.py [--devices 8] [--steps 40] [--python PY ...]

The step is JAX's own `examples/spmd_mnist_classifier_fromscratch.py` update (an MLP of
784-1024-1024-10, a global batch of 128, gradients `psum`med under pmap; under jit the global
gradient times the device count, what `--fix --unsafe-fixes` writes for it). Each interpreter
(default: this one) runs it in subprocesses, each with
`XLA_FLAGS=--xla_force_host_platform_device_count=N`, three ways:

- ``pmap``: the replicated parameters and the batch reshaped to (devices, per device, ...);
- ``jit``: the parameters on `NamedSharding(mesh, P())`, the batch on `P("batch")`;
- ``pmap, pipelined`` and ``jit, pipelined``: the same steps called back to back without waiting
  for each result (how a training loop calls them). The first two wait for each step
  (`block_until_ready`), so they time the step alone.

It prints the median step time of each (or how the run ended, with its last line), per JAX
version. A run that does not finish in ``--timeout`` seconds is reported as such.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent("""
    import statistics, sys, time
    import numpy as onp
    import jax, jax.numpy as jnp
    from jax.scipy.special import logsumexp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mode, steps = sys.argv[1], int(sys.argv[2])
    rng = onp.random.RandomState(0)
    sizes = [784, 1024, 1024, 10]
    params = [(0.1 * rng.randn(m, k).astype("float32"), 0.1 * rng.randn(k).astype("float32"))
              for m, k in zip(sizes[:-1], sizes[1:])]
    images = rng.rand(128, 784).astype("float32")
    labels = onp.eye(10, dtype="float32")[rng.randint(0, 10, 128)]
    n = jax.device_count()

    def predict(params, x):
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        logits = x @ w + b
        return logits - logsumexp(logits, axis=1, keepdims=True)

    def loss(params, batch):
        x, y = batch
        return -jnp.mean(predict(params, x) * y)

    def update(params, grads):
        return jax.tree_util.tree_map(lambda w, g: w - 0.001 * g, params, grads)

    if mode.startswith("pmap"):
        step = jax.pmap(lambda p, b: update(p, jax.lax.psum(jax.grad(loss)(p, b), "batch")), axis_name="batch")
        state = jax.tree_util.tree_map(lambda x: onp.broadcast_to(x, (n,) + x.shape), params)
        batch = (images.reshape(n, -1, 784), labels.reshape(n, -1, 10))
    else:
        step = jax.jit(lambda p, b: update(p, jax.tree_util.tree_map(lambda g: g * n, jax.grad(loss)(p, b))))
        mesh = Mesh(jax.devices(), ("batch",))
        state = jax.device_put(params, NamedSharding(mesh, P()))
        batch = jax.device_put((images, labels), NamedSharding(mesh, P("batch")))
    state = jax.block_until_ready(step(state, batch))
    times = []
    if mode.endswith("-pipelined"):
        start = time.perf_counter()
        for _ in range(steps):
            state = step(state, batch)
        jax.block_until_ready(state)
        times = [(time.perf_counter() - start) / steps]
    else:
        for _ in range(steps):
            start = time.perf_counter()
            state = jax.block_until_ready(step(state, batch))
            times.append(time.perf_counter() - start)
    print("STEP_MS %.1f" % (1e3 * statistics.median(times)))
""")

MODES = (("pmap", "pmap"), ("jit", "jit"), ("pmap-pipelined", "pmap, pipelined"), ("jit-pipelined", "jit, pipelined"))


def run(python: str, mode: str, devices: int, steps: int, timeout: float) -> str:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    try:
        done = subprocess.run([python, "-c", WORKER, mode, str(steps)], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout:.0f} s"
    for line in done.stdout.splitlines():
        if line.startswith("STEP_MS "):
            return f"{line.split()[1]} ms/step"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    stuck = next((line for line in lines if "Termination timeout" in line), None)
    if stuck is not None:  # XLA's CPU collectives gave up waiting for a device's thread
        arrived = re.search(r"only (\d+) of them arrived", stuck)
        return (f"aborted (exit {done.returncode}): an all-reduce's rendezvous timed out"
                + (f", {arrived[1]} of {devices} devices arrived" if arrived else ""))
    return f"exit {done.returncode}: {(lines[-1] if lines else 'no output')[:300]}"


def version(python: str) -> str:
    done = subprocess.run([python, "-c", "import jax; print(jax.__version__)"], capture_output=True, text=True)
    return done.stdout.strip() or f"? ({python})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--python", nargs="*", default=[sys.executable], help="interpreters to run it on")
    args = parser.parse_args(argv)
    print(f"| JAX | {' | '.join(label for _, label in MODES)} |")
    print(f"| --- |{' --- |' * len(MODES)}")
    for python in args.python:
        cells = [run(python, mode, args.devices, args.steps, args.timeout) for mode, _ in MODES]
        print(f"| {version(python)} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
