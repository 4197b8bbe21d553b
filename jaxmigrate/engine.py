"""A run over many files: discover -> cache -> (pool of) check/fix -> write -> one RunResult.

Per-file work is ``process_file``, a plain function of (path, rule codes, settings) so it can run
in worker processes; everything it returns is plain data.
"""

from __future__ import annotations

import difflib
import enum
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from jaxmigrate import cache as cache_module
from jaxmigrate import program_modules, workers
from jaxmigrate.config import Settings
from jaxmigrate.files import (
    NOTEBOOK_SUFFIX,
    Discovery,
    FileChanged,
    SourceError,
    SourceFile,
    decode,
    encode,
    fingerprint,
    link_outside,
    read_bytes,
    remove_abandoned_temp_files,
    write_atomic,
)
from jaxmigrate.lint import fix_policy, registry
from jaxmigrate.lint.checker import fix_text, lint_text
from jaxmigrate.lint.findings import Finding, Safety
from jaxmigrate.lint.fix_policy import FixPolicy
from jaxmigrate.notebooks import Notebook, NotebookError

# Below this many files a pool costs more to start than it saves. Checking a file takes about
# 10 ms; fixing one runs codemods and re-checks, about 300 ms (benchmarks/bench_fix.py).
MIN_FILES_FOR_POOL = 32
MIN_FILES_FOR_POOL_WHEN_FIXING = 4
NO_NEWLINE = "\n\\ No newline at end of file\n"


class Mode(enum.Enum):
    CHECK = "check"
    FIX = "fix"
    DIFF = "diff"


@dataclass(frozen=True)
class Job:
    mode: Mode
    unsafe_fixes: bool
    target_jax: tuple[int, int]
    from_jax: tuple[int, int] | None = None  # the JAX the code was written for; None: not known
    line_length: int | None = None  # the width rewritten lines keep to; None: each file's own
    policy: FixPolicy | None = None  # fixable / unfixable / extend-(un)safe-fixes (lint/fix_policy.py)
    # Also return what `noqa` comments suppressed (FileResult.suppressed), for `jaxmigrate report`.
    # Such a run neither reads nor writes the cache, which holds shown findings only.
    with_suppressed: bool = False
    root: str | None = None  # --fix writes no symlink leading outside it; None: any


@dataclass
class FileResult:
    path: str
    findings: list[Finding]
    fixed: int = 0
    changed: bool = False  # --fix wrote it, or --diff would
    diff: str = ""
    new_text: str | None = None  # for stdin: the fixed text
    new_bytes: bytes | None = None  # what --fix writes (a notebook: its JSON with the fixed cells)
    cache_key: str | None = None
    fix_errors: bool = False  # rejected fixes were reported: findings a check would not give
    read: bytes | None = None  # with --fix, the fingerprint of the bytes the fix was made from
    found: int | None = None  # with --fix, the findings before fixing (None: ``findings``, nothing fixed)
    gone: dict[str, int] = field(default_factory=dict)  # with --fix, those gone, by code (checker._gone)
    suppressed: list[Finding] = field(default_factory=list)  # with Job.with_suppressed
    # The other modules of the program read for it (``program_modules``), with their digests; None:
    # served from the cache, which keeps what it had.
    read_modules: dict[str, str] | None = None


@dataclass
class RunResult:
    files: list[FileResult] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for r in self.files for f in r.findings), key=lambda f: f.sort_key)

    @property
    def suppressed(self) -> list[Finding]:
        return sorted((f for r in self.files for f in r.suppressed), key=lambda f: f.sort_key)

    @property
    def fixed(self) -> int:
        return sum(r.fixed for r in self.files)

    @property
    def found(self) -> int:
        return sum(len(r.findings) if r.found is None else r.found for r in self.files)

    @property
    def gone(self) -> int:
        return sum(sum(r.gone.values()) for r in self.files)

    @property
    def gone_by_file(self) -> dict[str, dict[str, int]]:
        return {r.path: r.gone for r in self.files if r.gone}

    @property
    def changed_files(self) -> int:
        return sum(1 for r in self.files if r.changed)

    @property
    def diff(self) -> str:
        return "".join(r.diff for r in self.files)


