from jaxmigrate.lint.legacy import LegacyNameRule
from jaxmigrate.lint.rule import Invalid, Safety, Valid
from jaxmigrate.lint.site_fixes import SiteFixes


class RemovedTreeAliases(SiteFixes, LegacyNameRule):
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
    Safe: each alias becomes the function it stood for, with the same signature in JAX 0.4.30
    and 0.10.2 (same parameter names, kinds and defaults, `is_leaf=None` included):
    `jax.tree.map/flatten/unflatten/leaves/structure/transpose` call the `tree_util` functions the
    aliases were, and `jax.tree_util.treedef_is_leaf` is the function itself. `tree_multimap` was
    `tree_map(*args, **kwargs)`, so it becomes `jax.tree.map`. A dotted use keeps the user's alias
    (`J.tree_map` -> `J.tree.map`). `from jax import tree_map as tm`: when every use provably
    reads that import, the uses become `jax.tree.map` (adding `import jax` once) and the import
    goes; otherwise (a name also bound elsewhere, listed in `__all__`, declared global, or never
    used here) the import moves and keeps the name: `from jax.tree import map as tm`. Star imports
    are reported only. The test suite runs a legacy program on JAX 0.4.30 and the fixed one on
    0.10.2 and compares outputs.

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

    fixable = Safety.SAFE
    site_planner = "jaxmigrate.migrate.moved_names:analyse_tree_aliases"
    site_codemod = "jaxmigrate.migrate.moved_names:rewrite"
    site_fix_message = "use the `jax.tree` / `jax.tree_util` function it stood for"

    VALID = [
        Valid("import jax\ny = jax.tree_util.tree_map(f, x)\nz = jax.tree.map(f, x)\n"),
        Valid("from jax.tree_util import tree_map, tree_leaves\n"),
        Valid("class T:\n    def go(self, x):\n        return x.tree_map(f)\n"),
        Valid("import jax\ndef f(jax):\n    return jax.tree_map(g, 1)\n"),
        Valid("import jax\nx = [jax.tree_map for jax in mods]\n"),
    ]
    INVALID = [
        Invalid("import jax\ny = jax.tree_map(f, x)\n", expected="import jax\ny = jax.tree.map(f, x)\n"),
        Invalid(
            "import jax as J\nleaves = J.tree_leaves(x)\nt = J.tree_structure(x)\n",
            expected="import jax as J\nleaves = J.tree.leaves(x)\nt = J.tree.structure(x)\n",
            count=2,
        ),
        Invalid(
            "from jax import tree_flatten, tree_unflatten as unf\n",
            expected="from jax.tree import flatten as tree_flatten, unflatten as unf\n",
            count=2,
        ),
        Invalid(
            "import jax\nfrom jax import tree_map as tm\ny = tm(f, x)\n",
            expected="import jax\ny = jax.tree.map(f, x)\n",
        ),
        Invalid(
            "from jax import treedef_is_leaf\nleaf = treedef_is_leaf(t)\n",
            expected="from jax.tree_util import treedef_is_leaf\nleaf = treedef_is_leaf(t)\n",
        ),
        Invalid("from jax.tree_util import tree_multimap\n", expected="from jax.tree import map as tree_multimap\n"),
        Invalid(
            "import jax\n\ndef f():\n    global jax\n    return jax.tree_transpose(a, b, c)\n",
            expected="import jax\n\ndef f():\n    global jax\n    return jax.tree.transpose(a, b, c)\n",
        ),
        Invalid("from jax import *\ny = tree_map(f, x)\n"),
    ]
