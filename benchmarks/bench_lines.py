"""Is the cost linear in file size? Check and fix generated pmap-dense files of growing length.

    python benchmarks/bench_lines.py [--sizes 1000,2000,3285,5000,10000,50000] [--runs 3]
    python benchmarks/bench_lines.py --write 3285 > dense.py     # just the file

Each file is legacy data-parallel code as it was written before JAX 0.4.31: blocks of 20 lines,
each with three pmap sites (a `functools.partial(jax.pmap, axis_name=...)` decorator, a bare
`@jax.pmap`, a `jax.pmap(lambda ...)` call), collectives over the mapped axis, a `jax.tree_map`,
a batch reshaped by the device count and a result read back with `[0]`. The generator is
deterministic: every size is the same blocks, more of them.

For each size: the median wall time of `jaxmigrate check --no-cache` and of
`jaxmigrate --fix --unsafe-fixes --no-cache` (a fresh copy per run), and the cost per line once the
same command's fixed cost (starting Python, importing, a 1-line file) is taken off: flat from the
smallest size to the largest means linear. The reference is `ast.parse` of the same file, per line
and peak memory: CPython's own parse is not quite flat either, and sets the memory floor.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _common import TimedOut, console_script, median_run, print_load, timed, warm_up

HEADER = '''\
"""Generated pmap-era data-parallel code (benchmarks/bench_lines.py)."""
import functools

import jax
import jax.numpy as jnp
from jax import lax

N_DEVICES = jax.local_device_count()
'''

BLOCK = '''

@functools.partial(jax.pmap, axis_name="batch")
def train_step_{i}(params, batch):
    grads = jax.tree_map(lambda p: p * 0.5 + {i}, params)
    grads = lax.pmean(grads, axis_name="batch")
    loss = lax.psum(jnp.sum(batch), axis_name="batch")
    return grads, loss


@jax.pmap
def double_{i}(x):
    return 2 * x + {i}


def evaluate_{i}(params, batch):
    step = jax.pmap(lambda p, b: jnp.sum(p["w"] * b), axis_name="d")
    per_device = batch.reshape((N_DEVICES, -1) + batch.shape[1:])
    out = step(params, per_device)
    return out[0]
'''


PARSE = "import ast, sys; ast.parse(open(sys.argv[1], encoding='utf-8').read())"


def dense_source(lines: int) -> str:
    """At least ``lines`` lines (whole blocks)."""
    header_lines, block_lines = HEADER.count("\n"), BLOCK.count("\n")
    blocks = max(1, -(-(lines - header_lines) // block_lines))
    return HEADER + "".join(BLOCK.format(i=i) for i in range(blocks))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,3285,5000,10000,50000",
                        help="comma-separated line counts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-fix", action="store_true", help="time check only")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a run is given up")
    parser.add_argument("--write", type=int, metavar="LINES", help="print a file of LINES lines and exit")
    args = parser.parse_args(argv)
    if args.write:
        sys.stdout.write(dense_source(args.write))
        return 0

    script = console_script("jaxmigrate")
    sizes = [int(s) for s in args.sizes.split(",")]
    print_load("before")
    print(f"median of {args.runs} runs; per line: (wall - the same command on a 1-line file) / lines")
    print(f"{'lines':>7}  {'pmap sites':>10}  {'check s':>8}  {'µs/line':>8}  {'peak MiB':>8}"
          + ("" if args.no_fix else f"  {'fix s':>8}  {'µs/line':>8}  {'peak MiB':>8}")
          + f"  {'ast.parse µs/line':>17}  {'peak MiB':>8}")
    with tempfile.TemporaryDirectory(prefix="jaxmigrate-bench-lines-") as tmp:
        cwd = Path(tmp)
        warm_up(cwd)
        tiny = cwd / "tiny.py"
        tiny.write_text("import jax\n")
        check = [script, "check", "--no-cache", "--output-format", "concise"]
        fix = [script, "--fix", "--unsafe-fixes", "--no-cache", "--output-format", "concise"]
        check_startup = min(timed([*check, str(tiny)], cwd)[0] for _ in range(3))
        fix_startup = min(timed([*fix, str(tiny)], cwd)[0] for _ in range(3))
        parse = [sys.executable, "-c", PARSE]
        parse_startup = min(timed([*parse, str(tiny)], cwd)[0] for _ in range(3))
        for lines in sizes:
            text = dense_source(lines)
            n_lines, sites = text.count("\n"), text.count("jax.pmap")
            path = cwd / "dense.py"
            path.write_text(text)
            row = f"{n_lines:7,}  {sites:10}  "
            try:
                checked = median_run([*check, str(path)], cwd, args.runs, timeout=args.timeout)
                row += (f"{checked.seconds:8.2f}  {1e6 * (checked.seconds - check_startup) / n_lines:8.1f}"
                        f"  {checked.peak_mib:8.0f}")
            except TimedOut:
                row += f"{'> ' + format(args.timeout, '.0f'):>8}  {'':8}  {'':8}"
            if not args.no_fix:
                try:
                    fixed = median_run([*fix, str(path)], cwd, args.runs, prepare=lambda: path.write_text(text),
                                       timeout=args.timeout)
                    row += (f"  {fixed.seconds:8.2f}  {1e6 * (fixed.seconds - fix_startup) / n_lines:8.1f}"
                            f"  {fixed.peak_mib:8.0f}")
                except TimedOut:
                    row += f"  {'> ' + format(args.timeout, '.0f'):>8}  {'':8}  {'':8}"
            parsed = median_run([*parse, str(path)], cwd, args.runs, prepare=lambda: path.write_text(text))
            row += f"  {1e6 * (parsed.seconds - parse_startup) / n_lines:17.1f}  {parsed.peak_mib:8.0f}"
            print(row, flush=True)
    print(f"fixed cost (a 1-line file): check {check_startup:.2f} s, fix {fix_startup:.2f} s")
    print_load("after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
