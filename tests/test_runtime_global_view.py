"""The global view keeps the meaning of pmap programs: old against GENERATED new, 8 forced CPU devices.

Each ``fixtures/runtime/global_<case>/old.py`` is a pmap program whose ``main()`` returns its
results (``global_mlp`` is the shipped ``examples/legacy/mlp_data_parallel.py`` itself). The new
program is produced here the way a user gets it, by the checker's fix loop with every rule and
unsafe fixes allowed (what ``jaxmigrate --fix --unsafe-fixes`` runs), never written by hand. Both run through the harness; the old side's leading device axis is dropped where its
slices agree (``unreplicate="old"``). Outputs must agree, and the new program's collectives must be
the same all-reduce traffic with nothing else added (no all-gather, no collective-permute).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from jaxmigrate.lint.checker import fix_text
from jaxmigrate.lint.registry import all_rules
from jaxmigrate.runtime_checks import verify
from jaxmigrate.runtime_checks.report import render_text
from test_global_view import ATTENTION_BY_MATMUL, step_taking_its_defs_name_in_each_mode

pytestmark = pytest.mark.runtime

REPO = Path(__file__).resolve().parents[1]
RUNTIME = REPO / "fixtures" / "runtime"
OLD = {p.name: p / "old.py" for p in RUNTIME.glob("global_*") if (p / "old.py").is_file()}
OLD["global_mlp"] = REPO / "examples" / "legacy" / "mlp_data_parallel.py"
# The migrate fixtures (`fixtures/migrate/to_global_jit/<name>.in.py`) run as programs too.
TO_GLOBAL_JIT_PROGRAMS = (
    "mesh_already_built", "keyword_arguments", "step_from_factory", "jit_of_pmap", "step_on_an_object",
    "fold_in_axis_index", "functions_given_step_values", "run_by_absl_app", "pmap_of_an_init_function",
    "flax_dropout_model", "hugging_face_train_state", "batches_from_generators", "state_with_function_fields",
    "model_outputs_read_on_the_host", "closure_reads_replicated_state", "padded_evaluation",
    "named_scope_in_step", "static_arguments", "local_axis_name", "step_passed_to_function", "steps_in_a_dict",
    "prefetched_batches", "weight_decay_epochs", "mean_written_out", "keys_in_a_dict",
    "state_made_by_a_function", "steps_of_one_name", "mesh_handed_down", "pad_wrapper_kept",
    "metrics_averaged_on_the_host", "replicated_together", "replicated_onto_a_mesh",
    "replicated_by_a_helper_given_devices", "replicated_by_a_leaf_function", "replicated_metrics_logged",
    "batch_stats_synced_before_eval", "step_made_by_a_function", "token_rows_merged_in_the_loss",
    "step_bound_again_before_use", "per_example_model_vmapped", "embedding_rows_summed",
    "comments_in_the_pmap_call", "batches_split_by_einops", "batch_split_with_its_sizes_written",
    "optimizer_bound_by_partial", "attention_written_in_jax_numpy", "pmap_or_jit_by_flag",
    "matmul_attention_given_its_arrays", "batches_split_under_a_flag", "conv_net_written_with_lax",
    "batches_from_a_data_object", "batches_stacked_one_per_device", "batches_put_sharded_by_split",
    "batches_put_sharded_by_split_in_generators", "unmapped_outputs",
)
OLD.update({f"global_{name}": REPO / "fixtures" / "migrate" / "to_global_jit" / f"{name}.in.py"
            for name in TO_GLOBAL_JIT_PROGRAMS})
# Cases whose old side needs an API JAX 0.10 removed (device_put_replicated) run it on 0.4.30, with
# the real flax 0.8.5 for the flax-style loop (its replicate calls device_put_replicated).
LEGACY = {"global_mlp", "global_mesh_already_built", "global_pmap_of_an_init_function",
          "global_named_scope_in_step", "global_static_arguments", "global_local_axis_name",
          "global_mean_written_out", "global_pmap_or_jit_by_flag", "global_conv_net_written_with_lax",
          "global_batches_put_sharded_by_split", "global_batches_put_sharded_by_split_in_generators"}
# (a real flax linen model runs on the new side too: the test extra installs today's flax)
FLAX = {"global_flax_train_state", "global_flax_dropout_model", "global_hugging_face_train_state",
        "global_state_with_function_fields", "global_model_outputs_read_on_the_host",
        "global_closure_reads_replicated_state", "global_padded_evaluation", "global_prefetched_batches",
        "global_weight_decay_epochs", "global_keys_in_a_dict", "global_state_made_by_a_function",
        "global_steps_of_one_name", "global_pad_wrapper_kept", "global_metrics_averaged_on_the_host",
        "global_replicated_together", "global_replicated_metrics_logged",
        "global_batch_stats_synced_before_eval", "global_step_made_by_a_function",
        "global_token_rows_merged_in_the_loss", "global_step_bound_again_before_use",
        "global_per_example_model_vmapped", "global_optimizer_bound_by_partial"}
CASES = sorted(OLD)
# Where each case's main() returns the parameters its gradient all-reduce must carry (None: no
# gradient, an eval step).
PARAMS = {"global_mlp": "['params']", "global_psum_means": "", "global_psum_array_means": "['params']", "global_optstate_metrics": "['params']",
          "global_eval_predictions": None, "global_flax_train_state": "['params']",
          "global_dropout_keys": "['params']", "global_replicate_helpers": "['params']",
          "global_option_forms": "['params']", "global_step_in_function": "['params']",
          "global_every_device": "['params']", "global_rebound_step": "['params']",
          "global_driving_functions": "['params']", "global_called_at_once": "['params']",
          "global_mesh_already_built": "['params']", "global_keyword_arguments": "['params']",
          "global_step_from_factory": "['params']", "global_functions_given_step_values": "['params']",
          "global_fold_in_axis_index": "['params']", "global_step_on_an_object": "['params']",
          "global_jit_of_pmap": "['params']", "global_run_by_absl_app": "['params']",
          "global_pmap_of_an_init_function": "['params']", "global_flax_dropout_model": "['params']",
          "global_hugging_face_train_state": "['params']", "global_batches_from_generators": "['params']",
          "global_state_with_function_fields": "['params']", "global_model_outputs_read_on_the_host": "['params']",
          "global_closure_reads_replicated_state": "['params']", "global_named_scope_in_step": "['params']",
          "global_padded_evaluation": "['params']", "global_static_arguments": "['params']",
          "global_local_axis_name": "['params']", "global_step_passed_to_function": "['params']",
          "global_steps_in_a_dict": "['params']", "global_prefetched_batches": "['params']",
          "global_weight_decay_epochs": "['params']", "global_mean_written_out": "['params']",
          "global_keys_in_a_dict": "['params']", "global_state_made_by_a_function": "['params']",
          "global_steps_of_one_name": "['params']", "global_mesh_handed_down": "['params']",
          "global_pad_wrapper_kept": "['params']", "global_metrics_averaged_on_the_host": "['params']",
          "global_replicated_together": "['params']", "global_replicated_metrics_logged": "['params']",
          "global_replicated_onto_a_mesh": "['params']",
          "global_replicated_by_a_helper_given_devices": "['params']",
          "global_replicated_by_a_leaf_function": "['params']",
          "global_batch_stats_synced_before_eval": "['params']",
          "global_step_made_by_a_function": "['params']",
          "global_token_rows_merged_in_the_loss": "['params']",
          "global_step_bound_again_before_use": "['params']",
          "global_per_example_model_vmapped": "['params']",
          "global_embedding_rows_summed": "['grads']", "global_comments_in_the_pmap_call": "['params']",
          "global_batches_split_by_einops": "['params']", "global_batch_split_with_its_sizes_written": "['params']",
          "global_optimizer_bound_by_partial": "['params']", "global_attention_written_in_jax_numpy": "['params']",
          "global_pmap_or_jit_by_flag": "['params']", "global_matmul_attention_given_its_arrays": "['params']",
          "global_batches_split_under_a_flag": "['params']", "global_conv_net_written_with_lax": "['params']",
          "global_batches_from_a_data_object": "['params']",
          "global_batches_stacked_one_per_device": "['params']",
          "global_batches_put_sharded_by_split": "['params']",
          "global_batches_put_sharded_by_split_in_generators": "['params']",
          "global_unmapped_outputs": "['params']"}


# Per-shard means a step returned one per device for the host to average, which the global view's
# step reduces over the batch itself: the bytes its all-reduces add (XLA folds them into the
# gradient's: no more ops).
REDUCED_IN_THE_STEP = {"global_metrics_averaged_on_the_host": 2 * 2 * 4,  # loss and accuracy (f32), 2 steps
                       "global_replicated_together": 4,  # the loss (f32)
                       # the loss is a sum of two means: GSPMD reduces each (f32), pmap's pmean the sum
                       "global_per_example_model_vmapped": 4}


def migrate(old: Path) -> str:
    """What `jaxmigrate --fix --unsafe-fixes` writes for ``old``."""
    result = fix_text(old.read_text(), old.name, all_rules(), (0, 10), unsafe=True)
    assert not result.errors, result.errors
    tree = ast.parse(result.text)
    mentions = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "pmap" not in mentions and "_shard_map_like_pmap" not in result.text, "not the global view"
    assert "pmean" not in mentions, "a pmean survived"
    return result.text


def migrated_variant(tmp_path: Path, case: str, *change: str) -> tuple[Path, Path]:
    """``case``'s program with ``change`` (an old text, its new text) made, if any (old.py), and what
    `jaxmigrate --fix --unsafe-fixes` writes for it (new.py)."""
    old = tmp_path / "old.py"
    text = OLD[case].read_text()
    assert not change or change[0] in text
    old.write_text(text.replace(*change) if change else text)
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    return old, new


def test_cases_exist():
    assert {"global_mlp", "global_flax_train_state"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_global_view_matches_pmap(case, tmp_path, request):
    old = OLD[case]
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    old_python = (request.getfixturevalue("legacy_python") if case in LEGACY else
                  request.getfixturevalue("flax_python") if case in FLAX else None)
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=old_python, timeout=240)
    assert report.equal, render_text(report)
    entry = report.entry("main")
    assert entry.comparison is not None and len(entry.comparison.leaves) >= 2
    old_kinds, new_kinds = entry.old.collectives.totals, entry.new.collectives.totals
    # Only all-reduces, as under pmap: nothing GSPMD could have added (no all-gather, no
    # collective-permute). The gradient's all-reduce is there: at least the parameters' bytes go
    # through all-reduces. And no more traffic than pmap's: the totals run over every module each
    # side compiled, and JAX 0.10's pmap compiles its step again when later calls pass its own
    # outputs (laid out differently from the first arguments), while jit compiles it once; XLA
    # also combines per-leaf all-reduces into fewer ops, so bytes, not op counts, are compared.
    assert set(new_kinds) == set(old_kinds) == {"all-reduce"}, render_text(report)
    new_bytes, old_bytes = new_kinds["all-reduce"].bytes, old_kinds["all-reduce"].bytes
    prefix = PARAMS[case]
    gradient = 0 if prefix is None else sum(
        math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize
        for leaf in entry.new.outputs if leaf.path.startswith(prefix) and leaf.shape is not None)
    assert prefix is None or gradient > 0
    assert 0 < max(gradient, 1) <= new_bytes <= old_bytes + REDUCED_IN_THE_STEP.get(case, 0), render_text(report)
    assert new_kinds["all-reduce"].count <= old_kinds["all-reduce"].count, render_text(report)
    # No step compiles more often than its pmap did (a key or state laid out otherwise than the
    # step's own outputs would make jit compile it again on the next call).
    steps = _step_names(old.read_text())
    assert steps
    new_step_modules = _compiled(entry.new.collectives.modules, {f"jit_{name}" for name in steps})
    # (pmap's programs: `pmap_<f>` on 0.4.30, `pmap__unnamed_wrapped_function_` for a partial
    # there, `jit__fun` on 0.10; `jit(pmap(f))`'s is the jit's, `jit_<f>`)
    old_names = {f"{prefix}_{name}" for name in steps for prefix in ("pmap", "jit")}
    old_step_modules = _compiled(entry.old.collectives.modules,
                                 old_names | {"jit__fun", "pmap__unnamed_wrapped_function_"})
    assert 0 < new_step_modules <= old_step_modules, (entry.old.collectives.modules, entry.new.collectives.modules)


def _step_names(source: str) -> set[str]:
    """The names of the functions the module pmaps (their jitted programs are named after them)."""
    from jaxmigrate.core.module import as_module
    from jaxmigrate.migrate._pmap_sites import planner_of

    def name(fun):
        if isinstance(fun, ast.FunctionDef):
            return fun.name
        if isinstance(fun, ast.Call) and fun.args:  # functools.partial(train_step, ...)
            return name(fun.args[0])
        return fun.id if isinstance(fun, ast.Name) else fun.attr if isinstance(fun, ast.Attribute) else None

    def mapped(app):
        if app.mapped is not None:
            return app.mapped
        return app.node.args[0] if isinstance(app.node, ast.Call) and app.node.args else None

    return {name(mapped(app)) for app in planner_of(as_module(source)).applications()} - {None}


def _compiled(modules: list[str], names: set[str]) -> int:
    """How many of a side's compiled modules (`module_0012.jit_train_step.cpu_after_optimizations.txt`)
    are programs of these names."""
    return sum(1 for module in modules if module.split(".")[1] in names)


RUN_ONE_PROCESS = """
import importlib.util, os, sys
port, pid, program, out = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(program))  # as `python program.py` would: its modules beside it
import jax
import numpy as np
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=int(pid))
spec = importlib.util.spec_from_file_location("program", program)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
flat, _ = jax.tree_util.tree_flatten_with_path(module.main())
np.savez(out, **{jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in flat})
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(program: Path, tmp_path: Path, label: str) -> list[dict]:
    """Run ``program``'s main() as 2 jax.distributed processes of 2 CPU devices each."""
    import os
    import subprocess
    import sys

    script = tmp_path / "run_one_process.py"
    script.write_text(RUN_ONE_PROCESS)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, str(script), str(port), str(i), str(program),
                               str(tmp_path / f"{label}{i}.npz")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for i in range(2)]
    outputs = []
    for proc in procs:
        try:
            log, _ = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode == 0, log[-3000:]
    for i in range(2):
        with np.load(tmp_path / f"{label}{i}.npz") as npz:
            outputs.append({k: npz[k] for k in npz.files})
    return outputs


