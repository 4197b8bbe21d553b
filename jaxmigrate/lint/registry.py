"""Finds every rule class in ``jaxmigrate.lint.rules`` and selects among them by code prefix."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from jaxmigrate.lint import rules as rules_package
from jaxmigrate.lint.rule import Rule

# Codes that once named a rule and must never name another one.
RETIRED_CODES: frozenset[str] = frozenset()
# Codes the tool itself reports; they are always selected and cannot be configured away.
TOOL_CODES = {
    "JM000": "file cannot be read or parsed",
    "JM001": "a rule crashed on this file, or its fix would have broken the file",
}


class RegistryError(Exception):
    pass


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, sorted by code. Rules are discovered, never listed by hand."""
    found: dict[str, type[Rule]] = {}
    for module_info in pkgutil.iter_modules(rules_package.__path__):
        module = importlib.import_module(f"{rules_package.__name__}.{module_info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value.__module__ == module.__name__
                and "code" in vars(value)
            ):
                if value.code in found and found[value.code] is not value:
                    raise RegistryError(
                        f"rule code {value.code} is used by both {found[value.code].__name__}"
                        f" and {value.__name__}"
                    )
                if value.code in RETIRED_CODES or value.code in TOOL_CODES:
                    raise RegistryError(f"rule code {value.code} is reserved")
                found[value.code] = value
    names = [rule.name for rule in found.values()]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise RegistryError(f"rule names used twice: {sorted(duplicates)}")
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper() or rule.name == code.lower():
            return rule
    return None


def known_code_or_prefix(selector: str) -> bool:
    selector = selector.upper()
    if selector == "ALL":
        return True
    return any(code.startswith(selector) for code in [*TOOL_CODES, *(r.code for r in all_rules())])


def select_rules(select: list[str] | None, ignore: list[str]) -> tuple[type[Rule], ...]:
    """Rules whose code starts with a selected prefix and with no ignored prefix (longest wins)."""
    select = [s.upper() for s in (select or ["ALL"])]
    ignore = [s.upper() for s in ignore]
    chosen = []
    for rule in all_rules():
        selected = _longest_match(rule.code, select)
        ignored = _longest_match(rule.code, ignore)
        if selected >= 0 and selected > ignored:
            chosen.append(rule)
    return tuple(chosen)


def _longest_match(code: str, prefixes: list[str]) -> int:
    lengths = [0 if p == "ALL" else len(p) for p in prefixes if p == "ALL" or code.startswith(p)]
    return max(lengths, default=-1)
