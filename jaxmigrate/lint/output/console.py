"""The rich Console every human-facing renderer prints through."""

from __future__ import annotations

import errno
import os

from rich.console import Console as RichConsole


class Console(RichConsole):
    """A rich Console that lets a closed pipe (`jaxmigrate src/ | head -1`) reach the CLI, which
    stops quietly with exit 0 for every format alike. Rich's own handling exits 1, which here
    means "findings remain"."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
