"""Which rules could fire on a text, decided from the text alone, before anything is parsed.

Two sound tests:

1. **Reach.** A rule's findings are about names it resolves (``jax.pmap``, ``jax.lax.psum``, ...),
   and the resolver can only produce a qualified name from an import: ``import jax`` binds
   ``jax``, ``from jax._src import core`` binds ``jax._src.core``. So a rule whose ``reach``
   names no module on the way to, and no name inside, anything those imports bind cannot fire:
   jax's own source says ``devices`` and ``tree_flatten`` everywhere but imports them from
   ``jax._src``: 151 of its 234 trigger-word files are skipped unparsed.
2. **Trigger words.** A rule fires only where one of its ``trigger_words`` is written (the text's
   words read once for all the selected rules), and, where the rule can tell more from the text,
   where one of those words is written the way the pattern needs it (``Rule.written``: a
   catalogue rule's ``round_`` must follow a ``.`` or be imported, its ``a_max`` be followed by
   ``=``; see ``lint/legacy.py``).

The imports are read with a regex over the import statements (each item checked to be a dotted
name, ``as`` an identifier, else the file is parsed). That is sound only if it sees every import:
each ``import`` keyword in the text must lie in a statement the regex matched or on a comment or
doctest line, else (an import after ``;``, in a one-line ``if``, after a backslash continuation,
prose in a docstring saying "import") the file is parsed whole, as before.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from jaxmigrate.config import DEFAULT_TARGET_JAX as TARGET
from jaxmigrate.program_modules import LIBRARIES

if TYPE_CHECKING:
    from jaxmigrate.lint.rule import Rule

# The word alone: a leading `\b` would cost re its fast literal scan (3x slower on jax's tree).
_IMPORT_WORD = re.compile(r"import\b")
# One import statement on lines of its own: `import a.b as c, d` or `from .m import x as y, z` or
# `from m import (` ... `)` over several lines (comments allowed inside); no `;`, no quotes, no
# backslash continuation (those files are parsed whole).
_IMPORT_STATEMENT = re.compile(
    r"""^[ \t]*(?:
        import[ \t]+(?P<modules>[^\n;#()\\'"]*?)
      | from(?P<module>[^\n;#()\\'"]*?)\bimport\b[ \t]*
        (?:\((?P<grouped>(?:[^()#'"\\]|\#[^\n]*)*)\)|(?P<names>[^\n;#()\\'"]*?))
    )[ \t]*(?:\#[^\n]*)?$""",
    re.MULTILINE | re.VERBOSE,
)
_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_COMMENT = re.compile(r"#[^\n]*")

# A line that starts with `#` is a comment or inside a string, one that starts with `>>>` (a
# doctest) inside a string: an `import` on either is no keyword. (A `#` later in a line may be
# inside a string, with a real `import` after it.)
_NOT_CODE = re.compile(r"[ \t]*(?:#|>>>)")


# A file's words: the trigger words it writes are those among them (`\bword\b` is a maximal run
# of word characters). One pass of this over a text costs about half of a regex alternation of the
# 342 trigger words, even one with their common prefixes factored out.
_WORDS = re.compile(r"\w+")


@cache
def _trigger_words(rules: tuple[type[Rule], ...], target_jax: tuple[int, int] = TARGET) -> frozenset[str]:
    return frozenset(word for rule in rules for word in rule.triggers(target_jax))


def rules_triggered(
    text: str, rules: tuple[type[Rule], ...], target_jax: tuple[int, int] = TARGET
) -> tuple[type[Rule], ...]:
    """The rules that could fire on ``text``: the file's imports reach one of the names they are
    about and one of their trigger words is written. Sound by construction of both. The imports
    are read first: on jax's own tree that costs less than reading the words and leaves them to
    be read in a quarter of the files."""
    imports = read_imports(text)
    reached = _reached(None if imports is None else imports.bound, rules)
    if not reached:
        return ()
    present = _trigger_words(rules, target_jax).intersection(_WORDS.findall(text))
    return tuple(rule for rule in reached if (words := present.intersection(rule.triggers(target_jax)))
                 and rule.written(text, frozenset(words), imports))


def rules_reached(text: str, rules: tuple[type[Rule], ...]) -> tuple[type[Rule], ...]:
    """The rules whose ``reach`` the text's imports reach (every rule, when they cannot be read):
    a bound name that is one of the reach, a module on the way to one (``jax`` reaches
    ``jax.lax.psum``) or a name inside one (``jax.experimental.maps.xmap`` is in the legacy
    module ``jax.experimental.maps``)."""
    return _reached(imported_names(text), rules)


def _reached(bound: frozenset[str] | None, rules: tuple[type[Rule], ...]) -> tuple[type[Rule], ...]:
    if bound is None:
        return rules
    towards, inside, always = _reach_index(rules)
    reached = set(always)
    for name in bound:
        reached.update(towards.get(name, ()))
        while "." in name:
            name = name.rpartition(".")[0]
            reached.update(inside.get(name, ()))
    return tuple(rule for rule in rules if rule in reached)


@cache
def _reach_index(rules: tuple[type[Rule], ...]):
    """(name -> the rules it is in the reach of or on the way to, name -> the rules it is in the
    reach of, the rules without a reach): a file's bound names are looked up, not compared."""
    towards: dict[str, set] = {}
    inside: dict[str, set] = {}
    always = []
    for rule in rules:
        reach = rule.reach_names()
        if reach is None:
            always.append(rule)
            continue
        for name in reach:
            inside.setdefault(name, set()).add(rule)
            while name:
                towards.setdefault(name, set()).add(rule)
                name = name.rpartition(".")[0]
    return towards, inside, always


@dataclass(frozen=True)
class Imports:
    """What a text's import statements bind: qualified names, and the local name of each."""

    bound: frozenset[str]
    local: dict[str, frozenset[str]]  # qualified name -> the local names bound to it
    statements: tuple[tuple[int, int], ...] = ()  # (start, end) of each import statement read
    star: bool = False  # a library's names star-imported (`from jax.numpy import *`): any name may be one
    # What the catalogue rules' second look found in this text (``lint/legacy.py``): several entries
    # ask the same of one file (`.core` written as a value, for each `jax.core.*` name).
    looked: dict = field(default_factory=dict, compare=False)

    def within(self, at: int) -> bool:
        """Whether text position ``at`` lies in an import statement (``jax.numpy`` in ``import
        jax.numpy as jnp`` binds ``jnp``, which ``local`` says: it makes no other name that)."""
        index = bisect.bisect_right(self.statements, (at, float("inf"))) - 1
        return index >= 0 and at < self.statements[index][1]


def imported_names(text: str) -> frozenset[str] | None:
    imports = read_imports(text)
    return None if imports is None else imports.bound


def read_imports(text: str) -> Imports | None:
    """The qualified names the text's import statements bind, as the resolver binds them, and the
    local name each is bound to
    (``import a.b`` binds ``a``; ``import a.b as c`` binds ``a.b``; ``from a import b`` binds
    ``a.b``; ``from a import *`` binds all of ``a``; relative imports bind nothing absolute);
    None when some ``import`` in the text is not in a statement read here."""
    bound: set[str] = set()
    local: dict[str, set[str]] = {}
    statements: list[tuple[int, int]] = []
    stars: set[str] = set()
    covered = 0  # the end of the last statement read: an `import` before it is inside it
    for keyword in _IMPORT_WORD.finditer(text):
        at = keyword.start()
        if at < covered or at and (text[at - 1].isalnum() or text[at - 1] == "_"):
            continue  # inside the statement just read, or `reimport`, `_import`: no keyword
        line = text.rfind("\n", 0, at) + 1
        if text[max(line - 3, 0):line].rstrip("\r\n").endswith("\\"):
            return None  # `from jax \` + `import pmap`: this line is not where the statement starts
        statement = _IMPORT_STATEMENT.match(text, line)
        if statement is not None and at < statement.end():
            if not _bind(statement, bound, local, stars):
                return None
            covered = statement.end()
            statements.append((statement.start(), covered))
        elif not _NOT_CODE.match(text, line):
            return None
    return Imports(frozenset(bound), {name: frozenset(names) for name, names in local.items()}, tuple(statements),
                   bool(stars))


def _bind(statement: re.Match, bound: set[str], local: dict[str, set[str]], stars: set[str]) -> bool:
    """Add what one import statement binds; False when it is not one (prose the regex matched), or
    when what it binds cannot be read from the text: ``from utils import *`` of a module that is no
    library this tool knows binds whatever ``utils.py`` imports (``jax`` itself)."""
    if statement["modules"] is not None:  # import a.b as c, d
        for item in statement["modules"].split(","):
            name = _imported(item)
            if name is None or name[0] == "*":
                return False
            qualified = name[0] if name[1] else name[0].partition(".")[0]
            bound.add(qualified)
            local.setdefault(qualified, set()).add(name[2] if name[1] else qualified)
        return True
    module = statement["module"]
    if not module[:1].isspace() or not module[-1:].isspace():
        return False  # `fromx import`, `from ximport`
    module = module.strip()
    star = statement["names"] is not None and statement["names"].strip() == "*"
    if star and (module.startswith(".") or module.partition(".")[0] not in LIBRARIES):
        return False
    if module.startswith("."):
        return True  # relative: binds nothing the rules look for
    if not _DOTTED.fullmatch(module):
        return False
    grouped = statement["grouped"]
    items = (_COMMENT.sub("", grouped) if grouped is not None else statement["names"]).split(",")
    if grouped is not None and len(items) > 1 and not items[-1].strip():
        items.pop()  # `(a, b,)`
    for item in items:
        name = _imported(item)
        if name is None:
            return False
        bound.add(module if name[0] == "*" else f"{module}.{name[0]}")
        if name[0] == "*":
            stars.add(module)
        else:
            local.setdefault(f"{module}.{name[0]}", set()).add(name[2] if name[1] else name[0].partition(".")[0])
    return True


def _imported(item: str) -> tuple[str, bool, str] | None:
    """(name, renamed, alias) of one ``name`` / ``name as alias`` / ``*``; None when it is neither."""
    words = item.split()
    if words == ["*"]:
        return "*", False, ""
    if len(words) == 1 and _DOTTED.fullmatch(words[0]):
        return words[0], False, ""
    if len(words) == 3 and words[1] == "as" and _DOTTED.fullmatch(words[0]) and words[2].isidentifier():
        return words[0], True, words[2]
    return None
