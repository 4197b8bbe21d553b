"""The README's promise, end to end: `jaxmigrate --fix --unsafe-fixes` on the shipped legacy
examples writes programs that run on JAX 0.10.2 and compute what the originals computed on JAX
0.4.30 (8 forced CPU devices, each side in its own worker)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmigrate.lint.checker import lint_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.runtime_checks import verify
from jaxmigrate.runtime_checks.report import render_text

pytestmark = [pytest.mark.runtime, pytest.mark.slow, pytest.mark.xdist_group("fixed_examples")]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "legacy"
RUNNABLE = ["train_data_parallel.py", "model_parallel_pjit.py", "mlp_data_parallel.py"]  # flax's needs flax
# The global view drops pmap's leading device axis: the old side's replicated outputs are compared
# without it.
UNREPLICATE = {"mlp_data_parallel.py": "old"}
# Configuration replaced on both sides before they are compared: the global view draws dropout's
# mask for the whole batch from the one key the per-device keys were split from (the fix says the
# random streams change), so the two programs are compared without dropout.
CONFIGURATION = {"train_data_parallel.py": ("KEEP_PROB = 0.9", "KEEP_PROB = 1.0")}


@pytest.fixture(scope="module")
def fixed_examples(tmp_path_factory):
    folder = tmp_path_factory.mktemp("examples")
    for name in RUNNABLE:
        shutil.copy(EXAMPLES / name, folder / name)
    done = subprocess.run(
        [sys.executable, "-m", "jaxmigrate", "--fix", "--unsafe-fixes", "--no-cache", str(folder)],
        capture_output=True, text=True, timeout=300,
    )
    # Exit 1: findings without a fix remain (the shared device array of the pjit example).
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fixed" in done.stdout + done.stderr
    return folder


@pytest.mark.parametrize("name", RUNNABLE)
def test_fixed_example_computes_what_the_legacy_one_did(name, fixed_examples, legacy_python):
    new = fixed_examples / name
    assert new.read_text() != (EXAMPLES / name).read_text()
    findings = lint_text(new.read_text(), name, all_rules(), (0, 10))
    left = {f.code for f in findings}
    assert not left & {"JM201", "JM301", "JM302", "JM308", "JM601"}, left
    assert "JM101" not in left, [f.message for f in findings]  # every pmap moved to the global view
    old = EXAMPLES / name
    if name in CONFIGURATION:
        setting, compared = CONFIGURATION[name]
        (fixed_examples / "compared").mkdir(exist_ok=True)
        old, new = fixed_examples / "compared" / f"old_{name}", fixed_examples / "compared" / name
        for side, text in ((old, (EXAMPLES / name).read_text()), (new, (fixed_examples / name).read_text())):
            assert text.count(setting) == 1
            side.write_text(text.replace(setting, compared))
    report = verify(old, new, ["main"], devices=8, old_python=legacy_python, timeout=240,
                    unreplicate=UNREPLICATE.get(name))
    assert report.old.jax_version == "0.4.30" and report.new.jax_version.startswith("0.10"), render_text(report)
    assert report.equal, render_text(report)


def test_the_mlp_example_moves_to_the_global_view(fixed_examples):
    text = (fixed_examples / "mlp_data_parallel.py").read_text()
    spelled = {n.attr for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Attribute)}
    assert not spelled & {"pmap", "pmean", "device_put_replicated"}, spelled
    assert "jax.make_array_from_process_local_data(" in text and "NamedSharding(mesh, P())" in text


def test_the_data_parallel_example_moves_to_the_global_view_saying_its_dropout_draws_change():
    text = (EXAMPLES / "train_data_parallel.py").read_text()
    findings = [f for f in lint_text(text, "train_data_parallel.py", all_rules(), (0, 10)) if f.code == "JM101"]
    assert len(findings) == 1 and "to the global view" in findings[0].fix.message
    assert "per-device RNG keys become the one key they were split from" in findings[0].fix.message
