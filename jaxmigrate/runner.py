"""What ``jaxmigrate check`` does between parsing options and exiting: settings, the engine run,
the renderer and the exit code, so that ``cli.py`` stays a list of options."""

from __future__ import annotations

import contextlib
import io
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
    extend_select: list[str] | None = None
    fixable: list[str] | None = None
    unfixable: list[str] | None = None
    respect_gitignore: bool | None = None  # None: the config's (default true)
    statistics: bool = False  # counts by rule instead of the findings (as ruff's --statistics)
    show_fixes: bool = False  # after --fix, what it fixed by file and rule
    output_file: Path | None = None  # the report (or diff) goes there instead of stdout
    show_settings: bool = False  # print the settings the first path is checked with, and stop
    show_files: bool = False  # print the files that would be checked, and stop
    baseline: Path | None = None  # report only findings this baseline does not hold
    write_baseline: Path | None = None  # write the findings as a baseline instead of reporting them
    add_noqa: bool = False  # as ruff's --add-noqa: a `# noqa: CODE` on each line with findings


def check(options: CheckOptions, stdin=None, stdout=None, stderr=None) -> int:
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if options.fix and options.diff:
        raise UsageError("--fix and --diff cannot be used together (--diff changes nothing)")
    _check_adoption_options(options)
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
            extend_select=options.extend_select,
            fixable=options.fixable,
            unfixable=options.unfixable,
            respect_gitignore=options.respect_gitignore,
        )
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if options.show_settings or options.show_files:
        from jaxmigrate import show

        target = Path(options.stdin_filename) if use_stdin and options.stdin_filename else paths[0]
        shown = (show.settings(settings, target) if options.show_settings
                 else show.files(engine.discover(paths, settings, options.force_exclude)))
        return _deliver(shown, stdout, options.output_file)

    mode = engine.Mode.DIFF if options.diff else engine.Mode.FIX if options.fix else engine.Mode.CHECK
    job = engine.Job(mode, options.unsafe_fixes, settings.target_jax, settings.from_jax, settings.line_length,
                     settings.fix_policy, root=str(settings.root))
    if options.output_file is not None and not (use_stdin and mode is engine.Mode.FIX):
        report_stream = io.StringIO()  # written to the file once the run is done (see _deliver)
    else:
        report_stream = None

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
        verb = {engine.Mode.FIX: "fixing", engine.Mode.DIFF: "diffing"}.get(mode, "checking")
        try:
            with _progress(stderr, options.output_format, quiet=options.quiet, verb=verb) as tick:
                result = engine.run_paths(
                    paths, settings, job, force_exclude=options.force_exclude,
                    jobs=options.jobs, use_cache=options.use_cache, progress=tick,
                )
        except engine.Interrupted as interrupted:
            _tell_written(interrupted.written, stderr)
            raise
        read_source = _read_file_text

    findings = result.findings
    if options.add_noqa or options.write_baseline:
        return _adopt(options, findings, stderr)
    if options.baseline is not None and mode is not engine.Mode.DIFF:
        # stdin's text is in memory only (and may not be the file of that name on disk).
        texts = {name: text for name in [options.stdin_filename or "-"] if use_stdin and (text := read_source(name))}
        findings = _without_baselined(findings, options.baseline, texts, stderr, options.quiet)

    report = Report(
        findings=findings,
        files_checked=len(result.files),
        fix_mode=mode is engine.Mode.FIX,
        fixed=result.fixed,
        # Findings the baseline holds are not reported: nor counted as found and left.
        found=result.found - (len(result.findings) - len(findings)) if mode is engine.Mode.FIX else None,
        gone=result.gone if mode is engine.Mode.FIX else None,
        unsafe_fixes=options.unsafe_fixes,
        read_source=read_source,
        quiet=options.quiet,
        line_length=settings.line_length,
        fixed_by_file=result.gone_by_file if options.show_fixes and mode is engine.Mode.FIX else None,
    )
    out = report_stream if report_stream is not None else stdout
    code = _render(options, mode, result, report, out, stderr)
    if report_stream is not None:
        _deliver(report_stream.getvalue(), stdout, options.output_file)
    return code


