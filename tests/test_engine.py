"""A run over many files: discovery, per-file check/fix/diff, writes, errors, the process pool."""

from __future__ import annotations

import codecs
import concurrent.futures
import os
import tempfile
from pathlib import Path

import pytest

from jaxmigrate import engine
from jaxmigrate.config import load_settings
from jaxmigrate.engine import MIN_FILES_FOR_POOL, Job, Mode
from jaxmigrate.lint.rule import Safety

CHECK = Job(Mode.CHECK, False, (0, 10))
FIX = Job(Mode.FIX, False, (0, 10))
DIFF = Job(Mode.DIFF, False, (0, 10))


def run(paths, job=CHECK, **kwargs) -> engine.RunResult:
    settings = load_settings(None, Path.cwd())
    kwargs.setdefault("use_cache", False)
    kwargs.setdefault("jobs", 1)
    return engine.run_paths([Path(p) for p in paths], settings, job, **kwargs)


def codes(result: engine.RunResult) -> list[tuple[str, str, int]]:
    return [(f.path, f.code, f.line) for f in result.findings]


@pytest.fixture
def files(project, test_rules):
    (project / "a.py").write_text("import x\nx.legacy\n")
    (project / "clean.py").write_text("import x\nx.modern\n")
    (project / "pkg").mkdir()
    (project / "pkg" / "b.py").write_text("risky()\n")
    return project


def test_findings_of_every_file_with_paths_as_given(files):
    assert codes(run(["."])) == [("a.py", "JM901", 2), ("pkg/b.py", "JM902", 1)]
    assert [r.path for r in run(["."]).files] == ["a.py", "clean.py", "pkg/b.py"]


def test_absolute_paths_below_the_cwd_are_shown_relative(files):
    assert codes(run([files / "a.py"])) == [("a.py", "JM901", 2)]


def test_an_empty_list_of_files_is_an_empty_result(project, test_rules):
    (project / "empty").mkdir()
    assert run(["empty"]).files == []


def test_fix_writes_fixed_files_and_leaves_others_untouched(files):
    os.utime(files / "clean.py", (1_000_000, 1_000_000))
    before = (files / "clean.py").read_bytes()
    result = run(["."], FIX)
    assert (files / "a.py").read_text() == "import x\nx.modern\n"
    assert (result.fixed, result.changed_files) == (1, 1)
    assert codes(result) == [("pkg/b.py", "JM902", 1)]  # the unsafe fix was not asked for
    assert (files / "clean.py").read_bytes() == before
    assert (files / "clean.py").stat().st_mtime == 1_000_000
    assert (files / "pkg" / "b.py").read_text() == "risky()\n"


def test_unsafe_fixes_apply_when_asked(files):
    run(["."], Job(Mode.FIX, True, (0, 10)))
    assert (files / "pkg" / "b.py").read_text() == "careful()\n"


@pytest.mark.parametrize(
    "before, after",
    [
        pytest.param(b"x.legacy\r\ny = 1\r\n", b"x.modern\r\ny = 1\r\n", id="CRLF"),
        pytest.param(codecs.BOM_UTF8 + b"x.legacy\n", codecs.BOM_UTF8 + b"x.modern\n", id="BOM"),
        pytest.param(
            b"# -*- coding: latin-1 -*-\ns = '\xe9'; x.legacy\n",
            b"# -*- coding: latin-1 -*-\ns = '\xe9'; x.modern\n",
            id="latin-1 with a coding cookie",
        ),
    ],
)
def test_fix_keeps_encoding_bom_and_line_endings(project, test_rules, before, after):
    path = project / "a.py"
    path.write_bytes(before)
    os.chmod(path, 0o754)
    run(["a.py"], FIX)
    assert path.read_bytes() == after
    assert path.stat().st_mode & 0o777 == 0o754


def test_diff_shows_what_fix_would_write_and_changes_nothing(files):
    result = run(["."], DIFF)
    assert (files / "a.py").read_text() == "import x\nx.legacy\n"
    assert result.diff == "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n import x\n-x.legacy\n+x.modern\n"
    assert result.changed_files == 1


def test_a_file_that_cannot_be_parsed_is_JM000_and_the_run_goes_on(files):
    (files / "broken.py").write_text("x.legacy\ndef f(:\n")
    result = run(["."])
    assert ("broken.py", "JM000", 2) in codes(result)
    assert ("a.py", "JM901", 2) in codes(result)


