"""Shared fixtures: a tiny set of test-only rules, so the engine can be tested on its own; the
facts the sharp-bit programs establish on 8 CPU devices."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint.rule import Rule, Safety


class LegacyAttribute(Rule):
    """Flags ``x.legacy`` and offers a safe fix to ``x.modern``."""

    code = "JM901"
    name = "test-legacy-attribute"
    summary = "test rule: .legacy attribute"
    trigger_words = ("legacy",)
    fixable = Safety.SAFE

    def visit_Attribute(self, node: ast.Attribute, ctx) -> None:
        if node.attr == "legacy":
            fix = ctx.fix(Safety.SAFE, "use .modern", ctx.replace(node, ctx.segment(node.value) + ".modern"))
            ctx.report(node, "legacy attribute", fix)


class RiskyCall(Rule):
    """Flags ``risky()`` with an unsafe fix to ``careful()``."""

    code = "JM902"
    name = "test-risky-call"
    summary = "test rule: risky() call"
    trigger_words = ("risky",)
    fixable = Safety.UNSAFE

    def visit_Call(self, node: ast.Call, ctx) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "risky":
            ctx.report(node, "risky call", ctx.fix(Safety.UNSAFE, "be careful", ctx.replace(node.func, "careful")))


class Crashing(Rule):
    """Raises on every ``boom`` name: the engine must contain it."""

    code = "JM903"
    name = "test-crashing"
    summary = "test rule: crashes"
    trigger_words = ("boom",)

    def visit_Name(self, node: ast.Name, ctx) -> None:
        if node.id == "boom":
            raise ZeroDivisionError("kaboom")


class BreakingFix(Rule):
    """Offers a fix for ``breakme`` that leaves the file unparseable."""

    code = "JM904"
    name = "test-breaking-fix"
    summary = "test rule: a fix that breaks the file"
    trigger_words = ("breakme",)
    fixable = Safety.SAFE

    def visit_Name(self, node: ast.Name, ctx) -> None:
        if node.id == "breakme":
            ctx.report(node, "breakme", ctx.fix(Safety.SAFE, "break it", ctx.replace(node, "(((")))


TEST_RULES = (LegacyAttribute, RiskyCall, Crashing, BreakingFix)


@pytest.fixture
def test_rules(monkeypatch) -> tuple[type[Rule], ...]:
    """Makes the registry hold only the test rules (worker processes inherit it through fork)."""
    monkeypatch.setattr(registry, "all_rules", lambda: TEST_RULES)
    return TEST_RULES


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder that is also the working directory (the cache goes there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


SHARP_BIT_PROGRAMS = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "runtime").glob("sharp_*/program.py"))


@pytest.fixture(scope="session")
def sharp_facts(tmp_path_factory) -> dict[str, dict]:
    """What each ``fixtures/runtime/sharp_*/program.py`` printed (its last line, JSON), by folder:
    all run at once, each in a fresh interpreter with the XLA flags set before jax loads."""
    pytest.importorskip("jax")
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "PYTHONWARNINGS": "ignore",
    }
    cwd = tmp_path_factory.mktemp("sharp")
    running = {
        path.parent.name: subprocess.Popen(
            [sys.executable, str(path)], env=env, cwd=cwd, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for path in SHARP_BIT_PROGRAMS
    }
    results = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, f"{name} failed:\n{err}"
        results[name] = json.loads(out.strip().splitlines()[-1])
    return results


@pytest.fixture(scope="session")
def legacy_python() -> str:
    """An interpreter with jax[cpu]==0.4.30 (a cached venv), to run legacy code as it was;
    skipped, saying why, when none can be made."""
    return _legacy_interpreter()


@pytest.fixture(scope="session")
def flax_python() -> str:
    """The same with the real flax 0.8.5 (its replicate calls device_put_replicated)."""
    return _legacy_interpreter("flax==0.8.5")


def _legacy_interpreter(*packages: str) -> str:
    from jaxmigrate.runtime_checks.legacy_env import make_legacy_env

    env = make_legacy_env("0.4.30", packages=packages)
    if env.python is None:
        pytest.skip(f"no jax 0.4.30 interpreter{' with ' + ', '.join(packages) if packages else ''}: {env.reason}")
    return str(env.python)
