"""Base classes for rules driven by the legacy-symbol catalogue (``symbols.toml``).

Reporting follows ruff's banned-api model: one finding per textual mention of a legacy name —
each import alias that imports it, each attribute chain that reaches it, each bare name that only
a star import can have bound. A name bound by an explicit import is not reported again where it
is used (the import already was), and a rebinding (``pm = jax.pmap``) is reported where the legacy
name is written, not where ``pm`` is called. Every decision goes through the one resolver, so a
local ``def pmap``, a parameter named ``jax`` or ``self.pmap`` is never mistaken for jax's.

Subclasses set ``code`` (which selects their catalogue entries) and the usual Rule attributes. A
fix is the finding's: a rule overrides ``fix_for`` (edits, or a codemod for the mention), or mixes
in ``site_fixes.SiteFixes``, whose codemod plans every reported site and says why where it cannot.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from typing import TYPE_CHECKING

from jaxmigrate import catalogue
from jaxmigrate.catalogue import Symbol
from jaxmigrate.core.fallbacks import catches_import_error
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.rule import Fix, Rule
from jaxmigrate.names import LOCAL, Target

if TYPE_CHECKING:
    from jaxmigrate.lint.prefilter import Imports

def describe(symbol: Symbol, shown: str, ctx: FileContext, ambiguous: bool = False) -> str:
    message = f"`{shown}` {symbol.status(ctx.target_jax)}"
    if symbol.note:
        message += f" ({symbol.note})"
    message += f"; use {symbol.replacement}"
    if ambiguous:
        message += " [ambiguous: the name may also refer to a local definition]"
    return message


class _CatalogueWords:
    """A catalogue rule's ``trigger_words``, read from the catalogue when first asked: loading it
    (``symbols.toml``) was a tenth of a run that finds every file in the cache and needs none."""

    def __get__(self, instance, owner) -> tuple[str, ...]:
        return catalogue.trigger_words(owner.code)


class CatalogueRule(Rule):
    """Shared state and messages; no ``code`` here, so the registry does not list this class."""

    trigger_words = _CatalogueWords()

    def __init__(self) -> None:
        # Imports in `except ImportError:` handlers are compatibility fallbacks, not legacy use.
        self._fallback_imports: set[int] = set()

    @classmethod
    def reach_names(cls) -> frozenset[str]:
        """Every name of this rule's catalogue entries (a keyword's callees, a context manager's
        constructors), and ``reach``, if the rule adds any."""
        if "_reach_names" not in cls.__dict__:
            symbols = catalogue.for_code(cls.code)
            names = {name for s in symbols for name in (*s.names, *s.constructors)}
            cls._reach_names = frozenset(names | set(cls.reach or ()))
        return cls._reach_names

    @classmethod
    def written(cls, text: str, words: frozenset[str], imports: Imports | None) -> bool:
        tests = catalogue.trigger_tests(cls.code)
        for word in words:
            for kind, value in tests.get(word, (("any", ""),)):  # a word the rule adds itself
                if kind == "any" or _written(kind, value, text, imports):
                    return True
        return False

    def symbol(self, qualname: str, ctx: FileContext) -> Symbol | None:
        found = catalogue.lookup(qualname)
        if found is None or found.code != self.code or not found.applies_to(ctx.target_jax):
            return None
        return found

    def fix_for(self, symbol: Symbol, node: ast.AST, ctx: FileContext) -> Fix | None:
        """The fix for this mention of ``symbol``; None: reported without one."""
        return None

    # ast.walk is breadth-first, so a Try is always seen before the imports nested in it.
    def visit_Try(self, node: ast.Try, ctx: FileContext) -> None:
        for handler in node.handlers:
            if catches_import_error(handler.type):
                for stmt in handler.body:
                    for sub in ast.walk(stmt):
                        if isinstance(sub, (ast.Import, ast.ImportFrom)):
                            self._fallback_imports.add(id(sub))

    visit_TryStar = visit_Try

    def report(self, node: ast.AST, symbol: Symbol, shown: str, ctx: FileContext, ambiguous=False):
        ctx.report(node, describe(symbol, shown, ctx, ambiguous), self.fix_for(symbol, node, ctx))


class LegacyNameRule(CatalogueRule):
    """Reports every mention of this rule's catalogue names (functions, classes, modules)."""

    def __init__(self) -> None:
        super().__init__()
        self._covered: set[int] = set()  # inner links of an attribute chain already reported
        self._last_names = _last_names_of(self.code)

    def visit_Import(self, node: ast.Import, ctx: FileContext) -> None:
        if id(node) in self._fallback_imports:
            return
        for alias in node.names:
            if symbol := self.symbol(alias.name, ctx) or self._import_only(alias.name, ctx):
                self.report(alias, symbol, alias.name, ctx)

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: FileContext) -> None:
        if node.level or not node.module or id(node) in self._fallback_imports:
            return
        for alias in node.names:
            qualname = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
            symbol = self.symbol(qualname, ctx)
            if symbol and (alias.name != "*" or symbol.kind == "module"):
                self.report(alias, symbol, qualname, ctx)
            elif symbol is None and (gone := self._import_only(node.module, ctx)):
                self.report(alias, gone, node.module, ctx)  # `from jax.config import flags`

    def _import_only(self, module: str, ctx: FileContext) -> Symbol | None:
        """The ``import``-kind entry of this rule for a module an import statement names."""
        found = catalogue.import_only(module)
        if found is None or found.code != self.code or not found.applies_to(ctx.target_jax):
            return None
        return found

    def check_module(self, ctx: FileContext) -> None:
        # Only the nodes that spell one of this rule's names, from the file's shared index, in
        # walk order (an outer attribute before the chain inside it): visiting every Attribute
        # and Name of the file, rule after rule, was the costliest part of checking.
        # A bare name is only reported when a star import brought it in (see _name): without one,
        # the file's Names need not even be indexed by identifier, nor the resolver built when no
        # attribute spells one of the names (the common case once the catalogue is large).
        indexes = (ctx.attributes_at, ctx.names_at) if _star_import(ctx) else (ctx.attributes_at,)
        wanted = [item for name in self._last_names for index in indexes for item in index.get(name, ())]
        for _, node in sorted(wanted, key=_position):
            if isinstance(node, ast.Attribute):
                self._attribute(node, ctx)
            else:
                self._name(node, ctx)

    def _attribute(self, node: ast.Attribute, ctx: FileContext) -> None:
        if id(node) in self._covered or not isinstance(node.ctx, ast.Load):
            return
        found = self._legacy(ctx.names.resolve(node), ctx)
        if found is None:
            return
        base = node.value
        while isinstance(base, ast.Attribute):
            self._covered.add(id(base))
            base = base.value
        symbol, shown, ambiguous = found
        # `maps.xmap` after `from jax.experimental import maps`: the import was the mention.
        if isinstance(base, ast.Name) and catalogue.reported_at_import(
                [t.name for t in ctx.names.resolve(base) if t.name != LOCAL], symbol):
            return
        self.report(node, symbol, shown, ctx, ambiguous)

    def _name(self, node: ast.Name, ctx: FileContext) -> None:
        # Only a star import can bind a name without a binding the resolver sees.
        if not isinstance(node.ctx, ast.Load):
            return
        if ctx.names.bindings(node):
            return
        found = self._legacy(ctx.names.resolve(node), ctx)
        if found is not None:
            symbol, shown, ambiguous = found
            self.report(node, symbol, shown, ctx, ambiguous)

    def _legacy(self, targets: tuple[Target, ...], ctx: FileContext):
        """(symbol, shown name, ambiguous) of the first legacy candidate, or None."""
        for target in targets:
            if target.name != LOCAL and not target.partials:
                if symbol := self.symbol(target.name, ctx):
                    return symbol, target.name, len({t.name for t in targets}) > 1
        return None