def assert_two_processes_give_the_pmap_results(old: Path, new: Path, tmp_path: Path) -> None:
    """Run both programs as 2 processes x 2 devices: each process's new results are pmap's."""
    assert_pmap_results_on_every_process(_two_processes(old, tmp_path, "old"), _two_processes(new, tmp_path, "new"))


def assert_pmap_results_on_every_process(old_out: list[dict], new_out: list[dict]) -> None:
    """Each process's new results are pmap's (rtol 1e-5), and the same on every process (replicated)."""
    for process in range(2):
        assert sorted(old_out[process]) == sorted(new_out[process])
        for key, value in old_out[process].items():
            np.testing.assert_allclose(new_out[process][key], value, rtol=1e-5, atol=1e-6, err_msg=key)
            np.testing.assert_array_equal(new_out[process][key], new_out[0][key])  # replicated


def test_two_processes_give_the_pmap_results(tmp_path):
    """Each process loads different examples; pmap averages over all 4 devices of the 2 processes,
    and so must the global view (make_array_from_process_local_data makes one global batch)."""
    old = RUNTIME / "global_optstate_metrics" / "old.py"
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


PROGRAMS_OF_MODULES = {name: REPO / "fixtures" / "migrate" / "to_global_jit" / name
                      for name in ("helpers_in_another_module", "loss_in_another_module")}


