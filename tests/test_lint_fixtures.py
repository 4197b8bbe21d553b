"""Checker fixtures: `fixtures/lint/<CODE>/<case>.py`, expected findings marked `# error: JM201`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxmigrate.lint import registry
from jaxmigrate.lint.checker import lint_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint"
TARGET = (0, 10)
_MARK = re.compile(r"#\s*error:\s*(?P<codes>JM\d{3}(?:\s*,\s*JM\d{3})*)\s*$")
# A fixture that stands for code written for a given JAX says so on a line of its own, as the
# `from-jax` setting would (`# from-jax: 0.4`); others are checked with it not known.
_FROM_JAX = re.compile(r"^#\s*from-jax:\s*(\d+)\.(\d+)\s*$", re.MULTILINE)


def expected_findings(text: str) -> set[tuple[int, str]]:
    expected = set()
    for number, line in enumerate(text.splitlines(), 1):
        if match := _MARK.search(line):
            expected |= {(number, code.strip()) for code in match.group("codes").split(",")}
    return expected


def _cases():
    return [
        pytest.param(path, id=f"{path.parent.name}/{path.stem}")
        for path in sorted(FIXTURES.glob("JM*/*.py"))
    ]


def test_fixture_directories_name_registered_rules():
    codes = {rule.code for rule in registry.all_rules()}
    directories = {path.name for path in FIXTURES.glob("JM*") if path.is_dir()}
    assert directories and directories <= codes, directories - codes


def test_every_fixture_directory_exercises_its_rule():
    # Near-miss files may expect nothing, but each directory shows its rule firing somewhere.
    for directory in sorted(p for p in FIXTURES.glob("JM*") if p.is_dir()):
        marked = set()
        for path in directory.glob("*.py"):
            marked |= {code for _, code in expected_findings(path.read_text(encoding="utf-8"))}
        assert directory.name in marked, directory.name


def test_marker_parser():
    text = "a = 1\nb = pj.pjit(f, in_axis_resources=s)  # error: JM201, JM202\n# error: JM101 trailing\n"
    assert expected_findings(text) == {(2, "JM201"), (2, "JM202")}


@pytest.mark.parametrize("path", _cases())
def test_fixture(path: Path):
    text = path.read_text(encoding="utf-8")
    expected = expected_findings(text)
    from_jax = _FROM_JAX.search(text)
    from_jax = (int(from_jax.group(1)), int(from_jax.group(2))) if from_jax else None
    findings = lint_text(text, str(path), registry.all_rules(), TARGET, from_jax)
    assert {(f.line, f.code) for f in findings} == expected, [
        (f.line, f.code, f.message) for f in findings
    ]
