"""Helpers of another module of the program: found as Python's import finds them, summarised by
their bodies, and the cache kept only while those modules are unchanged.

The fixture ``fixtures/migrate/to_global_jit/helpers_in_another_module/`` is a program of three
files: ``train.in.py`` (the pmap program), ``utils.py`` (its ``replicate`` and ``shard``) and
``common.py`` (``unreplicate``, re-exported by ``utils.py``). ``train.out.py`` is what
``jaxmigrate --fix --unsafe-fixes`` writes for ``train.py`` with the other two beside it.
``loss_in_another_module/`` is a step whose loss and metrics live in ``losses.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxmigrate import engine, program_modules
from jaxmigrate.cli import main

PROGRAM = Path(__file__).resolve().parents[1] / "fixtures" / "migrate" / "to_global_jit" / "helpers_in_another_module"
LOSSES = PROGRAM.parent / "loss_in_another_module"


def jaxmigrate(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def copy_program(folder: Path, program: Path = PROGRAM) -> Path:
    """A fixture program as a user has it: ``train.py`` beside the modules it imports."""
    folder.mkdir(parents=True, exist_ok=True)
    for module in program.glob("*.py"):
        if not module.name.endswith((".in.py", ".out.py")):
            shutil.copy(module, folder / module.name)
    shutil.copy(program / "train.in.py", folder / "train.py")
    return folder


def jm101(output: str) -> list[dict]:
    return [f for f in json.loads(output) if f["code"] == "JM101"]


# --- the global view through another module's helpers --------------------------------------------


def test_fix_reads_the_helpers_of_the_modules_the_program_imports(project):
    copy_program(project)
    helpers = {name: (project / name).read_text() for name in ("utils.py", "common.py")}
    result = jaxmigrate("check", "--fix", "--unsafe-fixes", ".")
    assert (project / "train.py").read_text() == (PROGRAM / "train.out.py").read_text(), result.output
    # The helpers stay where they are (other modules may call them), untouched.
    assert {name: (project / name).read_text() for name in helpers} == helpers
    again = jaxmigrate("check", "--fix", "--unsafe-fixes", "--no-cache", ".")
    assert (project / "train.py").read_text() == (PROGRAM / "train.out.py").read_text(), again.output


def test_without_the_helpers_module_the_finding_names_the_call(project):
    copy_program(project)
    (project / "utils.py").unlink()
    [finding] = jm101(jaxmigrate("check", "--output-format", "json", "train.py").stdout)
    assert "global view not possible: line 34: argument 1 of `update` (`params`)" in finding["message"]


def test_a_helper_that_does_not_replicate_is_not_taken_for_one(project):
    copy_program(project)
    utils = project / "utils.py"
    utils.write_text(utils.read_text().replace("jnp.broadcast_to(x, (n,) + x.shape)", "x + n"))
    [finding] = jm101(jaxmigrate("check", "--output-format", "json", "train.py").stdout)
    assert "global view not possible: line 34: argument 1 of `update`" in finding["message"]


# --- the step read into the functions of another module ----------------------------------------


def test_the_step_is_read_into_the_loss_and_metrics_of_another_module(project):
    copy_program(project, LOSSES)
    losses = (project / "losses.py").read_text()
    jaxmigrate("check", "--fix", "--unsafe-fixes", ".")
    assert (project / "train.py").read_text() == (LOSSES / "train.out.py").read_text()
    assert (project / "losses.py").read_text() == losses


def test_a_collective_in_another_module_keeps_the_step_and_says_where(project):
    copy_program(project, LOSSES)
    losses = project / "losses.py"
    losses.write_text(losses.read_text().replace("import jax.numpy as jnp", "import jax\nimport jax.numpy as jnp").replace(
        "    return jnp.mean((predict(params, inputs) - targets) ** 2)",
        '    return jax.lax.pmean(jnp.mean((predict(params, inputs) - targets) ** 2), "batch")'))
    [finding] = jm101(jaxmigrate("check", "--output-format", "json", "train.py").stdout)
    assert "global view not possible: line 17: `pmean` of a value not proven a per-shard mean" in finding["message"]
    assert "`mean_squared_error` (losses.py, line 10) calls a collective (line 12 there)" in finding["message"]


def test_what_blocks_in_another_module_is_named_with_its_file_and_line(project):
    copy_program(project, LOSSES)
    losses = project / "losses.py"
    losses.write_text(losses.read_text().replace("jnp.abs(predict(params, inputs) - targets)",
                                                 "jnp.sort(predict(params, inputs), axis=0)"))
    [finding] = jm101(jaxmigrate("check", "--output-format", "json", "train.py").stdout)
    assert ("line 19: `psum` of a value not proven a per-shard sum or mean; it is `count_close` (losses.py, line 14): "
            "line 16 there: `jax.numpy.sort` of per-device values") in finding["message"]


# --- the cache ----------------------------------------------------------------------------------


def test_the_cache_serves_a_file_while_the_modules_it_read_are_unchanged(project, monkeypatch):
    copy_program(project)
    cold = jaxmigrate("check", "--output-format", "json", "train.py").stdout
    assert "global view not possible" not in cold
    monkeypatch.setattr(engine, "lint_text", pytest.fail)  # only the cache may answer now
    assert jaxmigrate("check", "--output-format", "json", "train.py").stdout == cold


def test_editing_an_imported_module_invalidates_the_file_that_read_it(project):
    copy_program(project)
    assert "global view not possible" not in jaxmigrate("check", "--output-format", "json", "train.py").stdout
    utils = project / "utils.py"
    utils.write_text(utils.read_text().replace("jnp.broadcast_to(x, (n,) + x.shape)", "x + n"))
    assert "global view not possible" in jaxmigrate("check", "--output-format", "json", "train.py").stdout


def test_a_module_created_later_invalidates_a_file_that_looked_for_it(project):
    copy_program(project)
    text = (project / "utils.py").read_text()
    (project / "utils.py").unlink()
    assert "global view not possible" in jaxmigrate("check", "--output-format", "json", "train.py").stdout
    (project / "utils.py").write_text(text)
    assert "global view not possible" not in jaxmigrate("check", "--output-format", "json", "train.py").stdout


# --- where a module is looked for -----------------------------------------------------------------


@pytest.fixture
def package(tmp_path) -> Path:
    """``tmp/pkg/{__init__,utils,train}.py`` and a script ``tmp/run.py`` beside the package."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def top(x):\n    return x\n")
    (pkg / "utils.py").write_text("def replicate(x):\n    return x\n")
    (pkg / "train.py").write_text("")
    (tmp_path / "run.py").write_text("")
    return tmp_path