def _rules(codes: Sequence[str]):
    by_code = {rule.code: rule for rule in registry.all_rules()}
    return tuple(by_code[code] for code in codes)


def process_text(
    source: SourceFile, display_path: str, codes: Sequence[str], job: Job
) -> FileResult:
    rules = _rules(codes)
    with fix_policy.applied(job.policy):
        if job.mode is Mode.CHECK:
            suppressed: list[Finding] | None = [] if job.with_suppressed else None
            findings = lint_text(source.text, display_path, rules, job.target_jax, job.from_jax, suppressed)
            return FileResult(display_path, findings, suppressed=suppressed or [])
        result = fix_text(source.text, display_path, rules, job.target_jax, unsafe=job.unsafe_fixes,
                          from_jax=job.from_jax, line_length=job.line_length)
    findings = sorted(result.findings + result.errors, key=lambda f: f.sort_key)
    changed = result.text != source.text
    diff = _unified_diff(source.text, result.text, display_path) if changed and job.mode is Mode.DIFF else ""
    return FileResult(
        display_path, findings, result.fixed, changed, diff, result.text if changed else None,
        fix_errors=bool(result.errors), found=result.found, gone=result.gone,
    )


def process_raw(raw: bytes, display_path: str, codes: Sequence[str], job: Job) -> FileResult:
    """Check (or fix) one file's bytes: Python source, or a notebook's code cells. Raises
    SourceError when they cannot be read as either. Pass the bytes without keeping them: they
    are let go before the parse (see ``files.fingerprint``)."""
    read = fingerprint(raw) if job.mode is Mode.FIX else None
    if display_path.endswith(NOTEBOOK_SUFFIX):
        result = _process_notebook(raw, display_path, codes, job)
    else:
        source = decode(raw, display_path)
        del raw
        result = process_text(source, display_path, codes, job)
        if result.changed:
            result.new_bytes = encode(source, result.new_text)
    result.read = read
    return result


def _process_notebook(raw: bytes, display_path: str, codes: Sequence[str], job: Job) -> FileResult:
    """The code cells as one text (magics masked); findings counted within their cells; a fix
    written back into the cells it changed, the rest of the JSON as it was."""
    try:
        notebook = Notebook.parse(raw, display_path)
    except NotebookError as error:
        raise SourceError(str(error)) from None
    result = process_text(SourceFile(notebook.text, "utf-8"), display_path, codes, job)
    # After fixing, what remains was found in the fixed text, whose cells may start elsewhere.
    located = notebook.located_in(result.new_text) if result.new_text is not None else notebook
    result.findings = [located.locate(f) for f in result.findings]
    result.suppressed = [located.locate(f) for f in result.suppressed]
    if result.changed:
        try:
            result.new_bytes = notebook.with_text(result.new_text)
        except NotebookError as error:  # never write a notebook whose cells no longer line up
            unfixed = process_text(SourceFile(notebook.text, "utf-8"), display_path, codes,
                                   Job(Mode.CHECK, job.unsafe_fixes, job.target_jax, job.from_jax, policy=job.policy))
            result = FileResult(display_path, [notebook.locate(f) for f in unfixed.findings], fix_errors=True)
            result.findings.append(Finding("JM001", f"the fixes for {display_path} were not applied: {error}"
                                           " (please report it)", display_path, 1, 1, 1, 1))
        if job.mode is Mode.DIFF and result.new_bytes is not None:
            result.diff = _unified_diff(raw.decode("utf-8-sig"), result.new_bytes.decode("utf-8"), display_path)
    if not result.changed:
        result.diff = ""
    return result


