"""The findings cache: same answers warm as cold, invalidated by edits and settings, opt-out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxmigrate import engine
from jaxmigrate.cache import CACHE_DIR
from jaxmigrate.config import load_settings
from jaxmigrate.engine import Job, Mode

CHECK = Job(Mode.CHECK, False, (0, 10))
FIX = Job(Mode.FIX, False, (0, 10))


def run(job=CHECK, use_cache=True, **settings_overrides) -> engine.RunResult:
    settings = load_settings(None, Path.cwd(), **settings_overrides)
    return engine.run_paths([Path(".")], settings, job, jobs=1, use_cache=use_cache)


@pytest.fixture
def files(project, test_rules):
    (project / "a.py").write_text("x.legacy\nrisky()\n")
    (project / "b.py").write_text("ok = 1\n")
    (project / "broken.py").write_text("x.legacy\ndef f(:\n")
    return project


def forbid_linting(monkeypatch) -> None:
    """From now on, a file that is actually linted fails the test: only the cache may answer."""
    monkeypatch.setattr(engine, "lint_text", pytest.fail)
    monkeypatch.setattr(engine, "fix_text", pytest.fail)


def test_a_warm_run_returns_the_same_findings_without_linting(files, monkeypatch):
    cold = run()
    forbid_linting(monkeypatch)
    warm = run()
    assert warm.findings == cold.findings
    assert {f.code for f in warm.findings} == {"JM000", "JM901", "JM902"}
    # Fixes survive the cache too: --fix needs them.
    assert [f.fix for f in warm.findings] == [f.fix for f in cold.findings]


def test_a_warm_fix_run_skips_files_with_nothing_to_fix(files, monkeypatch):
    run()
    (files / "a.py").write_text("risky()\n")  # only an unsafe fix: nothing for plain --fix
    run()
    forbid_linting(monkeypatch)
    assert {f.code for f in run(FIX).findings} == {"JM000", "JM902"}


def test_editing_a_file_invalidates_its_entry(files):
    run()
    (files / "b.py").write_text("y.legacy\n")
    assert [(f.path, f.code) for f in run().findings if f.path == "b.py"] == [("b.py", "JM901")]


def test_changing_settings_does_not_reuse_findings(files):
    run()
    assert {f.code for f in run(select=["JM902"]).findings} == {"JM902"}


def test_the_cache_folder_ignores_itself_for_git(files):
    run()
    assert (files / CACHE_DIR / ".gitignore").read_text().splitlines()[-1] == "*"


def test_no_cache_neither_writes(files):
    run(use_cache=False)
    assert not (files / CACHE_DIR).exists()


def test_no_cache_neither_reads(files, monkeypatch):
    run()
    (files / "b.py").write_text("ok = 1  \n")  # same findings, different bytes
    monkeypatch.setattr(engine.cache_module.FindingsCache, "open", pytest.fail)
    assert {f.code for f in run(use_cache=False).findings} == {"JM000", "JM901", "JM902"}


def test_a_corrupt_cache_is_ignored_and_rewritten(files):
    run()
    for entry in (files / CACHE_DIR).glob("findings-*.json"):
        entry.write_text("{not json")
    assert {f.code for f in run().findings} == {"JM000", "JM901", "JM902"}


def test_a_fix_run_caches_nothing_check_would_not_report(files):
    (files / "c.py").write_text("breakme\n")  # its fix is rejected: a JM001 only --fix reports
    run(FIX)
    cached = run().findings
    assert [(f.path, f.code) for f in cached if f.path == "c.py"] == [("c.py", "JM904")]
    assert cached == run(use_cache=False).findings


def test_fix_after_a_warm_check_still_fixes(files):
    run()
    run(FIX)
    assert (files / "a.py").read_text() == "x.modern\nrisky()\n"
    assert [(f.path, f.code) for f in run().findings if f.path == "a.py"] == [("a.py", "JM902")]


def corrupt_entries(folder: Path, change) -> None:
    """Rewrites every cached finding with ``change(finding as a list)``, keys kept."""
    [file] = (folder / CACHE_DIR).glob("findings-*.json")
    entries = json.loads(file.read_text())
    for findings in entries.values():
        for item in findings:
            change(item)
    file.write_text(json.dumps(entries))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda item: item.__setitem__(3, "2"), id="line as a string"),
        pytest.param(lambda item: item.__setitem__(4, 0), id="column 0"),
        pytest.param(lambda item: item.__setitem__(4, True), id="column a bool"),
        pytest.param(lambda item: item.__setitem__(1, 5), id="message a number"),
        pytest.param(lambda item: item.__setitem__(0, None), id="code null"),
        pytest.param(lambda item: item.__setitem__(2, "elsewhere.py"), id="another file's path"),
        pytest.param(lambda item: item.__setitem__(8, "3"), id="cell a string"),
        pytest.param(lambda item: item.append(1), id="a field too many"),
        pytest.param(lambda item: item.__setitem__(7, ["bogus", "m", [], None]), id="unknown fix safety"),
        pytest.param(lambda item: item.__setitem__(7, ["safe", "m", [[0, "1", "x"]], None]), id="edit offsets"),
        pytest.param(lambda item: item.__setitem__(7, ["safe", "m", [], "os:system"]), id="a codemod not ours"),
        pytest.param(lambda item: item.__setitem__(7, {"safety": "safe"}), id="fix an object"),
    ],
)
def test_a_cache_entry_with_wrong_values_is_dropped(files, change):
    cold = run()
    corrupt_entries(files, change)
    assert run().findings == cold.findings


def test_a_wrong_cache_entry_does_not_crash_the_text_report(files):
    from click.testing import CliRunner

    from jaxmigrate.cli import main

    CliRunner().invoke(main, ["."])
    corrupt_entries(files, lambda item: item.__setitem__(3, "2"))
    result = CliRunner().invoke(main, ["."])
    assert result.exit_code == 1 and "internal error" not in result.output
    assert "a.py:1:1 JM901" in result.stdout
