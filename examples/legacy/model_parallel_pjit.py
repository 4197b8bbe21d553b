"""Model-parallel matmuls in the style of the 2023 distributed-arrays tutorial.

PositionalSharding over a 4x2 device mesh from mesh_utils, pjit with explicit shardings, a
`with mesh:` context and a PartitionSpec constraint: the APIs modern JAX replaced with Mesh,
NamedSharding and jax.jit. Runs as written on jax[cpu]==0.4.30 with 8 forced CPU devices.
"""

import jax
import jax.numpy as jnp
from jax.experimental import mesh_utils
from jax.experimental.pjit import pjit
from jax.sharding import Mesh, PartitionSpec, PositionalSharding

devices = mesh_utils.create_device_mesh((4, 2))
sharding = PositionalSharding(devices)


def layer(w, x):
    return jnp.tanh(x @ w)


def main():
    x = jax.random.normal(jax.random.PRNGKey(0), (8, 16))
    w = jax.random.normal(jax.random.PRNGKey(1), (16, 8))
    # Batch split over the first mesh axis, features over the second.
    x = jax.device_put(x, sharding.reshape(4, 2))
    w = jax.device_put(w, sharding.reshape(4, 2).replicate(0))
    y = jax.jit(layer)(w, x)

    mesh = Mesh(devices, axis_names=("data", "model"))
    sharded_layer = pjit(
        layer,
        # The shardings the inputs already have: w's columns over "model", x over both axes.
        in_shardings=(PartitionSpec(None, "model"), PartitionSpec("data", "model")),
        out_shardings=PartitionSpec("data", None),
    )
    with mesh:
        z = sharded_layer(w, x)
    total = jax.tree_map(jnp.sum, {"y": y, "z": z})
    return {"y": y, "z": z, "total": total}


if __name__ == "__main__":
    print(main())
