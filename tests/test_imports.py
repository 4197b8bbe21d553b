"""A plan's imports and helpers land where the file's author would have put them (issue 13:
imports in the right group, no eaten blank lines, only imports a fix made unused are removed)."""

from __future__ import annotations

import pytest

from jaxmigrate.migrate._imports import write_imports

JAX = ("jax", None, None)
FUNCTOOLS = ("functools", None, None)
NAMED_SHARDING = ("jax.sharding", "NamedSharding", None)
NUMPY = ("numpy", None, "np")


@pytest.mark.parametrize(
    ("text", "add", "expected"),
    [
        pytest.param(
            "import os\n\nimport numpy as np\n\nx = 1\n", [FUNCTOOLS],
            "import functools\nimport os\n\nimport numpy as np\n\nx = 1\n",
            id="a standard-library module joins the standard-library group, sorted"),
        pytest.param(
            "import os\n\nimport numpy as np\n\nx = 1\n", [JAX],
            "import os\n\nimport jax\nimport numpy as np\n\nx = 1\n",
            id="a third-party module joins the third-party group, sorted"),
        pytest.param(
            "import numpy as np\n\nx = 1\n", [FUNCTOOLS],
            "import functools\n\nimport numpy as np\n\nx = 1\n",
            id="no standard-library group yet: a new one before the third-party group"),
        pytest.param(
            "import os\n\nx = 1\n", [JAX],
            "import os\n\nimport jax\n\nx = 1\n",
            id="no third-party group yet: a new one after the standard library"),
        pytest.param(
            '"""Doc."""\n\nx = 1\n', [JAX],
            '"""Doc."""\n\nimport jax\n\nx = 1\n',
            id="no imports: after the docstring, its blank line kept"),
        pytest.param(
            "#!/usr/bin/env python\n# A comment.\nx = 1\n", [JAX],
            "#!/usr/bin/env python\n# A comment.\nimport jax\nx = 1\n",
            id="no imports, no docstring: after the leading comments"),
        pytest.param(
            "from jax.sharding import Mesh, PartitionSpec\n", [NAMED_SHARDING],
            "from jax.sharding import Mesh, NamedSharding, PartitionSpec\n",
            id="a name joins an existing from-import of its module, sorted"),
        pytest.param(
            "from jax.sharding import (\n    Mesh,\n    PartitionSpec,\n)\n", [NAMED_SHARDING],
            "from jax.sharding import (\n    Mesh,\n    NamedSharding,\n    PartitionSpec,\n)\n",
            id="one name per line: a line of its own"),
        pytest.param(
            "import numpy as np\nfrom tqdm import tqdm\n\nimport jax\nimport optax\nfrom flax import struct\n"
            "from transformers import AutoConfig\n", [NAMED_SHARDING],
            "import numpy as np\nfrom tqdm import tqdm\n\nimport jax\nimport optax\nfrom flax import struct\n"
            "from jax.sharding import NamedSharding\nfrom transformers import AutoConfig\n",
            id="jax imported in a group of its own (isort sections): the new import joins that group"),
        pytest.param(
            "from jax import jit, grad\nfrom jax.config import config\nimport jax.numpy as np\n", [JAX],
            "import jax\nfrom jax import jit, grad\nfrom jax.config import config\nimport jax.numpy as np\n",
            id="a group of mixed forms (JAX's spmd_mnist): `import jax` before `from jax import ...`"),
        pytest.param(
            "from functools import partial\nfrom toolz import curry\n\nimport tensorflow as tf\n\nimport jax\n"
            "import jax.numpy as jnp\n\nfrom flax import linen as nn\n", [NUMPY],
            "from functools import partial\nfrom toolz import curry\n\nimport tensorflow as tf\n\nimport jax\n"
            "import jax.numpy as jnp\nimport numpy as np\n\nfrom flax import linen as nn\n",
            id="numpy where the file has none: beside jax, not atop a group that mixes the standard library in"),
        pytest.param(
            "from functools import partial\nfrom toolz import curry\n\nimport tensorflow as tf\n", [NUMPY],
            "from functools import partial\nfrom toolz import curry\n\nimport numpy as np\nimport tensorflow as tf\n",
            id="no jax group: the first group of third-party imports alone"),
        pytest.param(
            "import jax\nimport jax.numpy as jnp\nimport equinox as eqx\nimport optax\nimport os\n", [NAMED_SHARDING],
            "import jax\nimport jax.numpy as jnp\nfrom jax.sharding import NamedSharding\nimport equinox as eqx\n"
            "import optax\nimport os\n",
            id="a group in no sorted order: after its package's last import"),
        pytest.param(
            "import numpy.random as npr\nfrom jax import jit\nimport jax.numpy as np\nimport os\n", [JAX],
            "import numpy.random as npr\nimport jax\nfrom jax import jit\nimport jax.numpy as np\nimport os\n",
            id="a group in no sorted order: the package itself before its first import"),
        pytest.param(
            "import jax\n", [JAX], "import jax\n",
            id="already imported: nothing added"),
        pytest.param(
            "import os\r\n\r\nimport numpy as np\r\n", [JAX],
            "import os\r\n\r\nimport jax\r\nimport numpy as np\r\n",
            id="CRLF file: CRLF lines"),
        pytest.param(
            "pass  # jaxmigrate-magic-0\n# jaxmigrate-notebook-cell-boundary\nimport numpy as np\n\nx = 1\n",
            [JAX],
            "pass  # jaxmigrate-magic-0\n# jaxmigrate-notebook-cell-boundary\nimport jax\nimport numpy as np\n\nx = 1\n",
            id="notebook: into the imports' cell, not the !pip cell above it"),
        pytest.param(
            'import os\n\nos.environ["JAX_ENABLE_X64"] = "1"\n\nimport jax\nimport optax\n\nx = 1\n',
            [NAMED_SHARDING],
            'import os\n\nos.environ["JAX_ENABLE_X64"] = "1"\n\nimport jax\nimport optax\n'
            'from jax.sharding import NamedSharding\n\nx = 1\n',
            id="jax imported after the environment is set: the new import goes with it, below"),
        pytest.param(
            "import jax\ny = NamedSharding\nfrom jax.sharding import PartitionSpec\n", [NAMED_SHARDING],
            "import jax\nfrom jax.sharding import NamedSharding\ny = NamedSharding\nfrom jax.sharding import PartitionSpec\n",
            id="never below a line that reads the name"),
        pytest.param(
            "import jax\nx = 1\nfrom jax.sharding import PartitionSpec\ny = NamedSharding\n", [NAMED_SHARDING],
            "import jax\nfrom jax.sharding import NamedSharding\nx = 1\nfrom jax.sharding import PartitionSpec\n"
            "y = NamedSharding\n",
            id="a late from-import below code is not extended: the planners may spell the name above it"),
        pytest.param(
            'import os\nos.environ["A"] = "1"\nimport jax\nfrom jax.sharding import PartitionSpec\n', [NAMED_SHARDING],
            'import os\nos.environ["A"] = "1"\nimport jax\nfrom jax.sharding import NamedSharding, PartitionSpec\n',
            id="the package's first group's from-import is extended"),
    ],
)
def test_added_imports(text, add, expected):
    assert write_imports(text, text, set(add), set(), {}) == expected