def process_file(path: str, codes: Sequence[str], job: Job) -> FileResult:
    """Check (or fix) one file on disk; any failure to read or write is a JM000 finding."""
    try:
        with program_modules.reading(path) as reading:
            result = process_raw(_read_bytes(path), path, codes, job)
        result.read_modules = reading.read
        if result.changed and job.mode is Mode.FIX:
            if job.root is not None and (target := link_outside(path, job.root)) is not None:
                return _not_written(path, codes, job, f"{path} is a symlink to {target}, outside the project"
                                    f" ({job.root}); not written: fix that file itself")
            try:
                write_atomic(Path(path), result.new_bytes, expected=result.read)
            except FileChanged:
                why = f"{path} changed while it was being fixed; not written (run jaxmigrate again)"
                return FileResult(path, [Finding("JM000", why, path, 1, 1, 1, 1)], fix_errors=True)
            except OSError as error:
                return _not_written(path, codes, job, f"cannot write {path}: {_reason(error)}; not fixed")
        result.new_text = result.new_bytes = None  # not needed back from a worker process
        return result
    except SourceError as error:
        return FileResult(path, [_source_error(error, path)])
    except Exception as error:  # the tool's own failure on one file must not cost the others
        return FileResult(path, [_internal_error(error, path)])


def _read_bytes(path: str) -> bytes:
    try:
        return read_bytes(path)
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error.strerror or error}") from None


def _not_written(path: str, codes: Sequence[str], job: Job, why: str) -> FileResult:
    """The file's findings as it still is on disk, and ``why`` it was not fixed (a JM000 that is
    not the file's own, so it is never cached)."""
    unfixed = process_file(path, codes, Job(Mode.CHECK, job.unsafe_fixes, job.target_jax, job.from_jax, policy=job.policy))
    unfixed.findings.insert(0, Finding("JM000", why, path, 1, 1, 1, 1))
    unfixed.fix_errors = True
    return unfixed


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _process_packed(args: tuple[str, tuple[str, ...], Job]) -> FileResult:
    return process_file(*args)


