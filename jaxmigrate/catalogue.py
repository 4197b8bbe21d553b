"""The catalogue of legacy JAX symbols (``symbols.toml``) and the look-ups rules make in it.

The table is data so that a version correction or a new alias is a one-line change reviewed against
JAX's changelog, not a code change; rules only decide *where* a name is mentioned.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

# Symbols a name or an attribute chain can mention; keywords and context managers are matched by
# the rules that own them, never by a plain name look-up. An ``object`` is a value (a constant, the
# old config object): like a module, what is reached through it goes with it.
NAMED_KINDS = frozenset({"function", "class", "module", "object"})
CONTAINER_KINDS = frozenset({"module", "object"})
# ``import``: a dotted path whose *import statement* fails although the same attribute chain is
# fine (`import jax.config` fails on JAX 0.10, `jax.config.update` works): matched at imports only.
# ``behaviour``: a function still there whose result changed (``changed_in``): reported, for code
# written for a JAX before the change, by the rule that owns it, never by a name look-up.
KINDS = NAMED_KINDS | {"keyword", "context-manager", "import", "behaviour"}
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
    changed_in: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def superseded(self) -> bool:
        """Still supported, never deprecated: reported whatever the target version."""
        return not self.deprecated_in and not self.removed_in

    def applies_to(self, target: tuple[int, int]) -> bool:
        """Whether code migrated to ``target`` must change it: deprecated (or, when the changelog
        names no deprecation, removed) by then."""
        since = self.deprecated_in or self.removed_in
        return not since or target >= parse_version(since)[:2]

    def removed_for(self, target: tuple[int, int]) -> bool:
        return bool(self.removed_in) and target >= parse_version(self.removed_in)[:2]

    def status(self, target: tuple[int, int]) -> str:
        """How the target JAX sees the symbol: '... removed in JAX X' / 'deprecated since JAX X'."""
        if self.changed_in:
            return f"changed its result in JAX {self.changed_in}"
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
    if (symbol.kind == "behaviour") != bool(symbol.changed_in):
        raise CatalogueError(f"{symbol.name}: `changed_in` is required exactly for kind = behaviour")
    for version in filter(None, (symbol.deprecated_in, symbol.removed_in, symbol.changed_in)):
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
def _containers() -> dict[str, Symbol]:
    """Modules and objects by each of their names: a member ``a.b.c`` is looked up by its prefixes."""
    table: dict[str, Symbol] = {}
    for symbol in symbols():
        if symbol.kind in CONTAINER_KINDS:
            for name in symbol.names:
                table.setdefault(name, symbol)
    return table


@cache
def _imports() -> dict[str, Symbol]:
    return {name: s for s in symbols() if s.kind == "import" for name in s.names}


# A module whose import is where its names are reported and fixed, all together (`maps.Mesh`
# after `from jax.experimental import maps`: the import becomes `jax.sharding`'s). Under any other
# removed module, a name with a rename of its own (`xla_bridge.get_backend`) is reported and fixed
# where it is written.
FIXED_AT_IMPORT = frozenset({"jax.experimental.maps"})


def reported_at_import(base: Iterable[str], name: Symbol) -> bool:
    """Whether a use of ``name`` through a module the resolver names ``base`` (its candidates) is
    reported at the import of that module rather than where it is written."""
    modules = [qualname for qualname in base if lookup(qualname)]
    return bool(modules) and (name.fix != "rename" or any(m in FIXED_AT_IMPORT for m in modules))


def lookup(qualname: str) -> Symbol | None:
    """The legacy symbol a qualified name denotes: itself, an alias, or a member of a legacy module."""
    found = _by_name().get(qualname)
    if found is not None:
        return found
    containers = _containers()
    prefix = qualname.rpartition(".")[0]
    while prefix:
        if (found := containers.get(prefix)) is not None:
            return found
        prefix = prefix.rpartition(".")[0]
    return None


@cache
def behaviours(code: str) -> dict[str, Symbol]:
    """Qualified name -> the ``behaviour`` entry of one rule."""
    return {name: s for s in for_code(code) if s.kind == "behaviour" for name in s.names}


def import_only(module: str) -> Symbol | None:
    """The ``import``-kind symbol for a module path an import statement names (``jax.config``)."""
    return _imports().get(module)


@cache
def trigger_words(code: str) -> tuple[str, ...]:
    """What a text must say for one of this rule's entries to be in it (see ``trigger_tests``)."""
    return tuple(sorted(trigger_tests(code)))


@cache
def trigger_tests(code: str) -> dict[str, frozenset[tuple[str, str]]]:
    """Trigger word -> how an entry that needs it must be written, for a rule's entries:

    * ``("name", "a.b.w")``: the last component ``w`` of a name (see ``lint/legacy.py`` for how a
      mention of ``a.b.w`` must write it);
    * ``("keyword", k)``: a keyword argument, written ``k=``;
    * ``("call-keyword", "a.b.f(k=")``: a short keyword (``x``, ``a``, written everywhere) is
      triggered by its callee's last component, and needs both ``k=`` and a mention of ``a.b.f``
      written as a ``("name", "a.b.f")`` is: a finding needs both;
    * ``("import", m)``: a module path whose import statement names it (``import jax.config``),
      not followed by ``.``;
    * ``("any", "")``: a context manager's constructor, written however it is.
    """
    tests: dict[str, set[tuple[str, str]]] = {}
    for symbol in for_code(code):
        if symbol.kind == "keyword":
            if _distinctive(symbol.keyword):
                words, test = [symbol.keyword], ("keyword", symbol.keyword)
            else:
                for name in symbol.names:
                    tests.setdefault(name.rpartition(".")[2], set()).add(("call-keyword", f"{name}({symbol.keyword}="))
                continue
        elif symbol.kind == "import":
            words, test = [n.rpartition(".")[2] for n in symbol.names], None
            for name in symbol.names:
                tests.setdefault(name.rpartition(".")[2], set()).add(("import", name))
            continue
        elif symbol.kind == "context-manager":
            words, test = [c.rpartition(".")[2] for c in symbol.constructors], ("any", "")
        else:
            for name in symbol.names:
                tests.setdefault(name.rpartition(".")[2], set()).add(("name", name))
            continue
        for word in words:
            tests.setdefault(word, set()).add(test)
    return {word: frozenset(found) for word, found in tests.items()}


def _distinctive(keyword: str) -> bool:
    return "_" in keyword or len(keyword) >= 8


@cache
def for_code(code: str) -> tuple[Symbol, ...]:
    return tuple(s for s in symbols() if s.code == code)


@cache
def keywords(code: str) -> dict[str, dict[str, Symbol]]:
    """callee qualified name -> keyword -> symbol, for the keyword entries of one rule."""
    table: dict[str, dict[str, Symbol]] = {}
    for symbol in for_code(code):
        if symbol.kind == "keyword":
            for name in symbol.names:
                table.setdefault(name, {})[symbol.keyword] = symbol
    return table


def installed(name: str, default=None):
    """The object the dotted ``name`` denotes in the JAX installed here (modules imported as
    needed, warnings silenced), or ``default``. For checking the catalogue against a JAX (the test suite,
    ``benchmarks/changelog_coverage.py``); lint never calls it, so it never imports JAX."""
    import importlib
    import warnings

    parts = name.split(".")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:k]))
                break
            except Exception:  # ImportError, or an extension that fails as it loads
                continue
        else:
            return default
        try:
            for part in parts[k:]:
                obj = getattr(obj, part)
        except Exception:
            return default
    return obj