def _program_of_modules(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A fixture program of several modules as written (``old/``: ``train.py`` and the modules
    beside it), and as ``jaxmigrate check --fix --unsafe-fixes new/`` rewrites the folder (``new/``)."""
    import shutil
    import subprocess
    import sys

    folder = PROGRAMS_OF_MODULES[name]
    for side in ("old", "new"):
        (tmp_path / side).mkdir()
        for module in folder.glob("*.py"):
            if not module.name.endswith(".out.py"):
                shutil.copy(module, tmp_path / side / module.name.replace("train.in.py", "train.py"))
    subprocess.run([sys.executable, "-m", "jaxmigrate", "check", "--fix", "--unsafe-fixes", "--no-cache",
                    str(tmp_path / "new")], capture_output=True, text=True, check=False)
    new = tmp_path / "new" / "train.py"
    assert new.read_text() == (folder / "train.out.py").read_text()
    names = {getattr(n, "attr", getattr(n, "id", None)) for n in ast.walk(ast.parse(new.read_text()))}
    assert "pmap" not in names and "pmean" not in names and "psum" not in names, "not the global view"
    return tmp_path / "old" / "train.py", new


@pytest.mark.parametrize("name", sorted(PROGRAMS_OF_MODULES))
def test_a_program_of_several_modules_global_view_matches_pmap(name, tmp_path):
    old, new = _program_of_modules(tmp_path, name)
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)
    entry = report.entry("main")
    assert entry.comparison is not None and len(entry.comparison.leaves) >= 3
    old_kinds, new_kinds = entry.old.collectives.totals, entry.new.collectives.totals
    assert set(new_kinds) == set(old_kinds) == {"all-reduce"}, render_text(report)
    assert new_kinds["all-reduce"].bytes <= old_kinds["all-reduce"].bytes, render_text(report)


@pytest.mark.parametrize("name", sorted(PROGRAMS_OF_MODULES))
def test_a_program_of_several_modules_as_two_processes_gives_the_pmap_results(name, tmp_path):
    """Each process runs main() (the helpers' program loads its own examples, seeded by the
    process index); the batch made global with make_array_from_process_local_data, the step
    still averages over the 4 devices of both."""
    old, new = _program_of_modules(tmp_path, name)
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


@pytest.mark.parametrize("case", ["global_step_on_an_object", "global_step_from_factory", "global_keyword_arguments",
                                  "global_hugging_face_train_state", "global_closure_reads_replicated_state",
                                  "global_padded_evaluation", "global_replicated_metrics_logged",
                                  "global_replicated_onto_a_mesh", "global_replicated_by_a_helper_given_devices",
                                  "global_replicated_by_a_leaf_function", "global_batch_stats_synced_before_eval",
                                  "global_step_made_by_a_function", "global_token_rows_merged_in_the_loss",
                                  "global_per_example_model_vmapped", "global_batches_split_by_einops",
                                  "global_batch_split_with_its_sizes_written"])
def test_two_processes_give_the_pmap_results_for_more_step_forms(case, tmp_path):
    """The step forms as 2 jax.distributed processes of 2 devices: the batch each process reshaped
    for pmap becomes a global array with make_array_from_process_local_data, and every process gets
    pmap's results (replicated values, the same on both)."""
    old = OLD[case]
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_two_processes_give_the_pmap_results_for_a_pmapped_function_of_unknown_body(tmp_path):
    """`jax.pmap(opt_init)(params)` as 2 processes: `jax.jit(opt_init, out_shardings=...)` lays its
    output out over the global mesh, replicated, as pmap's copies were (replicas made here by a
    tree map of `broadcast_to`, which each process runs on its own devices)."""
    old = tmp_path / "old.py"
    old.write_text(OLD["global_pmap_of_an_init_function"].read_text().replace(
        "jax.device_put_replicated(params, list(jax.devices()))",
        "jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), params)"))
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    assert "out_shardings=NamedSharding(mesh, P())" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_two_processes_give_the_pmap_results_for_batches_from_generators(tmp_path):
    """The generators' batches, split over each process's own devices (`jax.local_device_count()`:
    JAX's example counts every device, which only one process may), laid out by the code that takes
    them with make_array_from_process_local_data: every process gets pmap's results."""
    old, new = migrated_variant(tmp_path, "global_batches_from_generators", "num_devices = jax.device_count()",
                                "num_devices = jax.local_device_count()")
    assert "make_array_from_process_local_data(NamedSharding(mesh, P(\"batch\")), next(batches))" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_two_processes_give_the_pmap_results_for_static_arguments(tmp_path):
    """The static arguments' steps as 2 processes (today's flax replicates on JAX 0.10, which has no
    device_put_replicated; the replicated parameters returned, not the per-example predictions):
    each process passes the same Python values to `static_argnums=`, as to pmap."""
    text = OLD["global_static_arguments"].read_text()
    tail = text[text.index("    params = jax.device_put_replicated"):]
    old = tmp_path / "old.py"
    old.write_text(text.replace("import numpy as np\n", "import numpy as np\nfrom flax import jax_utils\n").replace(
        tail, tail.replace("jax.device_put_replicated(params, jax.local_devices())", "jax_utils.replicate(params)")
        .split("    return")[0] + '    return {"params": jax_utils.unreplicate(params)}\n'))
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    assert "static_argnums=(2, 3)" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_two_processes_give_the_pmap_results_for_unmapped_outputs(tmp_path):
    """Each process draws its own examples, the parameters the same on every process: pmap's
    `out_axes=None` hands each process device 0's parameters, loss and accuracy, averaged over all
    4 devices; the global view hands each the one replicated value (the per-example predictions, each
    process's own rows, are not returned here)."""
    text = OLD["global_unmapped_outputs"].read_text()
    changes = [("    rng = np.random.default_rng(0)\n", "    rng = np.random.default_rng(1 + jax.process_index())\n"),
               ("params = rng.normal(size=(6, 4))", "params = np.random.default_rng(0).normal(size=(6, 4))"),
               ('"predictions": predictions.reshape(-1),\n            ', "")]
    for before, after in changes:
        assert before in text
        text = text.replace(before, after)
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text(text)
    new.write_text(migrate(old))
    assert "= jax.pmap(" not in new.read_text() and "p_train_step = jax.jit(train_step)" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_elementwise_functions_in_the_loss_match_pmap(tmp_path):
    """A loss of elementwise functions the step analysis reads as per example (`jnp.real`,
    `jnp.arctan2`, `jax.nn.mish`): the global view's step computes pmap's."""
    old, new = migrated_variant(tmp_path, "global_every_device", "    return jnp.mean((x @ w - y) ** 2)\n",
                                "    return jnp.mean(jnp.real(jnp.arctan2(x @ w, y + 2.0)) ** 2 + jax.nn.mish(x @ w - y))\n")
    assert "jax.jit" in new.read_text() and "= jax.pmap(" not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_per_example_outputs_reshaped_into_rows_match_pmap(tmp_path):
    """`probs.reshape(-1, probs.shape[-1])` reads the same rows whether `probs` has pmap's two
    leading axes or the global view's one: the fix leaves it as it is, and the results agree."""
    old, new = migrated_variant(tmp_path, "global_eval_predictions", "probs = probs.reshape((-1,) + probs.shape[2:])",
                                "probs = probs.reshape(-1, probs.shape[-1])")
    assert "probs = probs.reshape(-1, probs.shape[-1])" in new.read_text()
    report = verify(old, new, ["main"], devices=8, timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize(("case", "rows", "change"), [
    ("global_eval_predictions", "['probs']",
     ("rng = np.random.default_rng(2)", "rng = np.random.default_rng(2 + jax.process_index())")),
    ("global_state_with_function_fields", "['predicted']", ()),  # (seeded by the process already)
    ("global_model_outputs_read_on_the_host", "['end_logits']", ()),
])
def test_per_example_outputs_read_on_each_host_are_that_process_rows_as_under_pmap(case, rows, change, tmp_path):
    """Each process evaluates its own examples; pmap hands each its own rows of the predictions,
    the global view each process its own rows of the global array (multihost_utils)."""
    old, new = migrated_variant(tmp_path, case, *change)
    assert "multihost_utils.global_array_to_host_local_array(" in new.read_text()
    old_out = _two_processes(old, tmp_path, "old")
    new_out = _two_processes(new, tmp_path, "new")
    for process in range(2):
        assert sorted(old_out[process]) == sorted(new_out[process])
        for key, value in old_out[process].items():
            np.testing.assert_allclose(new_out[process][key], value, rtol=1e-5, atol=1e-6, err_msg=key)
    assert not np.array_equal(old_out[0][rows], old_out[1][rows])  # each process its own rows


def test_a_closure_called_from_another_closure_matches_pmap(tmp_path, flax_python):
    """`train` calls `evaluate_once`, which calls `run_eval`, which reads `train`'s replicated state
    (long-range-arena's evaluation, one call further): each is read with `train`'s values at the
    call, and the results are pmap's."""
    text = OLD["global_closure_reads_replicated_state"].read_text()
    changed = text.replace("    rng = np.random.default_rng(0)\n    history = []\n",
                           "    def evaluate_once():\n        return run_eval(batches(rng, 2, batch_size))\n\n"
                           "    rng = np.random.default_rng(0)\n    history = []\n").replace(
        "history.append(run_eval(batches(rng, 2, batch_size)))", "history.append(evaluate_once())")
    assert changed.count("evaluate_once") == 2
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text(changed)
    new.write_text(migrate(old))
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=flax_python, timeout=240)
    assert report.equal, render_text(report)


def test_a_loss_branching_on_the_rank_of_its_outputs_matches_pmap(tmp_path, flax_python):
    """`if len(outputs.shape) > 2 or outputs.ndim > 2:` (a galaxy-halo GNN's loss): the rank is the
    same on each device's slice and globally, a test the same in both views."""
    old, new = migrated_variant(
        tmp_path, "global_optimizer_bound_by_partial",
        '    return jnp.mean((inputs @ params["w"] + params["b"] - targets) ** 2)\n',
        '    outputs = inputs @ params["w"] + params["b"]\n    if len(outputs.shape) > 2 or outputs.ndim > 2:\n'
        '        outputs = jnp.squeeze(outputs, axis=-1)\n    return jnp.mean((outputs - targets) ** 2)\n')
    assert "outputs.ndim > 2" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=flax_python, timeout=240)
    assert report.equal, render_text(report)