def test_a_file_with_a_nul_byte_is_JM000(files):
    (files / "nul.py").write_bytes(b"x.legacy\n\x00\n")
    assert ("nul.py", "JM000", 1) in codes(run(["."]))


def test_a_file_that_cannot_be_decoded_is_JM000_and_left_alone(files):
    (files / "bad.py").write_bytes(b"x.legacy = '\xff'\n")
    result = run(["."], FIX)
    [finding] = [f for f in result.findings if f.path == "bad.py"]
    assert finding.code == "JM000" and "cannot decode" in finding.message
    assert (files / "bad.py").read_bytes() == b"x.legacy = '\xff'\n"
    assert (files / "a.py").read_text() == "import x\nx.modern\n"


def test_a_file_that_cannot_be_read_is_JM000(files, monkeypatch):
    real = os.open

    def open_(path, *args, **kwargs):  # files.read_bytes opens with os.open (root reads any mode)
        if os.fspath(path).endswith("a.py"):
            raise PermissionError(13, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    result = run(["."])
    [finding] = [f for f in result.findings if f.path == "a.py"]
    assert finding.code == "JM000" and "Permission denied" in finding.message
    assert ("pkg/b.py", "JM902", 1) in codes(result)


def test_a_missing_explicit_file_is_JM000(project, test_rules):
    [finding] = run(["missing.py"]).findings
    assert finding.code == "JM000" and "cannot read" in finding.message


def test_a_fixed_text_the_encoding_cannot_hold_is_JM000_and_not_written(project, test_rules, monkeypatch):
    path = project / "a.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nx.legacy\n")

    def visit(self, node, ctx):
        if node.attr == "legacy":
            ctx.report(node, "legacy", ctx.fix(Safety.SAFE, "snow", ctx.replace(node, "'\u2603'")))

    [legacy_attribute] = [rule for rule in test_rules if rule.code == "JM901"]
    monkeypatch.setattr(legacy_attribute, "visit_Attribute", visit)
    [finding] = run(["a.py"], FIX).findings
    assert finding.code == "JM000" and "cannot be written back" in finding.message
    assert path.read_bytes() == b"# -*- coding: latin-1 -*-\nx.legacy\n"


def test_a_fix_that_would_break_the_file_is_JM001_naming_the_file(project, test_rules):
    path = project / "a.py"
    path.write_text("breakme\nx.legacy\n")
    result = run(["a.py"], FIX)
    assert path.read_text() == "breakme\nx.modern\n"
    errors = [f for f in result.findings if f.code == "JM001"]
    assert len(errors) == 1 and "a.py" in errors[0].message


def test_the_process_pool_gives_the_same_results_as_one_process(project, test_rules):
    for i in range(MIN_FILES_FOR_POOL + 8):
        body = ["x.legacy\n", "risky()\n", "boom\n", "ok = 1\n", "def f(:\n x.legacy\n"][i % 5]
        (project / f"m{i:03}.py").write_text(body)
    serial = run(["."], jobs=1)
    pooled = run(["."], jobs=2)
    assert len(serial.files) > MIN_FILES_FOR_POOL
    assert pooled.findings == serial.findings
    assert {f.code for f in serial.findings} == {"JM000", "JM001", "JM901", "JM902"}


def test_the_process_pool_fixes_like_one_process(tmp_path, monkeypatch, test_rules):
    trees = {}
    for name, jobs in [("serial", 1), ("pooled", 2)]:
        folder = tmp_path / name
        folder.mkdir()
        for i in range(MIN_FILES_FOR_POOL + 1):
            (folder / f"m{i:03}.py").write_text(f"x{i}.legacy\nrisky()\n")
        monkeypatch.chdir(folder)
        result = run(["."], FIX, jobs=jobs)
        assert result.changed_files == MIN_FILES_FOR_POOL + 1
        trees[name] = {p.name: p.read_text() for p in folder.iterdir()}
    assert trees["pooled"] == trees["serial"]


