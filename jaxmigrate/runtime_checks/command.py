"""``jaxmigrate verify OLD NEW``: the click command the CLI mounts (``main.add_command(verify)``)."""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import traceback
from pathlib import Path

import click
from rich.console import Console

from . import old_side
from .harness import CONNECT_CHOICES, THREEFRY_CHOICES, VerifyUsageError
from .harness import verify as run_verify
from .report import EXIT_FAILED, render


@click.command("verify")
@click.argument("programs", nargs=-1, required=True, metavar="[OLD] NEW",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--entry", "entries", multiple=True, required=True, metavar="NAME",
              help="Function to call on both sides (repeatable; all run in one worker per side).")
@click.option("--devices", default=8, show_default=True, type=click.IntRange(min=1),
              help="Number of forced CPU devices (per process, with --processes).")
@click.option("--processes", default=1, show_default=True, type=click.IntRange(min=1),
              help="Run each side as N JAX processes on this machine (jax.distributed on 127.0.0.1, gloo "
                   "CPU collectives) and compare every process's outputs and collectives.")
@click.option("--connect", type=click.Choice(CONNECT_CHOICES), default="before-import", show_default=True,
              help="With --processes: join the processes before importing the program, or after, as a "
                   "launcher does (the program's own jax.distributed.initialize() joins them; a program "
                   "that starts JAX's backend at import then fails).")
@click.option("--inputs", metavar="FILE.py:FUNCTION",
              help="Function building the entries' arguments, called inside each worker: returns a tuple "
                   "(positional args), a dict (keyword args) or one argument; if it takes a parameter it "
                   "gets the entry name.")
@click.option("--old-ref", metavar="REV",
              help="Run the old side from git revision REV of NEW (`git show REV:NEW`); give NEW only.")
@click.option("--old-jax", metavar="X.Y",
              help="Run the old side with this JAX, from a venv made once and cached [default: this "
                   "interpreter's JAX; the project's own jax pin if the old side cannot be imported with it].")
@click.option("--old-python", metavar="PYTHON", help="Interpreter for the old side (default: this one).")
@click.option("--new-python", metavar="PYTHON", help="Interpreter for the new side (default: this one).")
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds each side may run before its process groups are killed.")
@click.option("--unreplicate", type=click.Choice(["old", "new"]),
              help="Drop that side's leading device axis where all its slices are equal "
                   "(pmap-era replicated outputs vs global ones).")
@click.option("--threefry-partitionable", type=click.Choice(THREEFRY_CHOICES), default="true",
              show_default=True, help="Set jax_threefry_partitionable on both sides (where that JAX has it), "
                                      "so random streams agree; as-is keeps each side's default.")
@click.option("--rtol", type=float, help="Relative tolerance for float leaves (default: by dtype).")
@click.option("--atol", type=float, help="Absolute tolerance for float leaves (default: by dtype).")
@click.option("--timing", is_flag=True,
              help="Also measure: compilations (count, names, time), the steady-state step time (median and "
                   "spread of --repeat synchronised calls after --warmup), peak memory, collective bytes; "
                   "flags a new side that compiles more often or is slower beyond the noise.")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0),
              help="With --timing: untimed calls after the first, before the timed ones.")
@click.option("--repeat", default=10, show_default=True, type=click.IntRange(min=1),
              help="With --timing: timed calls per entry and side.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the report as JSON to this file ('-' for stdout, then no table).")
def verify(
    programs: tuple[Path, ...], entries: tuple[str, ...], devices: int, processes: int, inputs: str | None,
    old_ref: str | None, old_jax: str | None, old_python: str | None, new_python: str | None, timeout: float,
    unreplicate: str | None, threefry_partitionable: str, rtol: float | None, atol: float | None,
    json_path: Path | None, connect: str, timing: bool = False, warmup: int = 2, repeat: int = 10,
) -> None:
    """Run OLD and NEW side by side on forced CPU devices; compare outputs and collectives.

    With --old-ref REV, give NEW only: the old side is NEW as it was at git revision REV.

    Exit status: 0 all entries equal, 1 some output differs, 2 a side failed to run.
    """
    try:
        with tempfile.TemporaryDirectory(prefix="jaxmigrate-old-ref-") as folder:
            old, new, old_home = _programs(programs, old_ref, Path(folder))
            if old_jax and old_python:
                raise VerifyUsageError("give --old-jax or --old-python, not both")
            run = functools.partial(
                run_verify, old, new, entries, devices=devices, processes=processes, inputs=inputs,
                new_python=new_python, timeout=timeout, unreplicate=unreplicate,
                threefry_partitionable=threefry_partitionable, rtol=rtol, atol=atol, connect=connect,
                timing=timing, warmup=warmup, repeat=repeat, old_home=old_home,
            )
            report = run(old_python=old_side.python_for(old_jax) if old_jax else old_python)
            pinned = old_side.project_jax(new)
            failure = report.old.failure
            if failure is not None and failure.kind == "import-error" and not (old_jax or old_python) and pinned \
                    and pinned[0] != report.old.jax_version:
                click.echo(f"jaxmigrate verify: the old side cannot be imported with JAX {report.old.jax_version};"
                           f" running it with JAX {pinned[0]}, the project's pin ({pinned[1]}), from a cached venv"
                           " (--old-jax chooses another)", err=True)
                report = run(old_python=old_side.python_for(pinned[0]))
            elif failure is not None and not (old_jax or old_python):
                failure.message += old_side.removed_api_hint(failure.message, pinned, report.old.jax_version)
            if old_ref is not None:  # not the temporary copy's path: what it is
                report.old.program = f"{new} at {old_ref}"
    except VerifyUsageError as exc:
        raise click.UsageError(str(exc)) from exc
    except ImportError as exc:  # numpy missing in this interpreter: the runtime extra
        click.echo(f"jaxmigrate verify needs numpy here ({exc}); install 'jaxmigrate[runtime]'.", err=True)
        raise SystemExit(EXIT_FAILED) from exc
    except Exception as exc:  # a bug of ours: exit 2 ("could not verify"), never 1 ("differs")
        click.echo("jaxmigrate verify: internal error (please report it):", err=True)
        click.echo(traceback.format_exc(), err=True)
        raise SystemExit(EXIT_FAILED) from exc
    payload = json.dumps(report.to_json(), indent=2)
    if json_path is not None and str(json_path) == "-":
        click.echo(payload)
    else:
        if json_path is not None:
            json_path.write_text(payload + "\n")
        render(report, _console(report))
    raise SystemExit(report.exit_code)


def _programs(programs: tuple[Path, ...], old_ref: str | None, folder: Path) -> tuple[Path, Path, Path | None]:
    """(old, new, the folder the old program runs in when it is a copy from git)."""
    if old_ref is not None:
        if len(programs) != 1:
            raise VerifyUsageError("with --old-ref REV, give NEW only (the old side is NEW at REV)")
        (new,) = programs
        return old_side.from_git(old_ref, new, folder), new, new.resolve().parent
    if len(programs) != 2:
        raise VerifyUsageError("give OLD and NEW (or NEW and --old-ref REV)")
    return programs[0], programs[1], None


def _console(report) -> Console:
    """A console as wide as a terminal is, or, piped, as wide as the report's longest line needs:
    a path cut to fit 80 columns (`.../tr…`) is useless in a log."""
    if sys.stdout.isatty():
        return Console()
    widest = [max(len(str(side.program)), len(str(side.python))) for side in (report.old, report.new)]
    return Console(width=max(80, sum(widest) + 40))