def test_a_step_with_keyword_only_parameters_matches_pmap(tmp_path):
    """`def train_step(*, params, batch, learning_rate)` (SwinV2's `eval_step(*, state, batch)`),
    called by keyword: pmap maps what is passed by keyword over its first axis, jit takes it whole."""
    old, new = migrated_variant(tmp_path, "global_keyword_arguments", "def train_step(params, batch, learning_rate):",
                                "def train_step(*, params, batch, learning_rate):")
    assert "jax.jit(functools.partial(train_step, learning_rate=0.1))" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_the_last_devices_copy_of_a_replicated_loss_matches_pmap(tmp_path):
    """`loss[-1]` of the `pmean`ed loss: the last device's copy under pmap, the one loss under jit."""
    old, new = migrated_variant(tmp_path, "global_keyword_arguments", "losses.append(loss[0])",
                                "losses.append(loss[-1])")
    assert "losses.append(loss)" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)

def test_a_step_makers_call_given_straight_to_pmap_matches_pmap(tmp_path, flax_python):
    """`jax.pmap(make_train_step(optimizer), axis_name=...)`, the maker's call given to pmap with no
    name of its own: the def it makes is the step, as through `train_step = make_train_step(...)`."""
    old, new = migrated_variant(
        tmp_path, "global_step_made_by_a_function",
        '    train_step = make_train_step(optimizer)\n    p_train_step = jax.pmap(train_step, axis_name="devices")',
        '    p_train_step = jax.pmap(make_train_step(optimizer), axis_name="devices")')
    assert "p_train_step = jax.jit(make_train_step(optimizer))" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=flax_python, timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize("pmeans", [
    '    loss, grads = (jax.lax.pmean(x, "batch") for x in (loss, grads))\n',
    '    avg_loss, avg_grads = [jax.lax.pmean(x, "batch") for x in (loss, grads)]\n    loss, grads = avg_loss, avg_grads\n',
])
def test_pmeans_in_a_comprehension_over_values_written_out_match_pmap(pmeans, tmp_path, flax_python):
    """`loss, grads = (pmean(x, "batch") for x in (loss, grads))`, as an NNX script writes it: the
    comprehension goes with its pmeans (the statement whole where it assigned the same names)."""
    text = OLD["global_optimizer_bound_by_partial"].read_text()
    changed = text.replace('    grads = jax.lax.pmean(grads, axis_name="batch")\n', pmeans).replace(
        'opt_state, jax.lax.pmean(loss, axis_name="batch")', "opt_state, loss")
    assert changed.count("pmean") == 1
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text(changed)
    new.write_text(migrate(old))
    assert " for x in " not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=flax_python, timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize("copies", [
    "np.repeat(x[None], n, axis=0)",
    "jnp.repeat(jnp.expand_dims(x, 0), n, 0)",
    "np.tile(x[None], (n,) + (1,) * x.ndim)",
    "np.tile(x, [n] + [1] * len(x.shape))",
    "np.asarray([x for _ in range(n)])",
])
def test_a_replicate_helper_written_with_repeat_tile_or_a_comprehension_matches_pmap(copies, tmp_path):
    """The program's own `replicate` helper copying each leaf onto a leading axis of the device count
    another way than `broadcast_to`: the same parameters and totals as pmap (a form that tiled the
    leaf's own axes instead would fail or differ on the old side)."""
    old, new = migrated_variant(tmp_path, "global_replicate_helpers", "np.broadcast_to(x, (n,) + x.shape)", copies)
    assert "def replicate" not in new.read_text() and "NamedSharding(mesh, P())" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_a_replicate_helper_of_device_put_sharded_copies_matches_pmap(tmp_path, legacy_python):
    """jaxline's `bcast_local_devices`: a tree map of `device_put_sharded(len(devices) * [v],
    devices)` over every local device is a replication (the original on JAX 0.4.30, which still
    has `device_put_sharded`)."""
    old, new = migrated_variant(
        tmp_path, "global_replicate_helpers",
        "    n = jax.local_device_count()\n    return jax.tree_util.tree_map(lambda x: np.broadcast_to(x, (n,) + x.shape), tree)\n",
        "    devices = jax.local_devices()\n"
        "    return jax.tree_util.tree_map(lambda v: jax.device_put_sharded(len(devices) * [v], devices), tree)\n")
    assert "device_put_sharded" not in new.read_text() and "NamedSharding(mesh, P())" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=legacy_python, timeout=240)
    assert report.old.jax_version == "0.4.30", render_text(report)
    assert report.equal, render_text(report)


