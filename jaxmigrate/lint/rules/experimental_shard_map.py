from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class ExperimentalShardMap(SiteFixes, LegacyNameRule):
    """
    ## What it does
    Reports every mention of `jax.experimental.shard_map.shard_map`. Importing the
    `jax.experimental.shard_map` module alone is not reported.

    ## Why is this bad
    `shard_map` moved to `jax.shard_map`; the experimental entry point is deprecated since JAX
    0.8.0 and kept only as a legacy wrapper (it still takes `check_rep`, see JM306).

    ## Example
    ```python
    from jax.experimental.shard_map import shard_map

    f = shard_map(g, mesh, P("x"), P(), check_rep=False)
    ```

    ## Use instead
    ```python
    from jax import shard_map

    f = shard_map(g, mesh=mesh, in_specs=P("x"), out_specs=P(), check_vma=False)
    ```

    ## Fix safety
    Safe. In JAX 0.10.2 the experimental `shard_map(f, mesh, in_specs, out_specs, check_rep=True)`
    calls `_shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, axis_names=set(),
    check_vma=check_rep)`, and `jax.shard_map(f, /, *, out_specs, in_specs, mesh, axis_names=frozenset(),
    check_vma=True)` makes the same call (an empty `set` becomes the empty `frozenset` there). So
    the fix moves the import (`from jax import shard_map`, keeping any alias) or the dotted name,
    and passes mesh/in_specs/out_specs by keyword (`jax.shard_map` takes them keyword-only) and
    `check_rep` as `check_vma` (JM306), in every call, `functools.partial` and decorator the name
    reaches, and in the calls made through such a partial. Kept, with the reason: a call missing
    mesh, in_specs or out_specs (the old one raised; the new one would default them), `f=` by
    keyword, `*args`/`**kwargs`, `auto=` (JAX <= 0.5; `axis_names` is its complement, not a
    rename), a partial leaving mesh/in_specs/out_specs to its callers, a bare `@shard_map`, and
    shard_map passed around as a value. The test suite runs a legacy program on JAX 0.4.30 and
    the fixed one on 0.10.2 and compares outputs. Not seen: a partial handed to code outside the
    module that calls it with `f=` by keyword.

    ## References
    - [Introduction to shard_map](https://docs.jax.dev/en/latest/notebooks/shard_map.html)
    """

    code = "JM305"
    name = "experimental-shard-map"
    summary = "`jax.experimental.shard_map.shard_map` is deprecated; use `jax.shard_map`"
    trigger_words = ("shard_map",)
    jax_versions = "deprecated in 0.8.0"

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.moved_names:analyse_shard_map"
    site_codemod = "jaxmigrate.migrate.moved_names:rewrite"
    site_fix_message = "use `jax.shard_map`, mesh/in_specs/out_specs by keyword and check_rep as check_vma"

    VALID = [
        Valid("import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s)\n"),
        Valid("from jax import shard_map\n"),
        Valid("try:\n    from jax import shard_map\nexcept ImportError:\n    from jax.experimental.shard_map import shard_map\n"),
    ]
    INVALID = [
        Invalid(
            "from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s, s)\n",
            expected="from jax import shard_map\nf = shard_map(g, mesh=m, in_specs=s, out_specs=s)\n",
        ),
        Invalid(
            "import jax.experimental.shard_map as shmap\nf = shmap.shard_map(g, m, s, s)\n",
            expected="import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s)\n",
        ),
        Invalid(
            "import jax\nf = jax.experimental.shard_map.shard_map(g, m, s, s, check_rep=False)\n",
            expected="import jax\nf = jax.shard_map(g, mesh=m, in_specs=s, out_specs=s, check_vma=False)\n",
        ),
        Invalid(
            """
            from functools import partial
            from jax.experimental.shard_map import shard_map as smap

            @partial(smap, mesh=m, in_specs=P('x'), out_specs=P())
            def f(x):
                return x
            """,
            expected="""
            from functools import partial
            from jax import shard_map as smap

            @partial(smap, mesh=m, in_specs=P('x'), out_specs=P())
            def f(x):
                return x
            """,
        ),
        # The experimental one raised without out_specs; jax.shard_map would not: kept.
        Invalid("from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s)\n"),
        Invalid("from jax.experimental.shard_map import shard_map\nf = shard_map(g, m, s, s, auto={'y'})\n"),
    ]