def _process_chunk(items: list[tuple[str, tuple[str, ...], Job]]) -> list[FileResult]:
    """A worker's share: its files in turn, until the run is interrupted (``workers.stopping``)."""
    done = []
    for item in items:
        if workers.stopping():
            break
        done.append(process_file(*item))
    return done


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``written`` names the files ``--fix`` had already rewritten."""

    def __init__(self, written: list[str]) -> None:
        super().__init__()
        self.written = written


def _run_pool(todo: list, jobs: int, results: list[FileResult], progress) -> None:
    """The files in chunks across ``jobs`` workers, each chunk's results added to ``results`` as
    it comes back; interrupted, the chunks being worked on are cut short and still come back, so
    that what they rewrote is known."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending: set = set()
    try:
        with workers.pool(jobs) as pool:
            pending = {pool.submit(_process_chunk, chunk) for chunk in _chunks(todo, jobs)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    chunk = future.result()
                    pending.discard(future)
                    results.extend(chunk)
                    if progress:
                        progress(len(chunk), len(todo))
    except KeyboardInterrupt:
        # The pool has stopped its workers and waited for them: a cut chunk is done by now.
        for future in pending:
            if future.done() and not future.cancelled() and future.exception() is None:
                results.extend(future.result())
        raise


def _chunks(todo: list, jobs: int) -> list[list]:
    """The files largest first, in chunks of about an eighth of a worker's share of the bytes
    each (a big file alone): the files that cost most start first and the last chunks hold small
    files, so the workers finish close together. In the order found, a directory of big files
    fell in one chunk, and one worker still checked it while the other had long finished."""
    sizes = {item[0]: _size(item[0]) for item in todo}
    ordered = sorted(todo, key=lambda item: sizes[item[0]], reverse=True)
    budget = max(1, sum(sizes.values()) // (jobs * 8))
    chunks: list[list] = [[]]
    held = 0
    for item in ordered:
        if chunks[-1] and held + sizes[item[0]] > budget:
            chunks.append([])
            held = 0
        chunks[-1].append(item)
        held += sizes[item[0]]
    return chunks


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # (reported when the file is read)


def discover(paths: Sequence[Path], settings: Settings, force_exclude: bool = False) -> list[Path]:
    """The files a run over ``paths`` checks (``--show-files`` lists them)."""
    return Discovery(settings.root, settings.exclude, settings.extend_exclude, force_exclude,
                     respect_gitignore=settings.respect_gitignore).files(paths)


def run_paths(
    paths: Sequence[Path],
    settings: Settings,
    job: Job,
    *,
    force_exclude: bool = False,
    jobs: int | None = None,
    use_cache: bool = True,
    progress: Callable[[int, int], None] | None = None,  # (files just done, files to do)
) -> RunResult:
    files = discover(paths, settings, force_exclude)
    remove_abandoned_temp_files({path.parent for path in files})  # an interrupted --fix's
    use_cache = use_cache and not job.with_suppressed
    cache = cache_module.FindingsCache.open(settings.root, settings.fingerprint()) if use_cache else None
    results: list[FileResult] = []
    todo: list[tuple[str, tuple[str, ...], Job]] = []
    keys: dict[str, str] = {}
    for path in files:
        display = _display_path(path, settings.root)
        codes = settings.rule_codes_for(path)
        if cache is not None:
            key, findings = cache.lookup(path, display, codes, job.target_jax)
            if key is not None:
                keys[display] = key
            # A cached file needs no work when checking, or when nothing in it could be fixed.
            if findings is not None and (job.mode is Mode.CHECK or not _has_applicable_fix(findings, job)):
                results.append(FileResult(display, findings))
                continue
        todo.append((display, codes, job))

    jobs = workers.count(jobs, len(todo))
    enough = MIN_FILES_FOR_POOL if job.mode is Mode.CHECK else MIN_FILES_FOR_POOL_WHEN_FIXING
    try:
        if jobs > 1 and len(todo) >= enough:
            _run_pool(todo, jobs, results, progress)
        else:
            for item in todo:
                results.append(_process_packed(item))
                if progress:
                    progress(1, len(todo))
    except KeyboardInterrupt:
        raise Interrupted(sorted(r.path for r in results if r.changed and job.mode is Mode.FIX)) from None

    if cache is not None:
        for result in results:
            # Only a file as it now is on disk may be cached: not after --fix changed it, nor
            # with the errors of rejected fixes, which a plain check would not report.
            if result.path in keys and not result.changed and not result.fix_errors:
                cache.store(keys[result.path], result.findings, result.read_modules)
        cache.save()
    return RunResult(sorted(results, key=lambda r: r.path))


def run_stdin(
    raw: bytes, display_path: str, settings: Settings, job: Job, *, force_exclude: bool = False
) -> RunResult:
    if force_exclude and display_path != "-":
        if not discover([Path(display_path)], settings, force_exclude=True):
            return RunResult([])  # an excluded name: as if no file had been given
    try:
        result = process_raw(raw, display_path, settings.rule_codes_for(Path(display_path)), job)
    except SourceError as error:
        result = FileResult(display_path, [_source_error(error, display_path)])
    except Exception as error:
        result = FileResult(display_path, [_internal_error(error, display_path)])
    return RunResult([result])


def _source_error(error: SourceError, path: str) -> Finding:
    return Finding("JM000", str(error), path, error.line, error.column, error.line, error.column)


def _internal_error(error: Exception, path: str) -> Finding:
    """JM001 for a failure outside any one rule (the resolver, a codemod, a RecursionError on a
    pathological file): the file is left as it was and the run goes on."""
    where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
    return Finding(
        "JM001", f"jaxmigrate failed on this file, which was left unchanged: {type(error).__name__}:"
        f" {error}{at}; please report it", path, 1, 1, 1, 1,
    )


def _unified_diff(before: str, after: str, display_path: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        # git's a/ b/ prefixes for relative paths; an absolute path is shown as it is (as ruff
        # does), not as `a//root/...`.
        fromfile=display_path if display_path.startswith("/") else f"a/{display_path}",
        tofile=display_path if display_path.startswith("/") else f"b/{display_path}",
    )
    # A last line without its newline must say so, as git and GNU diff do: without the marker
    # the next line of the patch is glued to it, and `git apply` rejects the whole patch.
    return "".join(line if line.endswith(("\n", "\r")) else line + NO_NEWLINE for line in lines)


def _has_applicable_fix(findings: list[Finding], job: Job) -> bool:
    allowed = {Safety.SAFE, Safety.UNSAFE} if job.unsafe_fixes else {Safety.SAFE}
    return any(f.fix is not None and f.fix.allowed(allowed) is not None for f in findings)


def _display_path(path: Path, root: Path) -> str:
    """Paths as the user typed them when relative; otherwise relative to the cwd when below it."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()