# (`global_mesh_handed_down` hands its mesh down as `global_step_passed_to_function` does, and
# `global_pad_wrapper_kept` migrates to `global_padded_evaluation`'s very code, which runs as 2
# processes below: neither runs again here)
@pytest.mark.parametrize("case", ["global_step_passed_to_function", "global_steps_in_a_dict",
                                  "global_prefetched_batches", "global_weight_decay_epochs"])
def test_steps_followed_through_the_driving_code_give_the_pmap_results_as_two_processes(case, tmp_path):
    """Followed into the functions they are passed to, or by key, or fed a mapped and prefetched
    iterator, with the one mesh handed down to the functions that lay out values, the steps lay
    out each process's batches with make_array_from_process_local_data where they take them:
    every process gets pmap's results (the old side's flax is today's, whose `replicate` and
    `prefetch_to_device` run on JAX 0.10)."""
    old, new = migrated_variant(tmp_path, case)
    assert "make_array_from_process_local_data" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_a_step_never_used_keeps_pmap_while_the_step_beside_it_moves_and_matches_pmap(tmp_path, flax_python):
    """`p_eval_step` made in `main` and never called stays `jax.pmap` (with its `pmean`); the training
    step moves to the global view on its own mesh, and the results are pmap's."""
    old = REPO / "fixtures" / "migrate" / "to_global_jit" / "unused_eval_step_kept.in.py"
    result = fix_text(old.read_text(), old.name, all_rules(), (0, 10), unsafe=True)
    assert not result.errors, result.errors
    assert result.text.count("jax.pmap(") == 1 and 'p_eval_step = jax.pmap(eval_step, "batch")' in result.text
    assert "p_train_step = jax.jit(train_step" in result.text and "NamedSharding(mesh, P())" in result.text
    new = tmp_path / "new.py"
    new.write_text(result.text)
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=flax_python, timeout=240)
    assert report.equal, render_text(report)


