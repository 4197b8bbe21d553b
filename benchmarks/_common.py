"""What every benchmark shares: the trees, the console scripts, timed subprocesses, the load.

Every timed command runs as a subprocess (the console script, as a user runs it) under a small
Python parent that reports the peak resident memory of the largest process it waited for: the
command itself or one of its pool workers (``RUSAGE_CHILDREN`` covers every waited-for descendant).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from corpus import legacy_corpus  # noqa: F401  (re-exported for the benchmarks)

# The peak resident memory (KiB) of the largest process the command started, on the last line;
# a command still running after the timeout (seconds, argv[1]; 0: none) is killed (exit 124).
MEASURED = """\
import resource, subprocess, sys
try:
    code = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=float(sys.argv[1]) or None)
except subprocess.TimeoutExpired:
    sys.exit(124)
sys.stderr.buffer.write(code.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code.returncode)
"""


class TimedOut(Exception):
    pass


# Compiled bytecode as an installed tool has it, kept out of the checkout (this environment may
# set PYTHONDONTWRITEBYTECODE, which would make every run compile jaxmigrate anew: +60 ms a run).
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
ENV.setdefault("PYTHONPYCACHEPREFIX", str(Path("~/.cache/jaxmigrate/pycache").expanduser()))

WARM_UP = """\
import functools
import jax
from jax.experimental.pjit import pjit

f = functools.partial(jax.pmap, axis_name="i")(lambda x: jax.lax.psum(x, "i"))
g = jax.tree_map(lambda x: x, {})
h = pjit(lambda x: x, in_axis_resources=None)
"""


def warm_up(workdir: Path) -> None:
    """One untimed check and fix of a small legacy file, so that every later run finds the bytecode
    of every module it imports (LibCST's included) compiled."""
    sample = workdir / "warm_up.py"
    for command in (["check", "--no-cache"], ["--fix", "--unsafe-fixes", "--no-cache"]):
        sample.write_text(WARM_UP)
        argv = [console_script("jaxmigrate"), *command, str(sample)]
        failed_if_broken(argv, subprocess.run(argv, cwd=workdir, env=ENV, capture_output=True))
    subprocess.run([sys.executable, "-c", "import libcst, ast"], env=ENV, check=True)
    sample.unlink()


@dataclass
class Timing:
    seconds: float  # median wall time
    peak_mib: float  # largest peak RSS of any one process, over the runs
    runs: list[float]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def print_load(when: str) -> None:
    print(f"load average {when}: {load()} (1, 5, 15 min; {os.cpu_count()} cores)", flush=True)


def console_script(name: str) -> str:
    """The script this Python installed (not a version manager's shim, e.g. pyenv's, which costs
    a tenth of a second per call), else the first on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        hint = "pip install -e ." if name == "jaxmigrate" else f"pip install {name}"
        raise SystemExit(f"`{name}` is not on PATH ({hint})")
    return found


def jax_source_tree() -> Path:
    found = subprocess.run(
        [sys.executable, "-c", "import jax, os; print(os.path.dirname(jax.__file__))"],
        capture_output=True, text=True, check=True,
    )
    return Path(found.stdout.strip())


def python_files(tree: Path) -> list[Path]:
    return sorted(
        path for path in tree.rglob("*")
        if path.suffix in (".py", ".pyi") and "__pycache__" not in path.parts and path.is_file()
    )


def size(files: list[Path]) -> tuple[int, int]:
    """(files, lines)."""
    return len(files), sum(path.read_bytes().count(b"\n") for path in files)


def timed(command: list[str], cwd: Path, ok: tuple[int, ...] = (0, 1), timeout: float = 0) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB of the largest process) of one run; TimedOut after ``timeout``."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", MEASURED, str(timeout), *command], cwd=cwd,
                            capture_output=True, env=ENV)
    seconds = time.perf_counter() - start
    if result.returncode == 124 and timeout:
        raise TimedOut(f"{' '.join(command)} still ran after {timeout:.0f} s")
    failed_if_broken(command, result, ok)
    return seconds, int(result.stdout.split()[-1]) / 1024


def failed_if_broken(command: list[str], result: subprocess.CompletedProcess, ok=(0, 1)) -> None:
    """Stop the benchmark when the command did not do its work: an exit code outside ``ok``, or a
    traceback (a broken install exits 1, as a run with findings does, in a tenth of a second)."""
    if result.returncode not in ok or b"Traceback (most recent call last)" in result.stderr:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr.decode()}")


def median_run(command: list[str], cwd: Path, runs: int, ok: tuple[int, ...] = (0, 1), prepare=None,
               timeout: float = 0) -> Timing:
    """The median of ``runs`` runs; ``prepare()`` (untimed) before each, e.g. a fresh copy to fix."""
    times, peaks = [], []
    for _ in range(runs):
        if prepare is not None:
            prepare()
        seconds, peak = timed(command, cwd, ok, timeout)
        times.append(seconds)
        peaks.append(peak)
    return Timing(statistics.median(times), max(peaks), times)


def table(rows: list[tuple[str, Timing, str]], unit_count: int | None = None) -> None:
    """Rows of (what, timing, note)."""
    width = max(len(name) for name, _, _ in rows)
    print(f"{'':{width}}  {'wall s':>8}  {'runs (s)':<24}  {'peak RSS MiB':>12}  note")
    for name, timing, note in rows:
        runs = " ".join(f"{t:.2f}" for t in timing.runs)
        print(f"{name:{width}}  {timing.seconds:8.3f}  {runs:<24}  {timing.peak_mib:12.0f}  {note}")