PJIT = ("jax.experimental.pjit", "pjit", None)


@pytest.mark.parametrize(
    ("original", "edited", "remove", "expected"),
    [
        pytest.param(
            "import flax\nfrom jax.experimental.pjit import pjit\n\nf = pjit(g)\n",
            "import flax\nfrom jax.experimental.pjit import pjit\n\nf = jax.jit(g)\n",
            [PJIT, ("flax", None, None)],
            "import flax\n\nf = jax.jit(g)\n",
            id="only an import the edits made unused goes; a pre-existing unused one stays"),
        pytest.param(
            "from jax.experimental.pjit import pjit, with_sharding_constraint\n\nf = pjit(g)\nw = with_sharding_constraint\n",
            "from jax.experimental.pjit import pjit, with_sharding_constraint\n\nf = jax.jit(g)\nw = with_sharding_constraint\n",
            [PJIT],
            "from jax.experimental.pjit import with_sharding_constraint\n\nf = jax.jit(g)\nw = with_sharding_constraint\n",
            id="one name of several: the others stay"),
        pytest.param(
            "from jax.experimental.pjit import pjit\n\ndef pjit_user(pjit):\n    return pjit\n\nf = pjit(g)\n",
            "from jax.experimental.pjit import pjit\n\ndef pjit_user(pjit):\n    return pjit\n\nf = jax.jit(g)\n",
            [PJIT],
            "\ndef pjit_user(pjit):\n    return pjit\n\nf = jax.jit(g)\n",
            id="a parameter of the same name is not a use of the import"),
        pytest.param(
            "from jax.experimental.pjit import pjit\n__all__ = ['pjit']\nf = pjit(g)\n",
            "from jax.experimental.pjit import pjit\n__all__ = ['pjit']\nf = jax.jit(g)\n",
            [PJIT],
            "from jax.experimental.pjit import pjit\n__all__ = ['pjit']\nf = jax.jit(g)\n",
            id="exported in __all__: kept"),
        pytest.param(
            "def f():\n    from jax.experimental.pjit import pjit\n\n    return pjit(g)\n",
            "def f():\n    from jax.experimental.pjit import pjit\n\n    return jax.jit(g)\n",
            [PJIT],
            "def f():\n\n    return jax.jit(g)\n",
            id="a function-level import the edits made unused"),
        pytest.param(
            "try:\n    from jax.experimental.pjit import pjit\nexcept ImportError:\n    pass\nf = pjit(g)\n",
            "try:\n    from jax.experimental.pjit import pjit\nexcept ImportError:\n    pass\nf = jax.jit(g)\n",
            [PJIT],
            "try:\n    pass\nexcept ImportError:\n    pass\nf = jax.jit(g)\n",
            id="the last statement of a try body becomes pass (issue 19)"),
        pytest.param(
            "if True: from jax.experimental.pjit import pjit\nf = pjit(g)\n",
            "if True: from jax.experimental.pjit import pjit\nf = jax.jit(g)\n",
            [PJIT],
            "if True: pass\nf = jax.jit(g)\n",
            id="the only statement of a one-line block becomes pass"),
        pytest.param(
            "import os; from jax.experimental.pjit import pjit\nf = pjit(g)\n",
            "import os; from jax.experimental.pjit import pjit\nf = jax.jit(g)\n",
            [PJIT],
            "import os\nf = jax.jit(g)\n",
            id="after a `;`: goes with its separator (issue 19)"),
        pytest.param(
            "from jax.experimental.pjit import pjit; import os\nf = pjit(g)\n",
            "from jax.experimental.pjit import pjit; import os\nf = jax.jit(g)\n",
            [PJIT],
            "import os\nf = jax.jit(g)\n",
            id="before a `;`: goes with its separator"),
        pytest.param(
            "import os; from jax.experimental.pjit import pjit;\nf = pjit(g)\n",
            "import os; from jax.experimental.pjit import pjit;\nf = jax.jit(g)\n",
            [PJIT],
            "import os\nf = jax.jit(g)\n",
            id="a trailing `;` goes too"),
    ],
)
def test_removed_imports(original, edited, remove, expected):
    assert write_imports(original, edited, set(), set(remove), {}) == expected


