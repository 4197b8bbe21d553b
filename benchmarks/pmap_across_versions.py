"""How fast is the same pmap program on the JAX it was written for and on JAX 0.10? No migration:
one unchanged pmap training step, timed under jax 0.4.30 (the cached legacy venv) and under this
interpreter's JAX, on 8 forced CPU devices.

    python benchmarks/pmap_across_versions.py [--devices 8] [--calls 50]

Where ``bench_migrated.py`` finds a migrated program that keeps its pmap slower than the original,
the original ran on jax 0.4.30 and the migrated program on 0.10.2: this separates what JAX 0.10's
pmap (``jit`` over ``shard_map``) costs by itself from what the migration changed. Prints, per
JAX: the median and interquartile range of one synchronised call of the step, of reading device
0's copy (``x[0]``, which on 0.10's global arrays is a compiled gather), and how many times a pmap
fed a numpy array and then its own outputs (jaxline's global-step counter) compiles in 3 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jaxmigrate.runtime_checks.legacy_env import make_legacy_env  # noqa: E402

PROGRAM = r"""
import json, statistics, sys, time
import jax, jax.numpy as jnp
from jax import lax

calls = int(sys.argv[1])
n = jax.local_device_count()

def loss(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)

def train_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    grads = lax.pmean(grads, "batch")
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)

step = jax.pmap(train_step, axis_name="batch")
key = jax.random.PRNGKey(0)
params = {"w1": jax.random.normal(key, (64, 128)) * 0.1, "w2": jax.random.normal(key, (128, 8)) * 0.1}
params = jax.tree_util.tree_map(lambda p: jnp.broadcast_to(p, (n,) + p.shape), params)
x = jax.random.normal(key, (n, 32, 64))
y = jax.random.normal(key, (n, 32, 8))

def timed(fn):
    for _ in range(3):
        jax.block_until_ready(fn())
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    q = statistics.quantiles(times, n=4)
    return [statistics.median(times), q[0], q[2]]

state = {"params": params}
def one_step():
    state["params"] = step(state["params"], x, y)
    return state["params"]

print(json.dumps({"jax": jax.__version__, "step": timed(one_step),
                  "first_copy": timed(lambda: state["params"]["w1"][0])}))
"""

# In a process of its own, so that nothing else compiles while it counts.
COUNTER = r"""
import json
import numpy as np
import jax

compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: compiles.append(event) if event == "/jax/core/compile/backend_compile_duration" else None)
counter = jax.pmap(lambda s: s + 1)
steps = np.broadcast_to(np.int32(0), [jax.local_device_count()])
for _ in range(3):
    steps = counter(steps)
jax.block_until_ready(steps)
print(json.dumps({"counter_compiles": len(compiles)}))
"""


def run(python: str, devices: int, calls: int) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_PLATFORMS": "cpu"}
    row = {}
    for program in (PROGRAM, COUNTER):
        done = subprocess.run([python, "-c", program, str(calls)], env=env, capture_output=True, text=True,
                              timeout=600, check=True)
        row.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return row


def _ms(span: list[float]) -> str:
    median, low, high = (1000 * t for t in span)
    return f"{median:.2f} ms ({low:.2f}-{high:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    legacy = make_legacy_env("0.4.30")
    if legacy.python is None:
        sys.exit(f"no jax 0.4.30 venv: {legacy.reason}")
    rows = [run(str(legacy.python), args.devices, args.calls),
            run(sys.executable, args.devices, args.calls)]
    print(f"{args.devices} CPU devices, {args.calls} timed calls after 3 warm-up, load {os.getloadavg()[0]:.2f}")
    print("| JAX | pmap train step: median (IQR) | x[0] of a replicated leaf: median (IQR) "
          "| compilations of a pmap fed numpy, then its outputs (3 calls) |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['jax']} | {_ms(row['step'])} | {_ms(row['first_copy'])} | {row['counter_compiles']} |")
    old, new = rows
    print(f"new/old: step {new['step'][0] / old['step'][0]:.2f}, x[0] {new['first_copy'][0] / old['first_copy'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