def test_the_pool_takes_the_largest_files_first_each_once_and_ends_on_small_chunks(project):
    sizes = [40_000, 300, 25_000, 12, 900, 5_000, *[200] * 60]
    for i, size in enumerate(sizes):
        (project / f"m{i:03}.py").write_text("x" * size)
    todo = [(f"m{i:03}.py", (), CHECK) for i in range(len(sizes))]
    chunks = engine._chunks(todo, jobs=2)
    assert sorted(item for chunk in chunks for item in chunk) == sorted(todo)
    assert [item[0] for item in chunks[0]] == ["m000.py"]  # the largest alone
    assert [item[0] for item in chunks[1]] == ["m002.py"]
    share = sum(sizes) // 16  # an eighth of each worker's half
    assert all(len(chunk) == 1 or sum(map(_size_of, chunk)) <= share for chunk in chunks)
    assert len(chunks[-1]) > 1


def _size_of(item) -> int:
    return os.stat(item[0]).st_size


DEEP = "x.legacy\ny = " + " + ".join(["1"] * 3_000) + "\n"  # CPython's parser gives up: RecursionError


@pytest.mark.parametrize("job", [CHECK, FIX], ids=["check", "fix"])
@pytest.mark.parametrize("jobs", [1, 2], ids=["serial", "pool"])
def test_a_file_too_deep_for_the_parser_is_JM000_and_the_others_stand(project, test_rules, job, jobs):
    for i in range(MIN_FILES_FOR_POOL):
        (project / f"m{i:03}.py").write_text("x.legacy\n")
    (project / "deep.py").write_text(DEEP)
    result = run(["."], job, jobs=jobs)
    [deep] = [f for f in result.findings if f.path == "deep.py"]
    assert deep.code == "JM000" and "too deeply nested" in deep.message
    assert (project / "deep.py").read_text() == DEEP
    others = [f for f in result.findings if f.path != "deep.py"]
    if job is FIX:
        assert others == [] and result.changed_files == MIN_FILES_FOR_POOL
        assert (project / "m000.py").read_text() == "x.modern\n"
    else:
        assert [f.code for f in others] == ["JM901"] * MIN_FILES_FOR_POOL


@pytest.mark.parametrize("job", [CHECK, FIX], ids=["check", "fix"])
@pytest.mark.parametrize("jobs", [1, 2], ids=["serial", "pool"])
def test_a_crash_outside_the_rules_is_that_file_s_JM001(project, test_rules, monkeypatch, job, jobs):
    """Whatever fails on one file (the resolver, a codemod, the tool's own bug) costs only that file."""
    for i in range(MIN_FILES_FOR_POOL):
        (project / f"m{i:03}.py").write_text("x.legacy\n")
    (project / "cursed.py").write_text("x.legacy\n")
    real = engine.process_text

    def process_text(source, display_path, codes, job):
        if display_path == "cursed.py":
            raise RecursionError("maximum recursion depth exceeded")
        return real(source, display_path, codes, job)

    monkeypatch.setattr(engine, "process_text", process_text)  # the pool's workers are forked
    result = run(["."], job, jobs=jobs)
    [cursed] = [f for f in result.findings if f.path == "cursed.py"]
    assert cursed.code == "JM001" and "RecursionError" in cursed.message and "please report it" in cursed.message
    assert (project / "cursed.py").read_text() == "x.legacy\n"
    assert len(result.files) == MIN_FILES_FOR_POOL + 1
    if job is FIX:
        assert result.changed_files == MIN_FILES_FOR_POOL


def test_fix_leaves_a_read_only_file_alone_and_says_so(files):
    """0444 means "do not change me", even to root, who could replace it anyway."""
    os.chmod(files / "a.py", 0o444)
    result = run(["."], FIX)
    assert (files / "a.py").read_text() == "import x\nx.legacy\n"
    mine = [(f.code, f.line) for f in result.findings if f.path == "a.py"]
    assert mine == [("JM000", 1), ("JM901", 2)]  # its findings as they still are, and why
    [why] = [f for f in result.findings if f.path == "a.py" and f.code == "JM000"]
    assert "read-only" in why.message and "not fixed" in why.message
    assert result.changed_files == 0 and result.fixed == 0


def test_a_file_in_a_folder_that_cannot_be_written_keeps_its_findings(files, monkeypatch):
    def mkstemp(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(files))

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)  # what a 0555 folder does (but to root)
    result = run(["."], FIX)
    mine = [(f.code, f.line) for f in result.findings if f.path == "a.py"]
    assert mine == [("JM000", 1), ("JM901", 2)]
    assert "cannot write a.py" in result.findings[0].message and "Permission denied" in result.findings[0].message
    assert (files / "a.py").read_text() == "import x\nx.legacy\n"


