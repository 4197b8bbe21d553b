"""Every registered rule's own VALID / INVALID examples, and the shape of the registry."""

from __future__ import annotations

import re

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint import checker
from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.prefilter import rules_triggered

TARGET = (0, 10)
# An example written for a given JAX says so on a line of its own (`# from-jax: 0.4`), as the
# lint fixtures do; others are checked with it not known.
_FROM_JAX = re.compile(r"^#\s*from-jax:\s*(\d+)\.(\d+)\s*$", re.MULTILINE)
SECTIONS = ("What it does", "Why is this bad", "Example", "Use instead", "Fix safety", "References")


def _from_jax(code: str) -> tuple[int, int] | None:
    match = _FROM_JAX.search(code)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _examples(kind: str):
    for rule in registry.all_rules():
        for index, example in enumerate(getattr(rule, kind), 1):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind.lower()}-{index}")


@pytest.mark.parametrize(("rule", "example"), list(_examples("VALID")))
def test_valid_example_has_no_finding(rule, example, monkeypatch):
    # The rule itself must find nothing: with the pre-filter on, an example without a trigger
    # word never reached the rule (61 of 115 did not), and passed for that alone.
    monkeypatch.setattr(checker, "rules_triggered", lambda text, rules, target: rules)
    findings = lint_text(example.code, "example.py", (rule,), TARGET, _from_jax(example.code))
    assert [f for f in findings if f.code in (rule.code, "JM000", "JM001")] == []


def test_most_valid_examples_reach_their_rule_through_the_prefilter_too():
    # Not a requirement on each example, but a VALID list the pre-filter skips whole tests nothing
    # of the rule's own logic when it runs for real.
    for rule in registry.all_rules():
        if rule.reach == ():  # judged by the checker's suppression step (JM002), never pre-filtered in
            continue
        reached = [example for example in rule.VALID if rules_triggered(example.code, (rule,), TARGET)]
        assert reached, f"{rule.code}: no VALID example reaches the rule through the pre-filter"


@pytest.mark.parametrize(("rule", "example"), list(_examples("INVALID")))
def test_invalid_example_is_flagged(rule, example):
    findings = lint_text(example.code, "example.py", (rule,), TARGET, _from_jax(example.code))
    assert not [f for f in findings if f.code in ("JM000", "JM001")], findings
    assert len([f for f in findings if f.code == rule.code]) == example.count, findings
    fixable = [f for f in findings if f.code == rule.code and f.fix is not None]
    # An example whose finding offers a fix says what the fix writes (issue 19: 13 did not).
    assert (example.expected is not None) == bool(fixable), "a fix offered without an expected output"
    if example.expected is not None:
        fixed = fix_text(example.code, "example.py", (rule,), TARGET, unsafe=True)
        assert fixed.text == example.expected
        again = fix_text(fixed.text, "example.py", (rule,), TARGET, unsafe=True)
        assert again.text == fixed.text and again.fixed == 0


def _rules():
    return [pytest.param(rule, id=rule.code) for rule in registry.all_rules()]


def test_codes_are_unique_and_well_formed():
    codes = [rule.code for rule in registry.all_rules()]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"JM\d{3}", code) for code in codes), codes


@pytest.mark.parametrize("rule", _rules())
def test_rule_metadata(rule):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name), rule.name
    assert rule.trigger_words and all(rule.trigger_words)
    assert rule.summary.strip() and "\n" not in rule.summary
    assert rule.VALID and rule.INVALID


@pytest.mark.parametrize("rule", _rules())
def test_docstring_has_ruff_sections(rule):
    headings = re.findall(r"^## (.+)$", rule.explanation(), re.MULTILINE)
    assert [h for h in headings if h in SECTIONS] == list(SECTIONS), headings


# The names "Use instead" snippets take for granted, so that the resolver sees jax's own APIs in
# them (a snippet without imports would pass for want of anything resolving to jax).
PRELUDE = (
    "import functools\nimport jax\nimport jax.numpy as jnp\nfrom jax import lax\n"
    "from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec, PartitionSpec as P\n"
)


def _use_instead_blocks():
    for rule in registry.all_rules():
        section = re.search(r"^## Use instead\n(.*?)(?=^## |\Z)", rule.explanation(), re.MULTILINE | re.DOTALL)
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", section.group(1), re.DOTALL), 1):
            yield pytest.param(rule, block, id=f"{rule.code}-use-instead-{index}")


@pytest.mark.parametrize(("rule", "block"), list(_use_instead_blocks()))
def test_use_instead_examples_pass_the_tool_clean(rule, block):
    """`jaxmigrate explain CODE` shows modern code under "Use instead": every rule must leave it
    alone, also where the JAX the code was written for is not known (JM506 then reports)."""
    import ast

    ast.parse(block)
    findings = lint_text(PRELUDE + block, "use_instead.py", registry.all_rules(), TARGET)
    assert [(f.code, f.message) for f in findings] == []


def _fix_chain(fix):
    while fix is not None:
        yield fix.safety
        fix = fix.fallback


@pytest.mark.parametrize("rule", _rules())
def test_the_fix_safety_rules_and_explain_show_is_what_the_findings_offer(rule):
    """`rules` and `explain` show ``fix_safeties``; the findings of the rule's examples and fixtures
    (code written for JAX 0.4, and for a JAX not known) must offer those and no other; every one of
    them, where they offer a fix at all (JM101's fixes need a driver the examples do not have)."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / rule.code
    texts = [example.code for example in rule.INVALID] + [path.read_text() for path in sorted(fixtures.glob("*.py"))]
    offered = set()
    for text in texts:
        for written_for in (None, (0, 4)):
            for finding in lint_text(text, "example.py", (rule,), TARGET, written_for):
                if finding.code == rule.code:
                    offered.update(_fix_chain(finding.fix))
    assert offered <= set(rule.fix_safeties())  # never a safety the docs do not name
    if offered:  # and, where the examples show fixes at all, every safety the docs name
        assert offered == set(rule.fix_safeties())
