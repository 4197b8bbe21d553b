"""What ``jaxmigrate check`` does between parsing options and exiting: settings, the engine run,
the renderer and the exit code, so that ``cli.py`` stays a list of options."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from jaxmigrate import engine
from jaxmigrate.config import ConfigError, load_settings
from jaxmigrate.files import SourceError, decode, read_source
from jaxmigrate.lint.output import Report, get_renderer

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
# Show a progress bar only for runs long enough to want one: once one has taken this long.
PROGRESS_AFTER_SECONDS = 1.0


class UsageError(Exception):
    pass


@dataclass
class CheckOptions:
    paths: list[Path] = field(default_factory=list)
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    select: list[str] | None = None
    ignore: list[str] | None = None
    output_format: str = "text"
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    use_cache: bool = True
    jobs: int | None = None
    target_jax: str | None = None
    from_jax: str | None = None
    line_length: int | None = None
    config_file: Path | None = None
    stdin_filename: str | None = None
    force_exclude: bool = False
    quiet: bool = False  # as ruff's -q: the findings (or diff), no summary line, no progress bar


def check(options: CheckOptions, stdin=None, stdout=None, stderr=None) -> int:
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if options.fix and options.diff:
        raise UsageError("--fix and --diff cannot be used together (--diff changes nothing)")
    use_stdin = options.stdin_filename is not None or [str(p) for p in options.paths] == ["-"]
    if use_stdin and options.paths and [str(p) for p in options.paths] != ["-"]:
        raise UsageError("--stdin-filename reads from stdin: pass no paths (or just '-')")
    paths = options.paths or [Path(".")]
    start = Path(options.stdin_filename).parent if use_stdin and options.stdin_filename else paths[0]
    try:
        settings = load_settings(
            options.config_file,
            start if start.exists() else Path.cwd(),
            select=options.select,
            ignore=options.ignore,
            target_jax=options.target_jax,
            from_jax=options.from_jax,
            line_length=options.line_length,
        )
    except ConfigError as error:
        raise UsageError(str(error)) from None

    mode = engine.Mode.DIFF if options.diff else engine.Mode.FIX if options.fix else engine.Mode.CHECK
    job = engine.Job(mode, options.unsafe_fixes, settings.target_jax, settings.from_jax, settings.line_length,
                     str(settings.root))

    if use_stdin:
        name = options.stdin_filename or "-"
        raw = stdin.read()
        result = engine.run_stdin(raw, name, settings, job, force_exclude=options.force_exclude)
        original = _decoded_or_none(raw)
        read_source = lambda path: original if path == name else None  # noqa: E731
        if mode is engine.Mode.FIX:
            # As editors expect: the (fixed) source on stdout, the findings on stderr. The
            # caller writes stdout back over the file, so it gets bytes in the file's own
            # encoding, BOM and line endings - and the input unchanged, byte for byte, when
            # nothing was fixed or the input could not even be decoded.
            fixed, out = (result.files[0].new_text, result.files[0].new_bytes) if result.files else (None, None)
            if out is not None:
                read_source = lambda path: fixed if path == name else None  # noqa: E731
            _write_bytes(stdout, raw if out is None else out)
            stdout = stderr
    else:
        with _progress(stderr, options.output_format, quiet=options.quiet) as tick:
            result = engine.run_paths(
                paths, settings, job, force_exclude=options.force_exclude,
                jobs=options.jobs, use_cache=options.use_cache, progress=tick,
            )
        read_source = _read_file_text

    report = Report(
        findings=result.findings,
        files_checked=len(result.files),
        fix_mode=mode is engine.Mode.FIX,
        fixed=result.fixed,
        unsafe_fixes=options.unsafe_fixes,
        read_source=read_source,
        quiet=options.quiet,
    )
    if mode is engine.Mode.DIFF:
        stdout.write(result.diff)
        fixes = sum(r.fixed for r in result.files)
        if not options.quiet:
            stderr.write(
                f"Would fix {fixes} finding{'s' * (fixes != 1)} in {result.changed_files}"
                f" file{'s' * (result.changed_files != 1)}.\n"
            )
        return EXIT_FINDINGS if result.diff and not options.exit_zero else EXIT_CLEAN
    get_renderer(options.output_format)(report, stdout)

    if options.exit_zero:
        return EXIT_CLEAN
    if mode is engine.Mode.FIX and options.exit_non_zero_on_fix and result.changed_files:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if report.findings else EXIT_CLEAN


def _write_bytes(stream, data: bytes) -> None:
    """Write ``data`` to a text stream's underlying binary buffer, bypassing its encoding."""
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a plain text stream (io.StringIO) can only hold the text
        text = _decoded_or_none(data)
        stream.write(text if text is not None else data.decode("utf-8", "replace"))
        return
    stream.flush()
    buffer.write(data)
    buffer.flush()


def _decoded_or_none(raw: bytes) -> str | None:
    try:
        return decode(raw).text
    except SourceError:
        return None


def _read_file_text(path: str) -> str | None:
    try:
        return read_source(Path(path)).text
    except SourceError:
        return None


@contextlib.contextmanager
def _progress(stream, output_format: str, quiet: bool = False) -> Iterator:
    """A transient progress bar on stderr, only when a person is watching a text run that has
    gone on for ``PROGRESS_AFTER_SECONDS``. A timer shows it, so that a run stuck on one large
    file shows it too; the run ticks it as files are done."""
    interactive = hasattr(stream, "isatty") and stream.isatty() and output_format in ("text", "concise")
    if not interactive or quiet or os.environ.get("CI"):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    progress = Progress(
        TextColumn("checking"), BarColumn(), MofNCompleteColumn(),
        console=Console(file=stream), transient=True,
    )
    task = progress.add_task("check", total=None)  # no total before the first file is done
    timer = threading.Timer(PROGRESS_AFTER_SECONDS, progress.start)
    timer.daemon = True

    def tick(n: int, total: int) -> None:
        progress.update(task, total=total, advance=n)  # files served from the cache are not counted

    timer.start()
    try:
        yield tick
    finally:
        timer.cancel()
        timer.join()  # a bar being started is started before it is stopped
        progress.stop()