HELPER = "def _helper(x):\n    return x\n"


def test_helper_goes_after_the_imports_with_two_blank_lines_each_side():
    text = '"""Doc."""\n\nimport jax\n\nx = 1\n'
    assert write_imports(text, text, set(), set(), {"_helper": HELPER}) == (
        '"""Doc."""\n\nimport jax\n\n\ndef _helper(x):\n    return x\n\n\nx = 1\n'
    )


def test_helper_goes_after_the_last_import_above_the_first_def_and_above_its_first_use():
    text = 'import os\n\nos.environ["A"] = "1"\n\nimport jax\n\n\ndef f():\n    return 1\n'
    assert write_imports(text, text, set(), set(), {"_helper": HELPER}) == (
        'import os\n\nos.environ["A"] = "1"\n\nimport jax\n\n\ndef _helper(x):\n    return x\n\n\ndef f():\n'
        '    return 1\n')
    text = "import os\n\ny = _helper(1)\n\nimport jax\n"
    assert write_imports(text, text, set(), set(), {"_helper": HELPER}).startswith(
        "import os\n\n\ndef _helper(x):\n    return x\n\n\ny = _helper(1)\n")


def test_helper_follows_the_files_indentation_and_is_written_once():
    text = "import jax\n\n\ndef f():\n  return 1\n"
    once = write_imports(text, text, set(), set(), {"_helper": HELPER})
    assert "def _helper(x):\n  return x\n" in once
    assert write_imports(once, once, set(), set(), {"_helper": HELPER}) == once


def test_helper_in_a_notebook_goes_into_the_imports_cell():
    text = ("pass  # jaxmigrate-magic-0\n# jaxmigrate-notebook-cell-boundary\nimport jax\n"
            "# jaxmigrate-notebook-cell-boundary\nx = 1\n")
    new = write_imports(text, text, set(), set(), {"_helper": HELPER})
    cells = new.split("# jaxmigrate-notebook-cell-boundary\n")
    assert cells[0] == "pass  # jaxmigrate-magic-0\n"
    assert "def _helper" in cells[1]
