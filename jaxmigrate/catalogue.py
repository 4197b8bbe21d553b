"""The catalogue of legacy JAX symbols (``symbols.toml``) and the look-ups rules make in it.

The table is data so that a version correction or a new alias is a one-line change reviewed against
JAX's changelog, not a code change; rules only decide *where* a name is mentioned.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

# Symbols a name or an attribute chain can mention; keywords and context managers are matched by
# the rules that own them, never by a plain name look-up.
NAMED_KINDS = frozenset({"function", "class", "module"})
KINDS = NAMED_KINDS | {"keyword", "context-manager"}
FIXES = frozenset({"rename", "rewrite", "manual"})


class CatalogueError(ValueError):
    pass


def parse_version(text: str) -> tuple[int, ...]:
    parts = tuple(int(part) for part in text.split("."))
    if len(parts) < 2:
        raise CatalogueError(f"version {text!r} needs at least major.minor")
    return parts


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str
    replacement: str
    code: str
    deprecated_in: str
    removed_in: str
    fix: str
    safety: str
    link: str
    note: str = ""
    source: str = ""
    aliases: tuple[str, ...] = ()
    keyword: str = ""
    constructors: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def superseded(self) -> bool:
        """Still supported, never deprecated: reported whatever the target version."""
        return not self.deprecated_in

    def applies_to(self, target: tuple[int, int]) -> bool:
        return self.superseded or target >= parse_version(self.deprecated_in)[:2]

    def removed_for(self, target: tuple[int, int]) -> bool:
        return bool(self.removed_in) and target >= parse_version(self.removed_in)[:2]

    def status(self, target: tuple[int, int]) -> str:
        """How the target JAX sees the symbol: '... removed in JAX X' / 'deprecated since JAX X'."""
        if self.removed_for(target):
            return f"was removed in JAX {self.removed_in}"
        if self.deprecated_in:
            return f"is deprecated since JAX {self.deprecated_in}"
        return "is superseded"


def _symbol(raw: dict) -> Symbol:
    fields = dict(raw)
    for key in ("aliases", "constructors"):
        fields[key] = tuple(fields.get(key, ()))
    symbol = Symbol(**fields)
    if symbol.kind not in KINDS:
        raise CatalogueError(f"{symbol.name}: unknown kind {symbol.kind!r}")
    if symbol.fix not in FIXES or symbol.safety not in ("safe", "unsafe"):
        raise CatalogueError(f"{symbol.name}: bad fix/safety {symbol.fix!r}/{symbol.safety!r}")
    if (symbol.kind == "keyword") != bool(symbol.keyword):
        raise CatalogueError(f"{symbol.name}: `keyword` is required exactly for kind = keyword")
    for version in filter(None, (symbol.deprecated_in, symbol.removed_in)):
        parse_version(version)
    return symbol


def load(text: str) -> tuple[Symbol, ...]:
    return tuple(_symbol(raw) for raw in tomllib.loads(text).get("symbol", []))


@cache
def symbols() -> tuple[Symbol, ...]:
    return load(resources.files("jaxmigrate").joinpath("symbols.toml").read_text("utf-8"))


@cache
def _by_name() -> dict[str, Symbol]:
    table: dict[str, Symbol] = {}
    for symbol in symbols():
        if symbol.kind in NAMED_KINDS:
            for name in symbol.names:
                table.setdefault(name, symbol)
    return table


@cache
def _modules() -> tuple[Symbol, ...]:
    return tuple(s for s in symbols() if s.kind == "module")


def lookup(qualname: str) -> Symbol | None:
    """The legacy symbol a qualified name denotes: itself, an alias, or a member of a legacy module."""
    found = _by_name().get(qualname)
    if found is not None:
        return found
    for module in _modules():
        if any(qualname.startswith(name + ".") for name in module.names):
            return module
    return None


def for_code(code: str) -> tuple[Symbol, ...]:
    return tuple(s for s in symbols() if s.code == code)


def keywords(code: str) -> dict[str, dict[str, Symbol]]:
    """callee qualified name -> keyword -> symbol, for the keyword entries of one rule."""
    table: dict[str, dict[str, Symbol]] = {}
    for symbol in for_code(code):
        if symbol.kind == "keyword":
            for name in symbol.names:
                table.setdefault(name, {})[symbol.keyword] = symbol
    return table
