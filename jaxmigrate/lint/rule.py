"""The vocabulary every rule speaks: Rule, Finding, Fix, Edit, Safety and the rule's own examples.

Rules work on the standard library's ``ast`` rather than on a LibCST tree: a LibCST parse of a large
tree costs ~20x an ``ast`` parse, and detection is the hot path of every pre-commit and CI run.
Fixes are text edits at exact source offsets (as ruff's are), so formatting and comments around a
fix survive untouched; the whole-module codemods in ``jaxmigrate.migrate`` produce such edits too.
"""

from __future__ import annotations

import ast
import enum
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Collection, Iterable

from jaxmigrate.core.edits import Edit

if TYPE_CHECKING:
    from jaxmigrate.lint.context import FileContext


class Safety(str, enum.Enum):
    """How much a fix may be trusted to keep the program's meaning."""

    SAFE = "safe"
    # May change numerics, RNG streams, collectives or device placement: applied only on request.
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Fix:
    """A fix is either text edits, or a whole-module codemod named ``"module:function"``.

    A codemod is called as ``function(text, sites) -> new_text`` where ``sites`` holds the
    (line, column) of every finding whose fix is being applied in this pass, so it rewrites those
    and nothing the user suppressed. Codemods let a fix add imports and module-level helpers, and
    they run only when fixing: detection never pays for a LibCST parse.

    ``fallback`` is the fix to use instead when this one is not allowed (an unsafe fix without
    ``--unsafe-fixes``) or was rejected: JM101 offers the global view (unsafe) with the exact
    rewrite (safe) behind it. Reports (JSON, SARIF) show the fix itself, the first of the chain.
    """

    safety: Safety
    message: str
    edits: tuple[Edit, ...] = ()
    codemod: str | None = None
    fallback: "Fix | None" = None

    def __post_init__(self) -> None:
        if bool(self.edits) == bool(self.codemod):
            raise ValueError("a fix has either edits or a codemod, not both and not neither")
        spans = sorted(self.edits)
        for before, after in zip(spans, spans[1:]):
            if after.start < before.end:
                raise ValueError(f"overlapping edits in one fix: {before} and {after}")

    def allowed(self, safeties: Collection[Safety]) -> "Fix | None":
        """The first fix of the chain (this one, its fallback, ...) of one of these safeties."""
        fix: Fix | None = self
        while fix is not None and fix.safety not in safeties:
            fix = fix.fallback
        return fix


@dataclass(frozen=True)
class Finding:
    """One reported problem. Lines and columns are 1-based; columns count characters."""

    code: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix: Fix | None = None
    # For notebooks: the 1-based cell number; line and end_line then count within that cell.
    cell: int | None = None

    @property
    def location(self) -> str:
        """``path:line:col``, or ``path:cell N:line:col`` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.message)

    def to_dict(self) -> dict:
        cell = {} if self.cell is None else {"cell": self.cell}
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "fix": None
            if self.fix is None
            else {"safety": self.fix.safety.value, "message": self.fix.message},
            **cell,
        }


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


@dataclass
class _Reported:
    node: ast.AST
    message: str
    fix: Fix | None = None
    code: str | None = None
    extra: dict = field(default_factory=dict)


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
    # Which JAX version changed the thing this rule is about ("deprecated in X, removed in Y"),
    # shown by `jaxmigrate explain`.
    jax_versions: ClassVar[str] = ""
    fixable: ClassVar[Safety | None] = None  # the strongest fix this rule can offer, for docs
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def check_module(self, ctx: "FileContext") -> Iterable[None] | None:  # pragma: no cover
        """Whole-module analysis; override when node-by-node visiting does not fit."""
        return None

    @classmethod
    def triggers(cls, target_jax: tuple[int, int]) -> tuple[str, ...]:
        """The trigger words that matter when migrating to ``target_jax``: ``trigger_words``,
        unless a clause of the rule applies to some targets only (see JM502)."""
        return cls.trigger_words

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
