"""Time `jaxmigrate --fix --unsafe-fixes` on legacy code: many small files, and one long file.

    python benchmarks/bench_fix.py [--runs 3] [--copies 40] [--padding 4000]

Fixing is not the hot path (checking is), but it runs the codemods, LibCST's import visitors and a
re-check after every pass, so its cost grows with the size of the files being fixed. Rows:

* the shipped `examples/legacy/` copied ``--copies`` times into a fresh tree (every file fixed);
* one file: `examples/legacy/train_data_parallel.py` followed by ``--padding`` lines of plain
  functions (the same fixes, in a file as long as a big training script).

Every timed run fixes a fresh copy (`--fix` changes the files), as subprocesses of the installed
console script with `--no-cache`; the median of ``--runs`` is reported.
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

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "legacy"


def padded_example(lines: int) -> str:
    text = (EXAMPLES / "train_data_parallel.py").read_text()
    pad = "\n".join(f"def helper_{i}(x):\n    y = x + {i}\n    return y * 2\n" for i in range(lines // 4))
    return text + "\n\n" + pad


def timed_fix(script: str, make_tree, runs: int) -> float:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="jaxmigrate-bench-fix-") as tmp:
            tree = Path(tmp) / "tree"
            make_tree(tree)
            start = time.perf_counter()
            done = subprocess.run([script, "--fix", "--unsafe-fixes", "--no-cache", "--output-format",
                                   "concise", str(tree)], cwd=tmp, capture_output=True)
            times.append(time.perf_counter() - start)
            if done.returncode not in (0, 1):
                raise SystemExit(f"jaxmigrate exited {done.returncode}:\n{done.stderr.decode()}")
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--padding", type=int, default=4000)
    args = parser.parse_args(argv)
    script = shutil.which("jaxmigrate")
    if script is None:
        raise SystemExit("the jaxmigrate console script is not on PATH (pip install -e .)")

    def copies(tree: Path) -> None:
        for i in range(args.copies):
            shutil.copytree(EXAMPLES, tree / f"copy{i}")

    def one_long_file(tree: Path) -> None:
        tree.mkdir()
        (tree / "train.py").write_text(padded_example(args.padding))

    n_files = args.copies * len(list(EXAMPLES.glob("*.py")))
    long_lines = padded_example(args.padding).count("\n")
    print(f"{os.cpu_count()} cores; median of {args.runs} runs")
    rows = [
        (f"examples/legacy x {args.copies} ({n_files} files)", timed_fix(script, copies, args.runs), n_files),
        (f"one file of {long_lines:,} lines", timed_fix(script, one_long_file, args.runs), 1),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'jaxmigrate --fix --unsafe-fixes':{width}}  {'wall s':>8}  {'files/s':>8}")
    for name, seconds, files in rows:
        print(f"{name:{width}}  {seconds:8.2f}  {files / seconds:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
