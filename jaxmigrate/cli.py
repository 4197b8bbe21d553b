"""Command line: options in, engine call, renderer out. ``jaxmigrate PATH...`` means ``check``."""

from __future__ import annotations

import errno
import os
import select
import stat
import sys
import traceback
from pathlib import Path

import click

from jaxmigrate import __version__
from jaxmigrate.lint.output import FORMATS

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


class DefaultToCheck(click.Group):
    """Routes anything that is not a subcommand to ``check``, so ``jaxmigrate src/`` works.

    ``verify`` is loaded only when asked for: the harness's imports would otherwise cost every
    lint run (pre-commit, CI) tens of milliseconds for nothing."""

    lazy = {"verify": "jaxmigrate.runtime_checks.command:verify"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            from importlib import import_module

            module, _, attr = self.lazy[name].partition(":")
            return getattr(import_module(module), attr)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context):
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # here, not at exit, where a closed pipe is a noisy error
                if _reader_gone(sys.stdout):
                    raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
        except KeyboardInterrupt:
            # 130 = 128 + SIGINT, as shells report it: not 1, which means "findings remain".
            click.echo("jaxmigrate: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader stopped (`| head -1`): stop quietly, and exit 0 as ruff does. Python
            # would flush stdout again at exit and fail again, so stdout now goes nowhere.
            _silence_stdout()
            ctx.exit(EXIT_CLEAN)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        known = {*self.commands, *self.lazy}
        if args and args[0] not in known and args[0] not in ("--help", "-h", "--version"):
            args = ["check", *args]
        elif not args:
            args = ["check"]
        return super().parse_args(ctx, args)


def _reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe nobody reads any more. Needed because a large write that
    the pipe takes in part before its reader leaves does not raise: the BufferedWriter returns
    the part it wrote, and TextIOWrapper drops the rest without a word."""
    try:
        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode) or not hasattr(select, "poll"):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (in tests): nothing to flush
        pass


@click.group(cls=DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jaxmigrate")
def main() -> None:
    """Move legacy multi-device JAX code onto modern JAX, and prove the move kept its meaning."""


def _codes(values: tuple[str, ...]) -> list[str] | None:
    codes = [code.strip() for value in values for code in value.split(",") if code.strip()]
    return codes or None


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (or show) fixes that may change behaviour.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the diff --fix would apply; change nothing.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated).")
@click.option("--output-format", type=click.Choice(list(FORMATS)), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="With --fix: exit 1 if any file changed.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write .jaxmigrate_cache/.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes [default: cores].")
@click.option("--target-jax", metavar="X.Y", help="The JAX version to migrate to [default: 0.10].")
@click.option("--from-jax", metavar="X.Y",
              help="The JAX version the code was written for [default: the lowest the project's requirements allow].")
@click.option("--line-length", type=int, metavar="N",
              help="Width of rewritten lines [default: line-length, ruff's or black's, else each file's own].")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
              help="A pyproject.toml (or TOML file) to read settings from.")
@click.option("--stdin-filename", metavar="NAME", help="Read the source from stdin, named NAME.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes to explicitly passed files too.")
@click.option("--quiet", "-q", is_flag=True, help="Print the findings (or the diff) only: no summary line.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to run as well (comma-separated).")
@click.option("--fixable", multiple=True, help="Rule codes or prefixes whose fixes may be applied [default: ALL].")
@click.option("--unfixable", multiple=True, help="Rule codes or prefixes whose fixes are never applied.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Skip files .gitignore ignores [default: respect-gitignore, else yes].")
@click.option("--statistics", is_flag=True, help="Count the findings by rule instead of listing them.")
@click.option("--show-fixes", is_flag=True, help="With --fix: list what was fixed, by file and rule.")
@click.option("--output-file", "-o", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the findings (or the diff) to this file instead of stdout.")
@click.option("--show-settings", is_flag=True, help="Print the settings the first PATH is checked with, and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked, and exit.")
@click.option("--baseline", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Report only findings this baseline (see --write-baseline) does not hold.")
@click.option("--write-baseline", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Write today's findings to FILE as a baseline, and exit 0.")
@click.option("--add-noqa", is_flag=True, help="Add a `# noqa: CODE` to each line with findings, and exit 0.")
def check(paths, fix, unsafe_fixes, show_diff, select, ignore, output_format, exit_zero,
          exit_non_zero_on_fix, no_cache, jobs, target_jax, config_file, stdin_filename,
          force_exclude, from_jax, line_length, quiet, extend_select, fixable, unfixable,
          respect_gitignore, statistics, show_fixes, output_file, show_settings, show_files,
          baseline, write_baseline, add_noqa) -> None:
    """Report (and with --fix, fix) legacy multi-device JAX code under PATHS."""
    from jaxmigrate import runner

    try:
        code = runner.check(
            runner.CheckOptions(
                paths=list(paths), fix=fix, unsafe_fixes=unsafe_fixes, diff=show_diff,
                select=_codes(select), ignore=_codes(ignore), output_format=output_format,
                exit_zero=exit_zero, exit_non_zero_on_fix=exit_non_zero_on_fix,
                use_cache=not no_cache, jobs=jobs, target_jax=target_jax,
                config_file=config_file, stdin_filename=stdin_filename,
                force_exclude=force_exclude, from_jax=from_jax, line_length=line_length, quiet=quiet,
                extend_select=_codes(extend_select), fixable=_codes(fixable), unfixable=_codes(unfixable),
                respect_gitignore=respect_gitignore, statistics=statistics, show_fixes=show_fixes,
                output_file=output_file, show_settings=show_settings, show_files=show_files,
                baseline=baseline, write_baseline=write_baseline, add_noqa=add_noqa,
            )
        )
    except BrokenPipeError:
        raise  # not an internal error: the reader of stdout stopped (see DefaultToCheck.invoke)
    except runner.UsageError as error:
        click.echo(f"jaxmigrate: error: {error}", err=True)
        code = EXIT_ERROR
    except Exception:  # an internal error must still give exit 2 and a report-worthy trace
        click.echo("jaxmigrate: internal error (please report it):", err=True)
        click.echo(traceback.format_exc(), err=True)
        code = EXIT_ERROR
    sys.exit(code)


@main.command()
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules(output_format: str) -> None:
    """List every rule: code, name, summary, fix availability."""
    from jaxmigrate.lint.output import docs

    docs.render_rules(output_format, sys.stdout)


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a rule: why it matters, an example, what to use instead, fix safety."""
    from jaxmigrate.lint.output import docs

    if not docs.render_explanation(code, sys.stdout):
        click.echo(f"jaxmigrate: error: unknown rule {code!r} (see `jaxmigrate rules`)", err=True)
        sys.exit(EXIT_ERROR)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["html", "markdown", "json"]), default="html",
              show_default=True)