def _render(options: CheckOptions, mode, result, report: Report, stdout, stderr) -> int:
    if mode is engine.Mode.DIFF:
        stdout.write(result.diff)
        fixes = sum(r.fixed for r in result.files)
        if not options.quiet:
            stderr.write(
                f"Would fix {fixes} finding{'s' * (fixes != 1)} in {result.changed_files}"
                f" file{'s' * (result.changed_files != 1)}.\n"
            )
        return EXIT_FINDINGS if result.diff and not options.exit_zero else EXIT_CLEAN
    if options.statistics:
        from jaxmigrate.lint.output import statistics

        statistics.render(report, stdout, options.output_format)
    else:
        get_renderer(options.output_format)(report, stdout)

    if options.exit_zero:
        return EXIT_CLEAN
    if mode is engine.Mode.FIX and options.exit_non_zero_on_fix and result.changed_files:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if report.findings else EXIT_CLEAN


def _deliver(text: str, stdout, output_file: Path | None) -> int:
    """``text`` to ``--output-file`` (its folder made, as ruff does), or to stdout. An exit code of
    0, for the commands that only show something."""
    if output_file is None:
        stdout.write(text)
        return EXIT_CLEAN
    try:
        output_file.parent.mkdir(parents=True, exist_ok=True)
        output_file.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write --output-file {output_file}: {error.strerror or error}") from None
    return EXIT_CLEAN


def _tell_written(written: list[str], stderr) -> None:
    """An interrupted --fix says which files it had already rewritten: they are fixed and written
    whole (the others are as they were), and the user needs to know which to review."""
    if written:
        stderr.write(f"Fixed and written before the interruption ({len(written)} file{'s' * (len(written) != 1)}):\n")
        stderr.writelines(f"  {path}\n" for path in written)
        stderr.flush()
def _check_adoption_options(options: CheckOptions) -> None:
    if options.add_noqa and options.write_baseline:
        raise UsageError("--add-noqa and --write-baseline cannot be used together")
    adopting = "--add-noqa" if options.add_noqa else "--write-baseline" if options.write_baseline else None
    if adopting and (options.fix or options.diff):
        raise UsageError(f"{adopting} cannot be used with --fix or --diff")
    if adopting and (options.stdin_filename is not None or [str(p) for p in options.paths] == ["-"]):
        raise UsageError(f"{adopting} records the findings of files: it cannot read from stdin")


def _adopt(options: CheckOptions, findings, stderr) -> int:
    """--add-noqa or --write-baseline: record today's findings (exit 0, as ruff's --add-noqa)."""
    say = (lambda text: None) if options.quiet else stderr.write
    if options.add_noqa:
        from jaxmigrate.add_noqa import add_noqa

        added = add_noqa(findings)
        for why in added.skipped:
            say(f"jaxmigrate: no noqa added: {why}\n")
        say(f"Added {added.directives} noqa directive{'s' * (added.directives != 1)}.\n")
        return EXIT_CLEAN
    from jaxmigrate import baseline
    from jaxmigrate.source_lines import SourceLines

    try:
        entries = baseline.write(options.write_baseline, findings, SourceLines())
    except OSError as error:
        raise UsageError(f"cannot write the baseline {options.write_baseline}: {error.strerror or error}") from None
    total = sum(entries.values())
    say(f"Wrote a baseline of {total} finding{'s' * (total != 1)} ({len(entries)}"
        f" entr{'ies' if len(entries) != 1 else 'y'}) to {options.write_baseline}.\n")
    return EXIT_CLEAN


def _without_baselined(findings, file: Path, texts: dict[str, str], stderr, quiet: bool):
    """The findings ``file`` does not hold; its stale entries said on stderr (not with -q)."""
    from jaxmigrate import baseline
    from jaxmigrate.source_lines import SourceLines

    try:
        entries = baseline.read(file)
    except baseline.BaselineError as error:
        raise UsageError(str(error)) from None
    filtered = baseline.apply(findings, entries, file.parent, SourceLines(texts))
    if filtered.stale and not quiet:
        stderr.write(baseline.stale_summary(filtered.stale, file))
    return filtered.new


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
def _progress(stream, output_format: str, quiet: bool = False, verb: str = "checking") -> Iterator:
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
        TextColumn(verb), BarColumn(), MofNCompleteColumn(),
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
