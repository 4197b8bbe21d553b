"""``jax.experimental.pjit.pjit`` becomes ``jax.jit`` where that is the same program (JM201, JM202).

::

    from jax.experimental.pjit import pjit

    with mesh:                      # mesh = Mesh(devices, ("x",))
        step = pjit(f, in_shardings=P("x"), out_shardings=None)
        y = step(x)
    # becomes
    import jax
    from jax.sharding import NamedSharding

    with mesh:
        step = jax.jit(f, in_shardings=NamedSharding(mesh, P("x")), out_shardings=NamedSharding(mesh, P()))
        y = step(x)

Every form the resolver follows is rewritten: ``pjit`` / ``pj`` imported from
``jax.experimental.pjit``, ``pjm.pjit`` after ``import jax.experimental.pjit as pjm``, the full
attribute chain, ``@pjit`` and ``@partial(pjit, ...)``. Positional in/out shardings become keywords
(jit takes them as keywords only), ``in_axis_resources=`` / ``out_axis_resources=`` become
``in_shardings=`` / ``out_shardings=``; the user's alias of jax is kept, ``import jax`` and
``NamedSharding`` / ``PartitionSpec`` imports are added once (LibCST's import visitors), and the pjit
import goes when nothing uses it any more. What is safe, unsafe or kept, and why, is in
``_pjit_sites``; ``analyse_pjit`` says it per site.
"""

from __future__ import annotations

from collections.abc import Collection

from jaxmigrate.migrate._pjit_sites import PjitSite, plan_pjit
from jaxmigrate.core.module import parse_module
from jaxmigrate.migrate._plan import Plan, apply

__all__ = ["PjitSite", "analyse_pjit", "fix_safe", "fix_unsafe", "plan_pjit", "rewrite_pjit"]


def analyse_pjit(text: str) -> list[PjitSite]:
    """Every pjit application: rewritable (safely, or with an ``assumption``) or kept for a ``reason``."""
    return _run(text, None, unsafe=True)[1]


def rewrite_pjit(text: str, sites: Collection[tuple[int, int]] | None = None, unsafe: bool = False) -> str:
    """Rewrite the safe applications (and the unsafe ones with ``unsafe``) that stem from the pjit
    mentions at ``sites`` (1-based line and character column, where JM201 reports); None: all."""
    return _run(text, sites, unsafe)[0]


def fix_safe(text: str, sites: Collection[tuple[int, int]]) -> str:
    """JM201's safe codemod."""
    return rewrite_pjit(text, sites)


def fix_unsafe(text: str, sites: Collection[tuple[int, int]]) -> str:
    """JM201's unsafe codemod (applied only with ``--unsafe-fixes``)."""
    return rewrite_pjit(text, sites, unsafe=True)


def _run(text: str, sites, unsafe: bool) -> tuple[str, list[PjitSite]]:
    module = parse_module(text)
    if module is None:
        return text, []
    plan = Plan()
    found = plan_pjit(module, plan, None if sites is None else frozenset(sites), unsafe)
    del module  # the tree goes before the result is parsed (``apply``)
    return apply(text, plan), found