@click.option("--output-file", "-o", metavar="FILE",
              help="Where to write it ('-': stdout) [default: jaxmigrate-report.html|.md|.json]."
                   " A later report in the same folder shows the progress since this one.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to skip (comma-separated).")
@click.option("--target-jax", metavar="X.Y", help="The JAX version to migrate to [default: 0.10].")
@click.option("--from-jax", metavar="X.Y", help="The JAX version the code was written for.")
@click.option("--config", "config_file", type=click.Path(path_type=Path, dir_okay=False),
              help="A pyproject.toml (or TOML file) to read settings from.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes [default: cores].")
@click.option("--baseline", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Mark the findings this baseline holds, and list its stale entries.")
def report(paths, output_format, output_file, select, ignore, target_jax, from_jax, config_file, jobs,
           baseline) -> None:
    """Write the state of the migration of PATHS: what is fixed, fixable and left, and why."""
    from jaxmigrate import report as report_module

    try:
        code = report_module.run(report_module.ReportOptions(
            paths=list(paths), output_format=output_format, output_file=output_file, select=_codes(select),
            ignore=_codes(ignore), config_file=config_file, target_jax=target_jax, from_jax=from_jax, jobs=jobs,
            baseline=baseline,
        ))
    except report_module.ReportError as error:
        click.echo(f"jaxmigrate: error: {error}", err=True)
        code = EXIT_ERROR
    sys.exit(code)
