"""Time `jaxmigrate check` over the installed jax package's own source tree.

    python benchmarks/bench_check.py [--runs 5] [--path DIR] [--jobs N]

Rows (wall time, and the peak memory of the largest process): the cold run (`--no-cache`), the warm run (cache filled by one untimed run first), and for
comparison a `python -c` that only `ast.parse`s every file. Each is the median wall time of
``--runs`` subprocesses of the installed console script, run with the working directory set to a
fresh temporary folder, so the cache lands there and not in your checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PARSE_ONLY = """\
import ast, os, sys
for folder, dirs, files in os.walk(sys.argv[1]):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    for name in files:
        if name.endswith((".py", ".pyi")):
            with open(os.path.join(folder, name), "rb") as handle:
                ast.parse(handle.read())
"""


def jax_source_tree() -> Path:
    found = subprocess.run(
        [sys.executable, "-c", "import jax, os; print(os.path.dirname(jax.__file__))"],
        capture_output=True, text=True, check=True,
    )
    return Path(found.stdout.strip())


def corpus_size(tree: Path) -> tuple[int, int]:
    files = lines = 0
    for path in tree.rglob("*.py*"):
        if path.suffix in (".py", ".pyi") and "__pycache__" not in path.parts:
            files += 1
            lines += path.read_bytes().count(b"\n")
    return files, lines


# Runs the command and prints the peak resident memory of its largest process (the console script
# or one of its pool workers) in KiB: RUSAGE_CHILDREN covers every descendant that was waited for.
MEASURED = """\
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.buffer.write(code.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code.returncode)
"""


def median_run(command: list[str], cwd: Path, runs: int, ok: tuple[int, ...] = (0, 1)) -> tuple[float, float]:
    """(median wall seconds, largest peak RSS in MiB) of ``runs`` runs."""
    times, peaks = [], []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", MEASURED, *command], cwd=cwd, capture_output=True)
        times.append(time.perf_counter() - start)
        if result.returncode not in ok:
            raise SystemExit(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr.decode()}")
        peaks.append(int(result.stdout.split()[-1]) / 1024)
    return statistics.median(times), max(peaks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per row (median reported)")
    parser.add_argument("--path", type=Path, help="tree to check [default: the installed jax]")
    parser.add_argument("--jobs", type=int, help="passed to jaxmigrate --jobs [default: cores]")
    args = parser.parse_args(argv)

    script = shutil.which("jaxmigrate")
    if script is None:
        raise SystemExit("the jaxmigrate console script is not on PATH (pip install -e .)")
    tree = (args.path or jax_source_tree()).resolve()
    files, lines = corpus_size(tree)
    check = [script, "check", str(tree), "--output-format", "concise", "--exit-zero"]
    if args.jobs:
        check += ["--jobs", str(args.jobs)]

    print(f"corpus: {tree} ({files} files, {lines:,} lines); {os.cpu_count()} cores; "
          f"median of {args.runs} runs")
    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxmigrate-bench-") as tmp:
        cwd = Path(tmp)
        rows.append(("jaxmigrate check --no-cache (cold)", *median_run([*check, "--no-cache"], cwd, args.runs)))
        subprocess.run(check, cwd=cwd, stdout=subprocess.DEVNULL, check=False)  # fill the cache
        rows.append(("jaxmigrate check (warm cache)", *median_run(check, cwd, args.runs)))
        rows.append(("python -c: ast.parse every file", *median_run(
            [sys.executable, "-c", PARSE_ONLY, str(tree)], cwd, args.runs, ok=(0,))))

    width = max(len(name) for name, _, _ in rows)
    print(f"{'':{width}}  {'wall s':>8}  {'files/s':>9}  {'peak RSS MiB':>12}")
    for name, seconds, peak in rows:
        print(f"{name:{width}}  {seconds:8.3f}  {files / seconds:9.0f}  {peak:12.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