def test_a_write_failure_is_not_cached_as_a_finding_of_the_file(files):
    os.chmod(files / "a.py", 0o444)
    run(["."], FIX, use_cache=True)
    os.chmod(files / "a.py", 0o644)
    assert codes(run(["."], use_cache=True)) == [("a.py", "JM901", 2), ("pkg/b.py", "JM902", 1)]


def test_fix_does_not_overwrite_an_edit_saved_while_it_ran(files, monkeypatch):
    real = engine.process_raw

    def process_raw(raw, display_path, codes, job):
        result = real(raw, display_path, codes, job)
        if display_path == "a.py":  # the user saves the file while its fix is being worked out
            (files / "a.py").write_text("import x\nx.legacy  # edited\n")
        return result

    monkeypatch.setattr(engine, "process_raw", process_raw)
    result = run(["."], FIX)
    assert (files / "a.py").read_text() == "import x\nx.legacy  # edited\n"
    [finding] = [f for f in result.findings if f.path == "a.py"]
    assert finding.code == "JM000" and "changed while it was being fixed" in finding.message
    assert (files / "pkg" / "b.py").read_text() == "risky()\n" and result.changed_files == 0
    assert sorted(p.name for p in files.iterdir()) == ["a.py", "clean.py", "pkg"]  # no temp file left


@pytest.mark.parametrize(
    "requested, cores, files, job, expected",
    [
        pytest.param(100_000, 4, 40, CHECK, 4, id="--jobs 100000: the cores"),
        pytest.param(100_000, 64, 5, FIX, 5, id="--jobs 100000, many cores: the files to do"),
        pytest.param(None, 8, 40, CHECK, 8, id="default: the cores"),
        pytest.param(3, 8, 40, CHECK, 3, id="fewer than the cores: as asked"),
    ],
)
def test_the_pool_never_starts_more_workers_than_cores_or_files(
    project, test_rules, monkeypatch, requested, cores, files, job, expected
):
    started = []

    class Pool:  # records the size asked for and works in this process: nothing is started
        def __init__(self, max_workers, initializer=None, initargs=()):
            started.append(max_workers)

        def submit(self, function, *args):  # workers.pool starts the workers with a task each
            future = concurrent.futures.Future()
            future.set_result(function(*args))
            return future

        def map(self, function, items, chunksize=1):
            return map(function, items)

        def shutdown(self, wait=True, cancel_futures=False):
            pass

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    for i in range(files):
        (project / f"m{i:03}.py").write_text("x.legacy\n")
    result = run(["."], job, jobs=requested)
    assert started == [expected] and len(result.files) == files


def test_the_diff_of_an_absolute_path_names_the_path_as_it_is():
    from jaxmigrate.engine import _unified_diff

    diff = _unified_diff("x.legacy\n", "x.modern\n", "/abs/a.py")
    assert diff.startswith("--- /abs/a.py\n+++ /abs/a.py\n")


@pytest.mark.parametrize("mode", [Mode.CHECK, Mode.FIX])
def test_a_files_bytes_are_let_go_before_it_is_parsed(tmp_path, monkeypatch, mode):
    # Kept alive through the parse, a 1.4 MB file's bytes made glibc keep 45 MB of the heap the
    # parse freed (a 50,000-line check peaked at 330 MB instead of 262).
    from jaxmigrate.lint.registry import all_rules

    read, freed = [], []

    class Bytes(bytes):  # says when it is freed (bytes cannot be weakly referenced)
        def __del__(self):
            freed.append(self.__class__)

    path = tmp_path / "train.py"
    path.write_text("import jax\nstep = jax.pmap(lambda x: x)\n")

    def read_bytes(name):
        read.append(name)
        return Bytes(open(name, "rb").read())

    def parsing(work):
        def checked(*args, **kwargs):
            assert read and len(freed) == len(read), "the file's bytes are still alive"
            return work(*args, **kwargs)
        return checked

    monkeypatch.setattr(engine, "_read_bytes", read_bytes)
    monkeypatch.setattr(engine, "lint_text", parsing(engine.lint_text))
    monkeypatch.setattr(engine, "fix_text", parsing(engine.fix_text))
    result = engine.process_file(str(path), tuple(r.code for r in all_rules()), Job(mode, True, (0, 10)))
    assert [f.code for f in result.findings if f.code.startswith("JM0")] == []
    assert result.findings or result.changed