def found(qualified: str, importer: Path) -> tuple[Path, str] | None:
    with program_modules.reading(importer):
        hit = program_modules.find(qualified)
    return None if hit is None else (hit[0].path, hit[1])


def test_relative_imports_are_found_from_the_importing_package(package):
    train = package / "pkg" / "train.py"
    assert found(".utils.replicate", train) == (package / "pkg" / "utils.py", "replicate")
    assert found(".top", train) == (package / "pkg" / "__init__.py", "top")
    assert found("..pkg.utils.replicate", train) == (package / "pkg" / "utils.py", "replicate")


def test_absolute_imports_are_found_from_the_script_folder_and_the_package_root(package):
    train = package / "pkg" / "train.py"
    assert found("pkg.utils.replicate", train) == (package / "pkg" / "utils.py", "replicate")  # package root
    assert found("utils.replicate", train) == (package / "pkg" / "utils.py", "replicate")  # its own folder
    assert found("pkg.utils.replicate", package / "run.py") == (package / "pkg" / "utils.py", "replicate")


def test_libraries_and_missing_modules_are_not_found(package):
    (package / "jax").mkdir()
    (package / "jax" / "numpy.py").write_text("def stack(x):\n    return x\n")  # never read: jax is a library
    train = package / "pkg" / "train.py"
    assert found("jax.numpy.stack", package / "run.py") is None
    assert found("missing.replicate", train) is None
    assert found("replicate", train) is None  # a name of no module


def test_each_module_looked_for_is_recorded_with_its_digest(package):
    train = package / "pkg" / "train.py"
    with program_modules.reading(train) as reading:
        program_modules.find(".utils.replicate")
        program_modules.find("missing.replicate")
    utils = str(package / "pkg" / "utils.py")
    assert reading.read[utils] == program_modules.digest_of(utils) != program_modules.ABSENT
    assert reading.read[str(package / "pkg" / "missing.py")] == program_modules.ABSENT


def test_nothing_is_looked_up_outside_a_file_being_processed():
    assert program_modules.find("utils.replicate") is None


