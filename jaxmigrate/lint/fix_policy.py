"""Which fixes a project allows, and how far it trusts them: ruff's ``fixable`` / ``unfixable``
and ``extend-safe-fixes`` / ``extend-unsafe-fixes``, by rule code or prefix (the longest wins).

Applied to the findings themselves, where they are made (``lint/checker.py``), so that every
consumer agrees: a finding offers a fix exactly when ``--fix`` applies it, and shows the safety
``--fix`` judges it by. The policy of the running fix or check is set with ``applied`` (a context
variable, as the line width is): the engine sets it per file, in whatever process runs it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Iterator

from jaxmigrate.lint.findings import Finding, Fix, Safety


@dataclass(frozen=True)
class FixPolicy:
    fixable: tuple[str, ...] = ("ALL",)
    unfixable: tuple[str, ...] = ()
    extend_safe: tuple[str, ...] = ()
    extend_unsafe: tuple[str, ...] = ()

    @property
    def is_default(self) -> bool:
        return self == FixPolicy()

    def finding(self, finding: Finding) -> Finding:
        """The finding with its fix as this policy has it: none, or every fix of the chain with
        the safety the project gives its rule."""
        if finding.fix is None:
            return finding
        if _longest(finding.code, self.unfixable) >= _longest(finding.code, self.fixable):
            return replace(finding, fix=None)
        safe, unsafe = _longest(finding.code, self.extend_safe), _longest(finding.code, self.extend_unsafe)
        if safe < 0 and unsafe < 0:
            return finding
        # The more specific selector wins; on a tie, the more careful one (as ruff).
        return replace(finding, fix=_with_safety(finding.fix, Safety.SAFE if safe > unsafe else Safety.UNSAFE))


def _with_safety(fix: Fix, safety: Safety) -> Fix:
    fallback = _with_safety(fix.fallback, safety) if fix.fallback is not None else None
    return replace(fix, safety=safety, fallback=fallback)


def _longest(code: str, selectors: tuple[str, ...]) -> int:
    """The length of the longest selector that ``code`` starts with (ALL: 0); -1 when none."""
    return max((0 if s == "ALL" else len(s) for s in selectors if s == "ALL" or code.startswith(s)), default=-1)


_POLICY: ContextVar[FixPolicy | None] = ContextVar("fix_policy", default=None)


@contextmanager
def applied(policy: FixPolicy | None) -> Iterator[None]:
    token = _POLICY.set(policy)
    try:
        yield
    finally:
        _POLICY.reset(token)


def current() -> FixPolicy | None:
    policy = _POLICY.get()
    return None if policy is None or policy.is_default else policy
