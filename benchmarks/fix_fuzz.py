"""A longer run of the property test of the fixers (tests/test_fix_properties.py): many generated
modules using the legacy APIs in awkward shapes, each fixed with and without --unsafe-fixes.

    python benchmarks/fix_fuzz.py [--examples 1000] [--seed 0] [--show 2]

The modules and the properties are tests/legacy_modules.py's: no JM001, the output parses, a second
fix is a no-op, sentinel lines away from the sites, the BOM and the line endings kept, no new
undefined name and no legacy import left unused (pyflakes), every finding with no fix to apply still
reported where its line was not rewritten. Prints how many modules broke which property (with the
first example of each), the modules per second, and the load average before and after. In-process
(no console script): it measures the fixers, not start-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from legacy_modules import modules, violations  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=2, help="examples printed per broken property")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    broken: Counter = Counter()
    shown: dict[str, list[str]] = {}
    counted = {"modules": 0, "lines": 0, "bad": 0}

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(modules())
    def fuzz(module):
        counted["modules"] += 1
        counted["lines"] += module.text.count("\n")
        bad = False
        for unsafe in (False, True):
            for problem in violations(module, unsafe):
                kind = problem.split(":")[0]
                broken[kind] += 1
                bad = True
                if len(shown.setdefault(kind, [])) < args.show:
                    shown[kind].append(f"{'--unsafe-fixes' if unsafe else '--fix'}: {problem}\n{module.text}")
        counted["bad"] += bad

    start = time.perf_counter()
    fuzz()
    elapsed = time.perf_counter() - start
    n = counted["modules"]
    print(f"{n} modules ({counted['lines']} lines), each fixed twice (--fix, --fix --unsafe-fixes) and again:"
          f" {elapsed:.1f} s, {n / elapsed:.1f} modules/s")
    print(f"modules breaking a property: {counted['bad']}")
    for kind, count in broken.most_common():
        print(f"\n{count:5d}  {kind}")
        for text in shown[kind]:
            print("       " + text.replace("\n", "\n       "))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if counted["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
