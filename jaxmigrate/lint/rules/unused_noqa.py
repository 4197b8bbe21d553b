from jaxmigrate.lint.rule import Invalid, Rule, Safety, Valid


class UnusedNoqa(Rule):
    """
    ## What it does
    Reports a `# noqa: JM...` (or a file-level `# jaxmigrate: noqa: JM...`) directive that names a
    jaxmigrate code which suppressed nothing on its line (or in its file), and any `JM` code that
    jaxmigrate does not have, such as a typo (`# noqa: JM9999`). As ruff's RUF100.

    ## Why is this bad
    A directive that suppresses nothing hides the next real finding on its line, and a misspelt
    code suppresses nothing while looking as if it did: the reader believes a finding was judged
    and kept when none was.

    Only `JM` codes are judged: a bare `# noqa` and codes of other linters (`# noqa: E501`) are
    shared with tools whose findings jaxmigrate cannot see. A code whose rule did not run on the
    file (not selected, or ignored for it) is not judged either: it may be used when it runs.

    ## Example
    ```python
    y = jax.tree.map(f, x)  # noqa: JM601
    ```

    ## Use instead
    ```python
    y = jax.tree.map(f, x)
    ```

    ## Fix safety
    Safe: the fix removes the unused and unknown codes from the directive, or the directive when
    nothing is left in it; comments change nothing a program does. A directive that names JM002
    itself is kept as it is.

    ## References
    - [ruff: unused-noqa (RUF100)](https://docs.astral.sh/ruff/rules/unused-noqa/)
    """

    code = "JM002"
    name = "unused-noqa"
    summary = "a `noqa` directive names a jaxmigrate code that suppressed nothing, or an unknown one"
    # The directives are read by the checker (lint/suppressions.py), after the other rules ran:
    # this class carries the code, the docs and the examples. Its reach is empty, so the
    # pre-filter never parses a file for it alone.
    trigger_words = ("noqa",)
    reach = ()
    fixable = Safety.SAFE

    VALID = [
        Valid("x = 1  # noqa\n"),
        Valid("x = 1  # noqa: E501\n"),
        Valid("# jaxmigrate: noqa: JM601\nimport jax\ny = jax.tree_map(f, x)\n"),
        Valid("s = '# noqa: JM9999'\n"),
        Valid("x = 1  # noqa: JM002, JM9999\n"),
    ]
    INVALID = [
        Invalid("x = 1  # noqa: JM9999\n", expected="x = 1\n"),
        Invalid("x = 1  # noqa: E501, JM9999\n", expected="x = 1  # noqa: E501\n"),
        Invalid("# jaxmigrate: noqa: JM9999\nx = 1\n", expected="\nx = 1\n"),
        Invalid("x = 1  # NOQA:JM12345 because\n", expected="x = 1  # because\n"),
    ]
