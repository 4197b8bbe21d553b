"""Time `jaxmigrate --fix --unsafe-fixes` on real trees, next to a LibCST parse of what it rewrites.

    python benchmarks/bench_fix.py [--runs 3] [--tree jax|corpus|examples|all] [--path DIR]

Trees: the installed jax package's own source, the public legacy corpus (`corpus.py`), and
`examples/legacy/` copied ``--copies`` times. Every timed run fixes a fresh copy of the tree (the
copy is not timed), as a subprocess of the console script with `--no-cache`. The reference row is
a plain `libcst.parse_module` of the files the fix rewrote (their text before the fix), in one
subprocess that imports LibCST as jaxmigrate imports itself: what any LibCST codemod pays before it
does anything. Medians of ``--runs``; peak memory of the largest process.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import (console_script, jax_source_tree, legacy_corpus, median_run, print_load, python_files,
                     size, table, timed, warm_up)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "legacy"

LIBCST_PARSE = """\
import sys
import libcst
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        libcst.parse_module(handle.read())
"""


def copy_tree(source: Path, copies: int, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    if copies == 1:
        shutil.copytree(source, target, ignore=ignore)
    else:
        for i in range(copies):
            shutil.copytree(source, target / f"copy{i}", ignore=ignore)


def bench_tree(name: str, source: Path, copies: int, runs: int, jobs: int | None) -> None:
    with tempfile.TemporaryDirectory(prefix="jaxmigrate-bench-fix-") as tmp:
        cwd, tree, pristine = Path(tmp), Path(tmp) / "tree", Path(tmp) / "pristine"
        warm_up(cwd)
        copy_tree(source, copies, pristine)
        files = python_files(pristine)
        n_files, lines = size(files)
        print(f"\n{name}: {source}{f' x {copies}' if copies > 1 else ''} ({n_files} files, {lines:,} lines); "
              f"median of {runs} runs")
        fix = [console_script("jaxmigrate"), "--fix", "--unsafe-fixes", "--no-cache", "--output-format",
               "concise", str(tree)]
        if jobs:
            fix += ["--jobs", str(jobs)]
        fixed = median_run(fix, cwd, runs, prepare=lambda: copy_tree(pristine, 1, tree))
        rewritten = [path for path in files
                     if (tree / path.relative_to(pristine)).read_bytes() != path.read_bytes()]
        if not rewritten:
            print("no file was rewritten")
            table([("jaxmigrate --fix --unsafe-fixes", fixed, "")])
            return
        _, rewritten_lines = size(rewritten)
        reference = median_run([sys.executable, "-c", LIBCST_PARSE, *map(str, rewritten)], cwd, runs, ok=(0,))
        empty = cwd / "empty.py"
        empty.write_text("")
        startup = timed([sys.executable, "-c", LIBCST_PARSE, str(empty)], cwd, ok=(0,))[0]
    print(f"rewritten: {len(rewritten)} files, {rewritten_lines:,} lines")
    table([
        ("jaxmigrate --fix --unsafe-fixes", fixed, f"{fixed.seconds / reference.seconds:.1f}x the LibCST parse"),
        (f"libcst.parse_module of the {len(rewritten)} rewritten files", reference,
         f"reference (of which {startup:.2f} s starting Python and importing LibCST)"),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", choices=("jax", "corpus", "examples", "all"), default="all")
    parser.add_argument("--path", type=Path, help="fix (a copy of) this tree instead")
    parser.add_argument("--copies", type=int, default=40, help="copies of examples/legacy/")
    parser.add_argument("--jobs", type=int, help="passed to jaxmigrate --jobs [default: cores]")
    args = parser.parse_args(argv)

    print_load("before")
    if args.path:
        trees = [("tree", args.path.resolve(), 1)]
    else:
        trees = []
        if args.tree in ("jax", "all"):
            trees.append(("installed jax", jax_source_tree(), 1))
        if args.tree in ("corpus", "all"):
            trees.append(("legacy corpus", legacy_corpus(), 1))
        if args.tree in ("examples", "all"):
            trees.append(("examples/legacy", EXAMPLES, args.copies))
    for name, source, copies in trees:
        bench_tree(name, source, copies, args.runs, args.jobs)
    print()
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
