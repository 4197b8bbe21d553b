"""A rule: the base class every rule is, and the VALID / INVALID examples it carries.

Rules work on the standard library's ``ast`` rather than on a LibCST tree: a LibCST parse of a large
tree costs ~20x an ``ast`` parse, and detection is the hot path of every pre-commit and CI run.
Fixes are text edits at exact source offsets (as ruff's are), so formatting and comments around a
fix survive untouched; the whole-module codemods in ``jaxmigrate.migrate`` produce such edits too.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterable

from jaxmigrate.core.edits import Edit
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.findings import Finding, Fix, Safety

if TYPE_CHECKING:
    from jaxmigrate.lint.prefilter import Imports

__all__ = ["Edit", "Finding", "Fix", "Invalid", "Rule", "Safety", "Valid"]


@dataclass(frozen=True)
class Invalid:
    """An example a rule must flag: ``code`` is the snippet, ``expected`` the code it should
    become with this rule's fixes applied (unsafe ones included), or None when there is no fix."""

    code: str
    expected: str | None = None
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", textwrap.dedent(self.code).lstrip("\n"))
        if self.expected is not None:
            object.__setattr__(self, "expected", textwrap.dedent(self.expected).lstrip("\n"))


@dataclass(frozen=True)
class Valid:
    """An example a rule must leave alone (near-misses: shadowing, look-alike names, modern APIs)."""

    code: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", textwrap.dedent(self.code).lstrip("\n"))


class Rule:
    """Base class of every rule.

    A subclass sets the class attributes below, writes its explanation as the class docstring in
    ruff's sections (What it does / Why is this bad / Example / Use instead / Fix safety /
    References), and implements ``visit_<AstNodeType>(self, node, ctx)`` methods and/or
    ``check_module(self, ctx)``. The engine walks each tree once and dispatches every node to the
    rules that visit its type. Findings are reported with ``ctx.report(node, message, fix=...)``.
    """

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, names the pattern (legacy-pjit), not the remedy
    summary: ClassVar[str]  # one line
    # Words one of which must appear in a file's text for this rule to possibly fire. The
    # pre-filter skips a file that contains none of the selected rules' words, so these must be
    # sound: every way of writing the pattern names at least one of them literally.
    trigger_words: ClassVar[tuple[str, ...]] = ()
    # The qualified names the findings are about (the callees, classes and modules the rule
    # resolves). The pre-filter skips a file whose imports bind none of them, no module on the
    # way to one and no name inside one, so these must be sound too: every finding resolves some
    # node to one of them or to a name inside one. None: findings that need no import.
    reach: ClassVar[tuple[str, ...] | None] = None
    # Which JAX version changed the thing this rule is about ("deprecated in X, removed in Y"),
    # shown by `jaxmigrate explain`.
    jax_versions: ClassVar[str] = ""
    fixable: ClassVar[Safety | None] = None  # the safety of this rule's fix where nothing makes it less safe
    # Set on a rule whose fix is safe in general but unsafe at some sites (the finding says why):
    # `rules` and `explain` then say "safe or unsafe". The suite checks this against the findings
    # of the rule's examples and fixtures, both ways (tests/test_rules_examples.py).
    sometimes_unsafe: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def check_module(self, ctx: FileContext) -> Iterable[None] | None:  # pragma: no cover
        """Whole-module analysis; override when node-by-node visiting does not fit."""
        return None

    @classmethod
    def fix_safeties(cls) -> tuple[Safety, ...]:
        """Every safety a fix of this rule (or its fallback) can have, safest first."""
        if cls.fixable is None:
            return ()
        return (Safety.SAFE, Safety.UNSAFE) if cls.sometimes_unsafe else (cls.fixable,)

    @classmethod
    def fix_label(cls) -> str:
        """What `rules` and `explain` say about the fix: none, safe, unsafe, or safe or unsafe."""
        return " or ".join(safety.value for safety in cls.fix_safeties()) or "none"

    @classmethod
    def triggers(cls, target_jax: tuple[int, int]) -> tuple[str, ...]:
        """The trigger words that matter when migrating to ``target_jax``: ``trigger_words``,
        unless a clause of the rule applies to some targets only (see JM502)."""
        return cls.trigger_words

    @classmethod
    def applies(cls, target_jax: tuple[int, int], from_jax: tuple[int, int] | None) -> bool:
        """Whether the rule can report anything when code written for ``from_jax`` (None: not
        known) is migrated to ``target_jax``; False keeps the pre-filter from parsing for it."""
        return True

    @classmethod
    def written(cls, text: str, words: frozenset[str], imports: Imports | None) -> bool:
        """A second look, as sound as the first, at a text that says some of this rule's trigger
        ``words``: False only when none of the ways of writing the pattern is in it. ``imports``
        is what the text's imports bind (None: not known)."""
        return True

    @classmethod
    def reach_names(cls) -> frozenset[str] | None:
        if "_reach_names" not in cls.__dict__:
            cls._reach_names = None if cls.reach is None else frozenset(cls.reach)
        return cls._reach_names

    @classmethod
    def explanation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def visited_types(cls) -> dict[str, str]:
        """Map of ast node type name -> method name, from the ``visit_*`` methods defined."""
        if "_visited_types" not in cls.__dict__:
            cls._visited_types = {
                attr[len("visit_"):]: attr
                for attr in dir(cls)
                if attr.startswith("visit_") and callable(getattr(cls, attr))
                and hasattr(ast, attr[len("visit_"):])
            }
        return cls._visited_types
