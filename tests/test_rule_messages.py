"""Messages are true where they fire: the advice fits the code the finding points at."""

from __future__ import annotations

import textwrap

from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import lint_text

TARGET = (0, 10)


def lint(code: str, select: str | None = None):
    rules = tuple(r for r in registry.all_rules() if select is None or r.code == select)
    return lint_text(textwrap.dedent(code).lstrip("\n"), "t.py", rules, TARGET)


def test_shard_prng_key_gets_rng_advice_not_batch_advice():
    findings = lint("""
        from flax.training import common_utils
        rngs = common_utils.shard_prng_key(rng)
        """)
    assert [f.code for f in findings] == ["JM503"]  # per-device RNG keys, not a batch reshape
    (finding,) = findings
    assert "PRNG key" in finding.message and "local device" in finding.message
    assert "batch" not in finding.message


def test_shard_of_a_batch_keeps_batch_advice():
    (finding,) = lint("from flax.training.common_utils import shard\nbatch = shard(batch)\n")
    assert finding.code == "JM504" and "batch" in finding.message


PMAP_THEN_UNREPLICATE = """
    import jax
    from flax import jax_utils

    step = jax.pmap(train_step, axis_name="batch")

    def main(state, batches):
        state = jax_utils.replicate(state)
        for batch in batches:
            state = step(state, batch)
        return jax_utils.unreplicate(state)
    """


def test_device_zero_indexing_is_not_told_to_go_while_the_device_axis_stays():
    # What JM102's fix writes for `unreplicate`: right as long as the producer keeps pmap's device
    # axis (pmap itself, or JM101's exact rewrite, a jit that keeps it). The finding must not
    # advise dropping it "when the producer becomes jit".
    from jaxmigrate.lint.checker import fix_text

    fixed = fix_text(textwrap.dedent(PMAP_THEN_UNREPLICATE).lstrip("\n"), "t.py",
                     tuple(r for r in registry.all_rules() if r.code in ("JM102", "JM505")), TARGET)
    assert "jax.tree.map(lambda x: x[0], state)" in fixed.text
    (finding,) = [f for f in fixed.findings if f.code == "JM505"]
    assert "when the producer becomes jit" not in finding.message
    assert "global view" in finding.message and "keeps" in finding.message


def test_unbound_axis_in_a_function_may_be_bound_by_a_caller_elsewhere():
    (finding,) = lint("""
        import jax
        from jax import lax

        step = jax.pmap(f, axis_name="devices")

        def shard_id():
            return lax.axis_index("batch")
        """, "JM401")
    assert "unless" in finding.message and "mapping elsewhere" in finding.message


def test_unbound_axis_at_module_level_raises_for_certain():
    (finding,) = lint("""
        import jax
        from jax import lax

        step = jax.pmap(f, axis_name="devices")
        index = lax.axis_index("batch")
        """, "JM401")
    assert "mapping elsewhere" not in finding.message
    assert "raises `NameError: Found an unbound axis name: batch`" in finding.message


def test_a_kept_use_is_named_once_at_every_import_that_stands_for_it():
    findings = lint("""
        import jax
        from jax.sharding import PositionalSharding

        if jax.process_count() > 1:
            from jax.sharding import PositionalSharding
        if jax.process_count() > 2:
            from jax.sharding import PositionalSharding


        def build(devices):
            return PositionalSharding(devices).reshape(4, 2)
        """, "JM301")
    assert len(findings) == 3
    for finding in findings:
        assert finding.message.count("is kept") == 1, finding.message


def test_no_pmap_finding_has_an_empty_clause():
    """Every clause JM101 joins into its message says something (a clause is added only with its
    reasons): over the global view's and the exact rewrite's fixtures, which take each path."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "fixtures" / "migrate"
    rules = tuple(r for r in registry.all_rules() if r.code == "JM101")
    paths = sorted([*root.glob("to_global_jit/*.in.py"), *root.glob("pmap_to_shard_map/*.in.py")])
    messages = [f.message for path in paths for f in lint_text(path.read_text(), path.name, rules, TARGET)]
    assert len(messages) > len(paths)
    assert not [m for m in messages if m.rstrip().endswith(":") or ": ;" in m or "; ;" in m]