class LegacyKeywordRule(CatalogueRule):
    """Reports each legacy keyword argument written in a call to (or a partial of) its callee."""

    def visit_Call(self, node: ast.Call, ctx: FileContext) -> None:
        if not any(kw.arg in self._keywords for kw in node.keywords):
            return
        table = catalogue.keywords(self.code)
        callees = {t.name for t in ctx.names.resolve(node.func) if t.name in table}
        # `partial(pjit, in_axis_resources=...)`: the keyword is written in the partial call.
        callees |= {
            t.name
            for t in ctx.names.resolve(node)
            if t.partials and t.partials[0] is node and t.name in table
        }
        for keyword in node.keywords:
            for callee in sorted(callees):
                symbol = table[callee].get(keyword.arg)
                if symbol and symbol.applies_to(ctx.target_jax):
                    self.report(keyword, symbol, f"{keyword.arg}=", ctx)
                    break

    @property
    def _keywords(self) -> frozenset[str]:
        return _keywords_of(self.code)


# How each kind of trigger test reads a text (sound: each way the resolver can reach the name
# passes one of the tests). A mention of `P.w` (P the parent, `p` its last component) is:
#   an import that binds `P.w` or a name inside it (`from P import w`, `import P.w as x`);
#   `m.w` where an import binds `m` to P (`import jax.numpy as jnp; jnp.round_`);
#   `p.w` written out (`jax.lax.prod`, `import jax.lax` then `jax.lax.prod`, `J.lax.prod`);
#   a bare `w` a star import brought in;
#   `.w` on a name some assignment made P (`L = jax.lax; L.prod`): `.p` is then written with no
#   `.` after it.
# Around a dot, inside brackets, there may be whitespace, a backslash, a newline and comments.
# The texts are searched with str.find and short scans, not with regexes that start at every `.`
# (those cost 3 ms a file, ten times the whole pre-filter).
_WORD_CHAR = re.compile(r"\w")


def _occurrences(text: str, word: str):
    """Start of each whole-word occurrence of ``word``."""
    at = text.find(word)
    while at != -1:
        end = at + len(word)
        if not (at and _WORD_CHAR.match(text, at - 1)) and not (end < len(text) and _WORD_CHAR.match(text, end)):
            yield at
        at = text.find(word, at + 1)


