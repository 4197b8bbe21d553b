"""Time `jaxmigrate check` on real trees, next to ruff on the same tree in the same run.

    python benchmarks/bench_check.py [--runs 5] [--tree jax|corpus|all] [--path DIR] [--jobs N]

Trees: the installed jax package's own source (modern code: few files name a legacy API) and the
public legacy corpus (`corpus.py`: trax, jaxline, paxml, praxis, evojax, flax 0.6.4, brax, the
pmap era). Rows per tree, each the median wall time of ``--runs`` subprocesses and the peak memory
of the largest process (the command or one of its pool workers):

* `jaxmigrate check --no-cache` (cold), and warm (the cache filled by one untimed run first);
* `ruff check --isolated --no-cache --select NPY201,UP`: the reference the cold run is held to
  (ruff is a benchmark-only dependency: `pip install ruff`);
* a `python -c` that only `ast.parse`s every file, for scale.

Everything runs with the working directory set to a fresh temporary folder, so the cache lands
there and not in your checkout. The load average is printed before and after: on a shared machine
numbers taken under load are not comparable.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import (console_script, jax_source_tree, legacy_corpus, median_run, print_load, python_files,
                     size, table, warm_up)

PARSE_ONLY = """\
import ast, sys
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        ast.parse(handle.read())
"""


def bench_tree(name: str, tree: Path, runs: int, jobs: int | None) -> None:
    files = python_files(tree)
    n_files, lines = size(files)
    print(f"\n{name}: {tree} ({n_files} files, {lines:,} lines); median of {runs} runs")
    check = [console_script("jaxmigrate"), "check", str(tree), "--output-format", "concise", "--exit-zero"]
    if jobs:
        check += ["--jobs", str(jobs)]
    ruff = [console_script("ruff"), "check", "--isolated", "--no-cache", "--select", "NPY201,UP",
            "--exit-zero", "--quiet", str(tree)]
    with tempfile.TemporaryDirectory(prefix="jaxmigrate-bench-") as tmp:
        cwd = Path(tmp)
        warm_up(cwd)
        cold = median_run([*check, "--no-cache"], cwd, runs)
        reference = median_run(ruff, cwd, runs, ok=(0,))
        median_run(check, cwd, 1)  # fills the cache
        warm = median_run(check, cwd, runs)
        parse = median_run([sys.executable, "-c", PARSE_ONLY, *map(str, files)], cwd, runs, ok=(0,))
    table([
        ("jaxmigrate check --no-cache (cold)", cold, f"{cold.seconds / reference.seconds:.1f}x ruff"),
        ("jaxmigrate check (warm cache)", warm, ""),
        ("ruff check --no-cache --select NPY201,UP", reference, "reference"),
        ("python -c: ast.parse every file", parse, "for scale"),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per row (median reported)")
    parser.add_argument("--tree", choices=("jax", "corpus", "all"), default="all")
    parser.add_argument("--path", type=Path, help="check this tree instead")
    parser.add_argument("--jobs", type=int, help="passed to jaxmigrate --jobs [default: cores]")
    args = parser.parse_args(argv)

    print_load("before")
    if args.path:
        trees = [("tree", args.path.resolve())]
    else:
        trees = []
        if args.tree in ("jax", "all"):
            trees.append(("installed jax", jax_source_tree()))
        if args.tree in ("corpus", "all"):
            trees.append(("legacy corpus", legacy_corpus()))
    for name, tree in trees:
        bench_tree(name, tree, args.runs, args.jobs)
    print()
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
