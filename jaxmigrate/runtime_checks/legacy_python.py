"""``python -m jaxmigrate.runtime_checks.legacy_python [VERSION] [REQUIREMENT...]``: make (or reuse)
the cached venv with an old JAX (``legacy_env``) and print its interpreter, the value
``jaxmigrate verify --old-python`` wants. Exit 1, with the reason, when it cannot be made.

A module of its own rather than a ``main`` in ``legacy_env``: the package imports ``legacy_env``, and
``python -m`` on a module its package already imported warns that the run may be unpredictable.
"""

from __future__ import annotations

import argparse
import sys

from jaxmigrate.runtime_checks.legacy_env import make_legacy_env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jaxmigrate.runtime_checks.legacy_python",
        description="Make (or reuse) a cached venv with an old JAX and print its python, for"
        " `jaxmigrate verify --old-python`.",
    )
    parser.add_argument("version", nargs="?", default="0.4.30", help="jax version (default: 0.4.30)")
    parser.add_argument("requirements", nargs="*", help="the legacy code's own pins, e.g. flax==0.8.5")
    args = parser.parse_args(argv)
    env = make_legacy_env(args.version, packages=tuple(args.requirements))
    if env.python is None:
        print(f"error: {env.reason}", file=sys.stderr)
        return 1
    print(env.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
