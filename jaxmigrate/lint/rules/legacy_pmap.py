from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class LegacyPmap(LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.pmap`: imports of it, attribute accesses that reach it
    (`jax.pmap`, `J.pmap`) and bare `pmap` brought in by `from jax import *`.

    ## Why is this bad
    `jax.pmap` is superseded, not deprecated: it still works in JAX 0.10, but it is now itself
    implemented as `jax.jit` over `jax.shard_map`, and its per-device calling convention (a leading
    device axis on every argument and result) does not compose with global `jax.Array`s,
    `NamedSharding`, or multi-dimensional meshes. It is therefore reported whatever the target
    JAX version.

    ## Example
    ```python
    import jax

    step = jax.pmap(train_step, axis_name="batch")
    ```

    ## Use instead
    ```python
    import jax
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((jax.local_device_count(),), ("batch",))
    step = jax.jit(jax.shard_map(train_step, mesh=mesh, in_specs=P("batch"), out_specs=P("batch")))
    ```

    ## Fix safety
    No fix yet. The planned exact rewrite (jit over shard_map, calling convention kept) is safe;
    the global-view rewrite changes collectives and is unsafe.

    ## References
    - [Migrating from `jax.pmap`](https://docs.jax.dev/en/latest/migrate_pmap.html)
    """

    code = "JM101"
    name = "legacy-pmap"
    summary = "`jax.pmap` is superseded by `jax.shard_map` / `jax.jit`"
    trigger_words = ("pmap",)
    jax_versions = "superseded (still present in 0.10; implemented via jit + shard_map)"

    VALID = [
        Valid("import jax\nstep = jax.jit(jax.shard_map(f, mesh=m, in_specs=s, out_specs=s))\n"),
        Valid("def pmap(f):\n    return f\n\nstep = pmap(g)\n"),
        Valid("def make(jax):\n    return jax.pmap(f)\n"),
        Valid("class T:\n    def run(self):\n        return self.pmap(f)\n"),
        Valid('import jax\nname = "jax.pmap"  # jax.pmap in a comment\n'),
        Valid("import jax\nx = jax.tree_util.tree_map(f, t)\n"),
        Valid("try:\n    from jax import shard_map\nexcept ImportError:\n    from jax import pmap\n"),
        Valid("from mylib import pmap\nstep = pmap(f)\n"),
    ]
    INVALID = [
        Invalid("import jax\nstep = jax.pmap(f, axis_name='i')\n"),
        Invalid("import jax as J\nstep = J.pmap(f)\n"),
        Invalid("from jax import pmap as pm\nstep = pm(f)\nagain = pm(g)\n"),
        Invalid("from jax import *\nstep = pmap(f)\n"),
        Invalid("import jax\n\n@jax.pmap\ndef step(x):\n    return x\n"),
        Invalid("import functools, jax\n\n@functools.partial(jax.pmap, axis_name='i')\ndef step(x):\n    return x\n"),
        Invalid("import jax\npm = jax.pmap\nstep = pm(f)\n"),
        # `jax` may be the module or a local object: reported, with the ambiguity in the message.
        Invalid("try:\n    import jax\nexcept ImportError:\n    jax = None\nstep = jax.pmap(f)\n"),
    ]