TWO_PASSES = ("    def _device_put_replicated(x):\n        return jax.device_put(jnp.stack([x] * len(devices)), sharding)\n\n"
              "    return jax.tree.map(_device_put_replicated, x)\n",
              "    stacked = jax.tree.map(lambda v: jnp.stack([v] * len(devices)), x)\n"
              "    return jax.tree.map(lambda v: jax.device_put(v, sharding), stacked)\n")


def test_a_replicate_helper_that_stacks_then_lays_out_in_two_passes_matches_pmap(tmp_path):
    """A NNX script's `replicate(pytree, devices)`: one tree map stacks the copies, a second lays
    them out one per device; the same replication as one pass."""
    old, new = migrated_variant(tmp_path, "global_replicated_by_a_helper_given_devices", *TWO_PASSES)
    assert "def device_put_replicated" not in new.read_text() and "params = jax.device_put(params, NamedSharding(" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_batches_split_by_a_count_a_function_is_given_match_pmap(tmp_path):
    """The masked-LM helpers' program with its split in a function of the module, given the device
    count at its one call (`_step_once(params, tokens, targets, num_devices)`): the split is laid
    out as a global batch there, and the results are pmap's."""
    text = OLD["global_replicated_by_a_leaf_function"].read_text()
    changed = text.replace(
        "def main():\n",
        "def _step_once(params, tokens, targets, count):\n"
        "    return train_step(params, shard_batch(tokens, count), shard_batch(targets, count))\n\n\n"
        "def main():\n").replace(
        "        tokens_b = shard_batch(tokens, num_devices)\n        targets_b = shard_batch(targets, num_devices)\n"
        "        params, loss = train_step(params, tokens_b, targets_b)\n",
        "        params, loss = _step_once(params, tokens, targets, num_devices)\n")
    assert changed.count("_step_once(") == 2
    old, new = tmp_path / "old.py", tmp_path / "new.py"
    old.write_text(changed)
    new.write_text(migrate(old))
    assert "make_array_from_process_local_data" in new.read_text() and "def shard_batch" not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize("loss", ["jnp.sum((x @ params) ** 2) / len(x)", "sum(jnp.sum((x @ params) ** 2, axis=1)) / x.shape[0]"])
