"""``jaxmigrate report PATH``: the state of a codebase's migration, as a self-contained HTML page
(or Markdown, or JSON), with the progress since the last report written to the same folder.

``model`` works out what the report says, ``progress`` keeps the state beside the report, and
``html`` / ``markdown`` / ``json_format`` lay it out.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import import_module
from pathlib import Path

from jaxmigrate import baseline, engine
from jaxmigrate.config import ConfigError, load_settings
from jaxmigrate.files import write_atomic
from jaxmigrate.report import model, progress
from jaxmigrate.source_lines import SourceLines

FORMATS = {"html": "html", "markdown": "markdown", "json": "json_format"}
SUFFIXES = {"html": ".html", "markdown": ".md", "json": ".json"}


class ReportError(Exception):
    pass


@dataclass
class ReportOptions:
    paths: list[Path] = field(default_factory=list)
    output_format: str = "html"
    output_file: str | None = None  # None: jaxmigrate-report.<suffix>; "-": stdout (no progress kept)
    select: list[str] | None = None
    ignore: list[str] | None = None
    config_file: Path | None = None
    target_jax: str | None = None
    from_jax: str | None = None
    jobs: int | None = None
    baseline: Path | None = None  # mark the findings it holds, and list its stale entries


def run(options: ReportOptions, stdout=None, stderr=None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    paths = options.paths or [Path(".")]
    try:
        settings = load_settings(options.config_file, paths[0] if paths[0].exists() else Path.cwd(),
                                 select=options.select, ignore=options.ignore,
                                 target_jax=options.target_jax, from_jax=options.from_jax)
    except ConfigError as error:
        raise ReportError(str(error)) from None
    job = engine.Job(engine.Mode.CHECK, True, settings.target_jax, settings.from_jax, with_suppressed=True)
    result = engine.run_paths(paths, settings, job, jobs=options.jobs, use_cache=False)

    to_stdout = options.output_file == "-"
    target = None if to_stdout else Path(options.output_file or f"jaxmigrate-report{SUFFIXES[options.output_format]}")
    folder = Path.cwd() if target is None else target.parent.absolute()
    sources = SourceLines()
    report = model.build(
        result.findings, result.suppressed, anchor=folder, sources=sources,
        generated=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        paths=[path.as_posix() for path in paths], files_checked=len(result.files),
    )
    if target is not None:
        report.progress = progress.compare(report, folder, paths)
    if options.baseline is not None:
        report.baseline = _baseline_state(options.baseline, result.findings, sources)

    text = io.StringIO()
    renderer = import_module(f"jaxmigrate.report.{FORMATS[options.output_format]}").render
    renderer(report, text, sources=sources)
    if target is None:
        stdout.write(text.getvalue())
        return 0
    try:
        folder.mkdir(parents=True, exist_ok=True)
        data = text.getvalue().encode("utf-8")
        write_atomic(target, data) if target.exists() else target.write_bytes(data)
        progress.save(report, folder)
    except OSError as error:
        raise ReportError(f"cannot write {target}: {error.strerror or error}") from None
    stderr.write(_summary(report, target))
    return 0


def _baseline_state(file: Path, findings, sources: SourceLines) -> model.BaselineState:
    try:
        entries = baseline.read(file)
    except baseline.BaselineError as error:
        raise ReportError(str(error)) from None
    filtered = baseline.apply(findings, entries, file.parent, sources)
    new = set(map(id, filtered.new))
    return model.BaselineState(file.as_posix(), {id(f) for f in findings if id(f) not in new}, filtered.stale)


def _summary(report: model.MigrationReport, target: Path) -> str:
    totals = report.totals()
    shown = ", ".join(f"{totals[name]} {model.LABELS[name]}" for name in model.CATEGORIES if name != "fixed")
    line = f"Wrote {target}: {shown}"
    if report.progress is not None:
        line += f"; since the last report ({report.progress.previous}): {totals['fixed']} fixed," \
                f" {sum(report.progress.new.values())} new"
    return line + ".\n"
