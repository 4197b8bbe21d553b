"""Programs where JM101's exact rewrite is offered (``jaxmigrate/migrate/_pmap_setting.py``): the
steps are built in the program's driver, run once from ``__main__``, and called with one slice per
device."""

from __future__ import annotations

import textwrap

SIZED_X = "x = jax.numpy.ones(jax.device_count() * 2).reshape((jax.device_count(), 2))"


def driven(body: str, head: str = "import jax\n", indent: str = "    ", newline: str = "\n") -> str:
    """``head``, then a driver ``main`` that binds ``x`` (one slice per device) and runs ``body``
    (dedented), called once from the ``__main__`` block."""
    lines = [SIZED_X, *textwrap.dedent(body).splitlines()]
    main = "".join(f"{indent}{line}{newline}" if line else newline for line in lines)
    return (f"{head}{newline}{newline}def main():{newline}{main}{newline}{newline}"
            f"if __name__ == \"__main__\":{newline}{indent}main(){newline}")


def line_of(text: str, start: str) -> int:
    """The first line of ``text`` that starts with ``start`` once indentation is stripped."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith(start))