def test_a_mean_written_out_another_way_matches_pmap(loss, tmp_path, legacy_python):
    """`len(x)` and Python's `sum` over the rows: a per-shard sum over the device's rows, on the
    old side (JAX 0.4.30) and in the global view alike."""
    old, new = migrated_variant(tmp_path, "global_mean_written_out", "jnp.sum((x @ params) ** 2) / x.shape[0]", loss)
    assert loss in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=legacy_python, timeout=240)
    assert report.equal, render_text(report)


def test_the_function_form_of_a_device_count_reshape_matches_pmap(tmp_path, legacy_python):
    """`jnp.reshape(x, (n, -1) + x.shape[1:])` splits the batch as `x.reshape(...)` does."""
    old, new = migrated_variant(tmp_path, "global_mean_written_out",
                                "x.reshape((jax.local_device_count(), -1) + x.shape[1:])",
                                "jnp.reshape(x, (jax.local_device_count(), -1) + x.shape[1:])")
    assert "reshape(x" not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=legacy_python, timeout=240)
    assert report.equal, render_text(report)

def test_the_mode_without_pmap_of_a_program_of_two_modes_runs_as_before(tmp_path):
    """`main(use_pmap=False)` of the program that runs pmap or jit as its flag says: the migrated
    program's mode without pmap is the original's code (beside a mesh it builds and never reads),
    and gives the original's results."""
    old, new = migrated_variant(tmp_path, "global_pmap_or_jit_by_flag", "use_pmap=True", "use_pmap=False")
    assert "        params, loss = train_step(params, x, y)\n            losses.append(float(loss))\n" \
        in new.read_text()
    report = verify(old, new, ["main"], devices=8, timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize("use_pmap", [True, False])
def test_a_step_taking_its_defs_name_in_each_mode_matches_the_original(use_pmap, tmp_path, legacy_python):
    """`predict = jax.pmap(predict, ...)` under the flag, `predict = jax.jit(predict)` in the
    `else`: each mode of the migrated program gives the original's results (the pmap mode's old
    side on JAX 0.4.30, for its `device_put_replicated`)."""
    old = tmp_path / "old.py"
    text = step_taking_its_defs_name_in_each_mode(OLD["global_pmap_or_jit_by_flag"].read_text())
    old.write_text(text if use_pmap else text.replace("use_pmap=True", "use_pmap=False"))
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    assert "        predict = jax.jit(predict)\n    else:\n        predict = jax.jit(predict)\n" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old" if use_pmap else None,
                    old_python=legacy_python if use_pmap else None, timeout=240)
    assert report.equal, render_text(report)


CONVERTED_SPLITS = {
    # the layout where the split was made, then the global array converted
    "global_batch_split_with_its_sizes_written": (
        "params, loss = p_train_step(params, x, images, labels)",
        "params, loss = p_train_step(params, jnp.asarray(x, dtype=jnp.float32), images.astype(np.float32), labels)"),
    # the batch function's split gone, the converted host batch laid out at the call
    "global_token_rows_merged_in_the_loss": (
        "params, opt_state, loss = p_update(params, opt_state, xb, yb)",
        "params, opt_state, loss = p_update(params, opt_state, jnp.asarray(xb, dtype=jnp.int32), yb.astype(np.int32))"),
}


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("case", sorted(CONVERTED_SPLITS))
def test_a_split_batch_converted_before_the_step_matches_pmap(case, processes, tmp_path):
    """`jnp.asarray(x, dtype=...)` / `x.astype(...)` of a batch split per device (a plain-JAX GPT-2
    casts its token batches so after `shard_batch`): the same split of the converted batch, on 8
    devices and as 2 processes of 2."""
    old, new = migrated_variant(tmp_path, case, *CONVERTED_SPLITS[case])
    assert "jnp.asarray(x" in new.read_text() or "jnp.asarray(xb" in new.read_text()
    if processes == 2:
        assert_two_processes_give_the_pmap_results(old, new, tmp_path)
        return
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_attention_written_with_matmul_matches_pmap(tmp_path):
    """`q @ k.transpose(0, 1, 3, 2)` and `weights @ v` of four-axis per-example arrays, as a
    hand-written transformer computes attention: the product broadcasts the batch axis."""
    old, new = migrated_variant(tmp_path, "global_attention_written_in_jax_numpy", *ATTENTION_BY_MATMUL)
    assert "(q @ k.transpose(0, 1, 3, 2))" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_keys_put_one_per_device_by_device_put_sharded_match_pmap(tmp_path, legacy_python):
    """`jax.device_put_sharded(list(keys), devices)` of keys split one per device (a werewolf-game
    classifier's dropout keys): the transfer goes with the split, the one key laid out instead."""
    old, new = migrated_variant(
        tmp_path, "global_dropout_keys", "        step_keys = jax.random.split(step_key, n)\n",
        "        step_keys = jax.random.split(step_key, n)\n"
        "        step_keys = jax.device_put_sharded(list(step_keys), jax.local_devices())\n")
    assert "device_put_sharded" not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=legacy_python, timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize("stack", ["np.stack", "jnp.stack"])
