from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Valid


class RemovedTreeAliases(LegacyNameRule):
    """
    ## What it does
    Reports every mention of the removed top-level tree aliases: `jax.tree_map`,
    `jax.tree_flatten`, `jax.tree_unflatten`, `jax.tree_leaves`, `jax.tree_structure`,
    `jax.tree_transpose`, `jax.treedef_is_leaf` and `jax.tree_multimap`. The same functions under
    `jax.tree_util` (except `tree_multimap`) and `jax.tree` are fine.

    ## Why is this bad
    The aliases were deprecated (0.3.15; `jax.tree_map` in 0.4.26) and removed in JAX 0.6.0;
    `tree_multimap` was removed in 0.3.16. Accessing them raises `AttributeError`.

    ## Example
    ```python
    params = jax.tree_map(lambda p: p * 0.9, params)
    ```

    ## Use instead
    ```python
    params = jax.tree.map(lambda p: p * 0.9, params)
    ```

    ## Fix safety
    No fix yet. The planned rename is safe: same functions.

    ## References
    - [JAX 0.6.0 changelog](https://docs.jax.dev/en/latest/changelog.html#jax-0-6-0-april-16-2025)
    """

    code = "JM601"
    name = "removed-tree-aliases"
    summary = "`jax.tree_map` and the other top-level tree aliases were removed"
    trigger_words = (
        "tree_map", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure",
        "tree_transpose", "treedef_is_leaf", "tree_multimap",
    )
    jax_versions = "deprecated in 0.3.15 / 0.4.26, removed in 0.6.0"

    VALID = [
        Valid("import jax\ny = jax.tree_util.tree_map(f, x)\nz = jax.tree.map(f, x)\n"),
        Valid("from jax.tree_util import tree_map, tree_leaves\n"),
        Valid("class T:\n    def go(self, x):\n        return x.tree_map(f)\n"),
        Valid("import jax\ndef f(jax):\n    return jax.tree_map(g, 1)\n"),
        Valid("import jax\nx = [jax.tree_map for jax in mods]\n"),
    ]
    INVALID = [
        Invalid("import jax\ny = jax.tree_map(f, x)\n"),
        Invalid("import jax as J\nleaves = J.tree_leaves(x)\nt = J.tree_structure(x)\n", count=2),
        Invalid("from jax import tree_flatten, tree_unflatten as unf\n", count=2),
        Invalid("from jax.tree_util import tree_multimap\n"),
        Invalid("import jax\n\ndef f():\n    global jax\n    return jax.tree_transpose(a, b, c)\n"),
    ]
