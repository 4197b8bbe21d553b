"""The `jaxmigrate` command and `python -m jaxmigrate`.

A console script imports its function's module before calling it; a Ctrl-C that lands while the
CLI is still being imported (its first 50 ms) printed a KeyboardInterrupt traceback and exited 1,
"findings remain". Here it exits 130, quietly, as a Ctrl-C during a run does (no file has been
touched yet).
"""

import sys

EXIT_INTERRUPTED = 130  # as jaxmigrate.cli's, which cannot be imported to read it here


def run() -> None:
    try:
        from jaxmigrate.cli import main
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    main()


if __name__ == "__main__":
    run()