def test_a_helper_given_the_device_list_is_read_in_the_module_that_defines_it(project):
    """JAX's `device_put_replicated` replaced by a helper of the program's `utils.py`, called with
    every local device: a replication there as in the module itself."""
    source = (PROGRAM.parent / "replicated_by_a_helper_given_devices.in.py").read_text()
    start, end = source.index("def device_put_replicated"), source.index("@partial")
    (project / "utils.py").write_text("import jax\nimport jax.numpy as jnp\nimport numpy as np\n\n\n"
                                      + source[start:end].rstrip() + "\n")
    train = source[:start].replace("import numpy as np\n", "import numpy as np\n\nfrom utils import device_put_replicated\n")
    (project / "train.py").write_text(train + source[end:])
    result = jaxmigrate("check", "--fix", "--unsafe-fixes", "--no-cache", "train.py")
    fixed = (project / "train.py").read_text()
    assert "params = jax.device_put(params, NamedSharding(" in fixed and "jax.pmap" not in fixed, result.output
    assert "device_put_replicated" in (project / "utils.py").read_text()  # (its other callers may need it)
    # With some of the devices it is not one.
    (project / "train.py").write_text((train + source[end:]).replace("(params, devices)", "(params, devices[:2])"))
    assert "global view not possible" in jaxmigrate("check", "--unsafe-fixes", "--no-cache", "train.py").output


# --- names a star import of the program's own module brings in ------------------------------------


def test_a_star_import_of_a_program_module_brings_in_what_that_module_imports(project):
    """``from preprocess import *`` where ``preprocess.py`` says ``import jax``: the script's
    ``jax.pmap`` and ``jax.tree_map`` are JAX's, and found (before, an unbound name: all checks passed)."""
    (project / "preprocess.py").write_text("import jax\nimport jax.numpy as jnp\n")
    (project / "train.py").write_text(
        "from preprocess import *\n\n\n@jax.pmap\ndef step(x):\n    return jnp.sin(x)\n\n\n"
        "y = jax.tree_map(step, [1.0])\n")
    codes = {f["code"] for f in json.loads(jaxmigrate("check", "--output-format", "json", "train.py").stdout)}
    assert codes == {"JM101", "JM601"}
    jaxmigrate("check", "--fix", "train.py")
    assert "y = jax.tree.map(step, [1.0])\n" in (project / "train.py").read_text()


def test_what_a_star_import_cannot_bind_is_not_taken_for_it(project):
    """A name left out of ``__all__``, a private one, a module not found: nothing is made of it."""
    (project / "listed.py").write_text("__all__ = ['helper']\nimport jax\n\n\ndef helper():\n    pass\n")
    (project / "private.py").write_text("import jax as _jax\n")
    for module, name in (("listed", "jax"), ("private", "_jax"), ("missing", "jax")):
        (project / "train.py").write_text(f"from {module} import *\n\ny = {name}.tree_map(f, [1])\n")
        assert json.loads(jaxmigrate("check", "--no-cache", "--output-format", "json", "train.py").stdout) == []


def test_editing_a_star_imported_module_invalidates_the_file_that_read_it(project):
    (project / "preprocess.py").write_text("import jax\n")
    (project / "train.py").write_text("from preprocess import *\n\ny = jax.tree_map(f, [1])\n")
    assert "JM601" in jaxmigrate("check", "--output-format", "json", "train.py").stdout
    (project / "preprocess.py").write_text("import numpy as jax\n")
    assert json.loads(jaxmigrate("check", "--output-format", "json", "train.py").stdout) == []


@pytest.mark.parametrize(("text", "answer"), [
    ("import jax\n", "jax"),
    ("from jax import pmap as jax\n", "jax.pmap"),
    ("def jax():\n    pass\n", "utils.jax"),
    ("__all__ = ['other']\nimport jax\n", program_modules.NOT_EXPORTED),
    ("import numpy as np\n", program_modules.NOT_EXPORTED),
    ("__all__ = make_all()\nimport jax\n", None),  # computed: not known
    ("from more import *\n", "jax"),  # through that module's own star import
])
def test_star_binding_answers_what_the_module_exports(package, text, answer):
    (package / "utils.py").write_text(text)
    (package / "more.py").write_text("import jax\n")
    with program_modules.reading(package / "run.py"):
        assert program_modules.star_binding("utils", "jax") == answer