def test_keys_split_per_device_and_stacked_match_pmap(tmp_path, stack):
    """`np.stack(jax.random.split(key, n))` of raw uint32 keys (trax's trainer, brax's PPO): the
    stack goes with the split, the one key laid out instead."""
    old = tmp_path / "old.py"
    text = OLD["global_dropout_keys"].read_text()
    changed = text.replace("    key = jax.random.key(4)\n", "    key = jax.random.PRNGKey(4)\n").replace(
        "        step_keys = jax.random.split(step_key, n)\n", f"        step_keys = {stack}(jax.random.split(step_key, n))\n")
    assert changed.count("PRNGKey(4)") == 1 and changed.count(f"{stack}(jax.random.split") == 1
    old.write_text(changed)
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    assert "random.split(step_key, n)" not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


@pytest.mark.parametrize("case", ["global_batches_put_sharded_by_split",
                                  "global_batches_put_sharded_by_split_in_generators"])
def test_batches_put_sharded_by_split_as_two_processes_give_the_pmap_results(tmp_path, legacy_python, case):
    """`device_put_sharded(jnp.split(bx, n), devices)`, in the driving loop or in generators, as 2
    jax.distributed processes (of 1 device: JAX 0.4.30's CPU collectives, which the original needs,
    take no more), each drawing the same batches: the global batch is both processes' rows, as under
    pmap."""
    old = OLD[case]
    new = tmp_path / "new.py"
    new.write_text(migrate(old))
    report = verify(old, new, ["main"], processes=2, devices=1, unreplicate="old", old_python=legacy_python,
                    timeout=240)
    assert report.equal, render_text(report)

def test_a_step_never_used_of_a_function_that_moves_goes_and_the_rest_matches_pmap(tmp_path):
    """`p_test_step = jax.pmap(functools.partial(train_step, ...))` made and never called beside the
    step that moves (timesfm's fine-tuning script): it goes, and the program gives pmap's results."""
    made = '    p_train_step = jax.pmap(functools.partial(train_step, learning_rate=0.1), axis_name="batch")\n'
    old, new = migrated_variant(tmp_path, "global_keyword_arguments", made,
                                made + '    p_test_step = jax.pmap(functools.partial(train_step, learning_rate=0.0), '
                                'axis_name="batch")\n')
    assert "p_test_step" not in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_a_batch_split_in_a_dict_comprehension_and_put_per_device_matches_pmap(tmp_path, flax_python):
    """`{k: jnp.array(v).reshape((n, -1) + v.shape[1:]) for k, v in batch.items()}`, then
    `{k: jax.device_put_sharded(list(v), devices) for k, v in batch.items()}` (a werewolf-game
    classifier's batches): a tree map written as comprehensions; each value is laid out on the mesh."""
    old, new = migrated_variant(
        tmp_path, "global_keys_in_a_dict", "        state, train_metric, dropout_rngs = p_train_step(state, shard(batch), "
        "dropout_rngs)\n",
        "        batch = {k: jnp.array(v).reshape((jax.local_device_count(), -1) + v.shape[1:]) for k, v in "
        "batch.items()}\n        batch = {k: jax.device_put_sharded(list(v), jax.local_devices()) for k, v in "
        "batch.items()}\n        state, train_metric, dropout_rngs = p_train_step(state, batch, dropout_rngs)\n")
    text = new.read_text()
    assert "make_array_from_process_local_data(NamedSharding(mesh, P(\"batch\")), jnp.array(v))" in text, text
    assert "device_put_sharded" not in text
    report = verify(old, new, ["main"], devices=8, unreplicate="old", old_python=flax_python, timeout=240)
    assert report.equal, render_text(report)


def test_devices_bound_to_a_name_in_the_driving_function_are_every_device(tmp_path):
    """`devices = jax.devices()` in `main`, given as `devices=devices`: the list as it was there,
    every device, as without `devices=` (the names a nanoGPT trainer of a blind batch uses)."""
    old, new = migrated_variant(
        tmp_path, "global_every_device",
        'p_total_loss = jax.pmap(total_loss, axis_name="batch", devices=jax.devices())\n\n\ndef main():\n',
        'def main():\n    devices = jax.devices()\n'
        '    p_total_loss = jax.pmap(total_loss, axis_name="batch", devices=devices)\n')
    assert "p_total_loss = jax.jit(total_loss)" in new.read_text()
    report = verify(old, new, ["main"], devices=8, unreplicate="old", timeout=240)
    assert report.equal, render_text(report)


def test_two_processes_give_the_pmap_results_for_batches_from_a_data_object(tmp_path):
    """The data object's batches, each process's own (seeded by the process), laid out where the
    step takes them: as 2 processes of 2 devices, the global batch is every process's rows, as
    pmap's was."""
    old, new = migrated_variant(tmp_path, "global_batches_from_a_data_object", "rng = np.random.RandomState(0)",
                                "rng = np.random.RandomState(jax.process_index())")
    assert "jax.make_array_from_process_local_data(NamedSharding(mesh, P(\"batch\")), batch)" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)


def test_two_processes_give_the_pmap_results_for_batches_stacked_one_per_device(tmp_path):
    """One draw per local device, each process drawing its own: the concatenated draws of every
    process make the global batch, device by device as pmap's stacks were."""
    old, new = migrated_variant(tmp_path, "global_batches_stacked_one_per_device", "Loader(seed=0, batch_size=4)",
                                "Loader(seed=jax.process_index(), batch_size=4)")
    assert "return jnp.concatenate(xs), jnp.concatenate(ys)" in new.read_text()
    assert_two_processes_give_the_pmap_results(old, new, tmp_path)