def _previous(text: str, at: int) -> list[int]:
    """Where the last character of code before ``at`` is, across spaces, backslashes, line breaks
    and comments; two places where a line has a `#` (a comment, or a `#` in a string)."""
    j = at - 1
    while j >= 0:
        if text[j] in " \t\f\r\\":
            j -= 1
        elif text[j] == "\n":
            line_start = text.rfind("\n", 0, j) + 1
            line = text[line_start:j]
            found = []
            if "#" in line and (code := line[:line.index("#")].rstrip()):
                found.append(line_start + len(code) - 1)
            if line.strip():
                found.append(line_start + len(line.rstrip()) - 1)
                return found
            j = line_start - 1
        else:
            return [j]
    return []


_GAP = re.compile(r"(?:[ \t\f\r\n\\]|#[^\n]*)*")


def _after(text: str, at: int) -> str:
    """The first character of code from ``at`` on, across the same."""
    end = _GAP.match(text, at).end()
    return text[end:end + 1]


def _attribute(text: str, word: str, parent: str | None = None, dotted: bool = False) -> bool:
    """``.word`` is written (``parent.word``, when ``parent`` is given; ``<...>.parent.word``, with
    ``dotted``)."""
    for at in _occurrences(text, word):
        for dot in _previous(text, at):
            if text[dot] == "." and (parent is None or _ends_with_word(text, _previous(text, dot), parent, dotted)):
                return True
    return False


def _ends_with_word(text: str, ends: list[int], word: str, dotted: bool = False) -> bool:
    for end in ends:
        start = end + 1 - len(word)
        if start >= 0 and text[start:end + 1] == word and not (start and _WORD_CHAR.match(text, start - 1)) \
                and (not dotted or any(text[j] == "." for j in _previous(text, start))):
            return True
    return False


def _keyword(text: str, word: str) -> bool:
    """``word=`` as a keyword argument: after `(` or `,`, before `=` (not `==`); `x = 1` is not."""
    for at in _occurrences(text, word):
        rest = _GAP.match(text, at + len(word)).end()
        if text[rest:rest + 1] == "=" and text[rest + 1:rest + 2] != "=" and any(
                text[j] in "(," for j in _previous(text, at)):
            return True
    return False


def _import_path(text: str, path: str) -> bool:
    """``path`` written not followed by a dot (`import jax.config`, not `jax.config.update`)."""
    return any(_after(text, at + len(path)) != "." for at in _occurrences(text, path))


def _rebound(text: str, name: str, imports: Imports) -> bool:
    """``.name`` written as a value, with no dot after it (`L = jax.lax`), outside the import
    statements (`import jax.lax as L` binds `L`, which ``imports.local`` already says). (The dot
    after is looked for first: most mentions of a module are `core.x`.)"""
    key = ("rebound", name)
    if key not in imports.looked:
        imports.looked[key] = any(_after(text, at + len(name)) != "." and not imports.within(at)
                                  and any(text[j] == "." for j in _previous(text, at))
                                  for at in _occurrences(text, name))
    return imports.looked[key]


def _written(kind: str, value: str, text: str, imports: Imports | None) -> bool:
    if kind == "keyword":
        return _keyword(text, value)
    if kind == "call-keyword":
        callee, _, keyword = value.partition("(")
        return _keyword(text, keyword.rstrip("=")) and _written("name", callee, text, imports)
    if kind == "import":
        return _import_path(text, value)
    if imports is None or imports.star:
        return True
    parent, _, last = value.rpartition(".")
    if value in imports.bound or any(name.startswith(value + ".") for name in imports.bound):
        return True
    parent_last = parent.rpartition(".")[2]
    # `core.Primitive` where an import binds `core` to another module (jax's own
    # `from jax._src import core`) is not `jax.core.Primitive`; `jax.core.Primitive` written out is.
    shadowed = any(parent_last in names for qualified, names in imports.local.items() if qualified != parent)
    owners = {*imports.local.get(parent, ()), *(() if shadowed else (parent_last,))} - {""}
    if any(_attribute(text, last, owner) for owner in owners):
        return True
    if shadowed and _attribute(text, last, parent_last, dotted=True):
        return True
    # (`.last` anywhere is asked first: it is rarer than the parent's name)
    key = ("attribute", last)
    if key not in imports.looked:
        imports.looked[key] = _attribute(text, last)
    return imports.looked[key] and (not parent or _rebound(text, parent_last, imports))


def _star_import(ctx: FileContext) -> bool:
    return any(alias.name == "*" for _, node in ctx.by_type.get(ast.ImportFrom, ()) for alias in node.names)


@cache
def _last_names_of(code: str) -> frozenset[str]:
    return frozenset(name.rpartition(".")[2] for symbol in catalogue.for_code(code)
                     if symbol.kind in catalogue.NAMED_KINDS for name in symbol.names)


@cache
def _keywords_of(code: str) -> frozenset[str]:
    return frozenset(s.keyword for s in catalogue.for_code(code) if s.kind == "keyword")


def _position(item: tuple[int, ast.AST]) -> int:
    return item[0]

