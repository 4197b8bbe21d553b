"""A plan's imports and helpers, written the way the file already writes them.

New imports join the group that already imports from their package, else the group of their kind
(standard library or third-party), in sorted position, or extend an existing ``from M import ...``
of the same module; a kind with no group gets one of its own in the usual order. An import is
removed only when the plan's edits made it unused: it was read before the rewrite and is not after
(a pre-existing unused import may be there for its side effects). Generated helpers go after the
module's import block. Blank lines, comments and every byte outside the touched lines are kept.
Text edits on ``ast`` positions, no LibCST: this runs for every fixed file.
"""
from __future__ import annotations

import ast
import itertools
import re
import sys
from collections.abc import Iterable

from jaxmigrate import catalogue
from jaxmigrate.config import DEFAULT_TARGET_JAX
from jaxmigrate.core.edits import Edit, splice
from jaxmigrate.core.flow import statement_list
from jaxmigrate.core.module import ParsedModule, recent_module
from jaxmigrate.names import ImportBinding

ImportKey = tuple[str, "str | None", "str | None"]  # (module, object or None, alias or None)

_STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


def write_imports(original: str, text: str, add: Iterable[ImportKey], remove: Iterable[ImportKey],
                  helpers: dict[str, str], read_before: set[ImportKey] | None = None) -> str:
    """``text`` (``original`` with a plan's edits made) with ``remove`` taken out where the edits
    made them unused, ``add`` added, and ``helpers`` (name -> source of a def) after the imports.
    ``read_before``: ``imports_read(original, remove)`` when the caller has it already."""
    remove, add = set(remove), set(add)
    if ("jax", None, None) in add and any(module.startswith("jax.") and name is None and alias is None
                                          for module, name, alias in add):
        add.discard(("jax", None, None))  # `import jax.extend.backend` binds `jax` too
    if read_before is None:
        read_before = imports_read(original, remove)
    try:
        # Added first: a new import joins the group of one the plan then removes, taking its place.
        for key in sorted(add, key=str):
            text = _add(text, key)
        for key in sorted(remove, key=str):
            if key in read_before:  # never used: not this plan's to remove
                text = _remove(text, key)
        if helpers:
            text = _insert_helpers(text, helpers)
        return text
    finally:
        _LAST_PARSED.clear()  # (no tree of this file held while the next is parsed)


# -- the module's import block ---------------------------------------------------------------


class _Header:
    """The top-level import statements that form the module's import block (those above its first
    def or class), in groups (runs of import statements with no blank line or other statement
    between them)."""

    def __init__(self, text: str, *names: str) -> None:
        """With ``names``, only the imports above the first line that reads one (where a new
        import or helper binding it may go)."""
        self.text = text
        # The planner's own parse when this is the text it read (``_parsed``).
        self.module = _parsed(text)
        self.source = self.module.src
        self.tree = self.module.tree
        body = self.tree.body
        self.docstring = (body[0] if body and isinstance(body[0], ast.Expr)
                          and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
                          else None)
        self.first_read = first_read = min((node.lineno for node in self.module.of_type(ast.Name)
                                            if node.id in names and isinstance(node.ctx, ast.Load)), default=None)
        # Every top-level import above the first def or class: a script that sets `os.environ`
        # (or installs a traceback hook) before it imports jax keeps jax's imports below that
        # code, and a new jax import goes there, not above it.
        block: list[ast.stmt] = []
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    or first_read is not None and stmt.end_lineno >= first_read:
                break
            if _is_import(stmt):
                block.append(stmt)
        self.block = block
        first = next((i for i, stmt in enumerate(body) if _is_import(stmt)), len(body))
        self.first_run = [stmt for stmt in itertools.takewhile(_is_import, body[first:]) if stmt in block]
        self.groups: list[list[ast.stmt]] = []
        for stmt in block:
            if self.groups and stmt.lineno == self.groups[-1][-1].end_lineno + 1:
                self.groups[-1].append(stmt)
            else:
                self.groups.append([stmt])

    @property
    def newline(self) -> str:
        return self.source.newline

    def line_start(self, line: int) -> int:
        return self.source.line_starts[line - 1]

    def line_end(self, line: int) -> int:
        """Offset just past line ``line``'s line break (the end of the text on the last line)."""
        starts = self.source.line_starts
        return starts[line] if line < len(starts) else len(self.text)


_LAST_PARSED: list[tuple[str, ParsedModule]] = []


def _parsed(text: str) -> ParsedModule:
    """The planner's parse of ``text``, or this module's last one: adding several imports that are
    there already reads one text several times. Held until ``write_imports`` returns, or the
    next text is parsed, never beside it."""
    module = recent_module(text)
    if module is None:
        if _LAST_PARSED and _LAST_PARSED[0][0] == text:
            return _LAST_PARSED[0][1]
        _LAST_PARSED.clear()  # (let the last tree go before the next is made)
        module = ParsedModule(text)
        _LAST_PARSED[:] = [(text, module)]
    return module


def _is_import(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.Import, ast.ImportFrom))


def _module_of(stmt: ast.stmt) -> str:
    if isinstance(stmt, ast.Import):
        return stmt.names[0].name
    return "." * stmt.level + (stmt.module or "")


def _kind(module: str) -> str:
    if module == "__future__":
        return "future"
    if module.startswith("."):
        return "local"
    return "stdlib" if module.partition(".")[0] in _STDLIB else "third-party"


_ORDER = {"future": 0, "stdlib": 1, "third-party": 2, "local": 3}
# numpy, which the fixes add to JAX code, goes beside jax where the file has no numpy import
# (`import jax` / `import jax.numpy as jnp` / `import numpy as np`, as JAX's examples have it).
_BESIDE = {"numpy": "jax"}


def _group_kind(group: list[ast.stmt]) -> str:
    kinds = [_kind(_module_of(stmt)) for stmt in group]
    return max(set(kinds), key=kinds.count)


def _binds(alias: ast.alias, key: ImportKey, stmt: ast.stmt) -> bool:
    module, obj, asname = key
    if obj is None:
        return isinstance(stmt, ast.Import) and alias.name == module and alias.asname == asname
    return (isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module == module
            and alias.name == obj and alias.asname == asname)


# -- removing ----------------------------------------------------------------------------------


def _import_aliases(module: ParsedModule, key: ImportKey) -> list[tuple[ast.stmt, ast.alias]]:
    """Every import (in any scope) that binds ``key``."""
    return [(stmt, alias) for stmt in module.of_type(ast.Import, ast.ImportFrom)
            for alias in stmt.names if _binds(alias, key, stmt)]


def _read(module: ParsedModule, alias: ast.alias, name: str) -> bool:
    """Whether any name in the module reads the binding ``alias`` made (scope by scope, as Python
    looks names up), or ``__all__`` exports it."""
    reads = [node for node in module.of_type(ast.Name) if node.id == name and not isinstance(node.ctx, ast.Store)]
    # (the module's name resolver, built for the first read there is: none, mostly, after a fix)
    if any(isinstance(b, ImportBinding) and b.node is alias for node in reads for b in module.names.bindings(node)):
        return True
    return any(isinstance(node, ast.Constant) and node.value == name for node in _all_lists(module.tree))


def _all_lists(tree: ast.Module):
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and stmt.value is not None:
            yield from ast.walk(stmt.value)


def _bound_name(key: ImportKey) -> str:
    module, obj, asname = key
    return asname or obj or module.partition(".")[0]


def imports_read(original: str, keys: Iterable[ImportKey]) -> set[ImportKey]:
    """The ``keys`` whose import ``original`` reads: only those may a plan's edits make unused."""
    keys = set(keys)
    if not keys:
        return set()
    before = recent_module(original) or ParsedModule(original)
    return {key for key in keys
            if any(_read(before, alias, _bound_name(key)) for _, alias in _import_aliases(before, key))}


def _remove(text: str, key: ImportKey) -> str:
    """``text`` without the import of ``key`` where it is no longer read (it was read before the
    plan's edits: ``imports_read``)."""
    name = _bound_name(key)
    header = _Header(text)
    for stmt, alias in _import_aliases(header.module, key):
        if _read(header.module, alias, name):
            continue
        if len(stmt.names) == 1:
            edit = _drop_statement(header, stmt)
            if edit is None:
                continue  # a comment on its line: the line is left as it is
            return _remove(splice(text, [edit]), key)
        return _remove(splice(text, [_drop_alias(header, stmt, alias)]), key)
    return text


def _gone(stmt: ast.stmt) -> bool:
    """An import of modules the newest JAX no longer has (``from jax.lib import xla_bridge``): left
    unused, it would still raise at import, so it goes with the comment ending its line (which
    speaks of it)."""
    if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
        names = [f"{stmt.module}.{alias.name}" for alias in stmt.names]
    elif isinstance(stmt, ast.Import):
        names = [alias.name for alias in stmt.names]
    else:
        return False
    symbols = [catalogue.lookup(name) for name in names]
    return all(symbol is not None and symbol.kind == "module" and symbol.removed_for(DEFAULT_TARGET_JAX)
               for symbol in symbols)


def _drop_statement(header: _Header, stmt: ast.stmt) -> Edit | None:
    """The edit that takes ``stmt`` out of the module, keeping it valid: the last statement of a
    block (a ``try:`` body, a function) becomes ``pass``, as ruff's fixes do; a statement that
    shares a line through ``;`` goes with its separator; a statement alone on its lines goes
    with them. None when a comment shares its line (removing the line would take the comment)."""
    text = header.text
    start, end = header.line_start(stmt.lineno), header.line_end(stmt.end_lineno)
    code_start, code_end = header.source.span(stmt)
    parent = header.module.parent_of(stmt)
    block = statement_list(header.module, stmt) or [stmt]
    if len(block) == 1 and not isinstance(parent, ast.Module):
        return Edit(code_start, code_end, "pass")
    index = next(i for i, s in enumerate(block) if s is stmt)
    before = block[index - 1] if index else None
    after = block[index + 1] if index + 1 < len(block) else None
    if before is not None and before.end_lineno == stmt.lineno:
        # `import os; from jax import pmap`: from the end of the statement before, `;` and all.
        return Edit(header.source.span(before)[1], _past_semicolon(text, code_end, end), "")
    if after is not None and after.lineno == stmt.end_lineno:
        return Edit(code_start, header.source.span(after)[0], "")
    rest = text[code_end:end].strip()
    if text[start:code_start].strip() or (rest and rest != ";" and not (rest.startswith("#") and _gone(stmt))):
        return None
    # The last statement of its import group, between blank lines: one of them goes too, so the
    # groups around keep their spacing (three blank lines above a def would be one too many).
    above = text[:start].splitlines(keepends=True)
    below = text[end:].splitlines(keepends=True)
    if above and not above[-1].strip() and below and not below[0].strip():
        end += len(below[0])
    return Edit(start, end, "")


def _past_semicolon(text: str, at: int, line_end: int) -> int:
    """``at``, or past a trailing ``;`` that ends the line (``a; b;``)."""
    rest = text[at:line_end]
    return at + len(rest) - len(rest.lstrip(" \t;")) if rest.strip() == ";" else at


def _drop_alias(header: _Header, stmt: ast.stmt, alias: ast.alias) -> Edit:
    """The edit that takes ``alias`` and one neighbouring comma out of ``stmt``'s name list."""
    text, span = header.text, header.source.span
    names = stmt.names
    index = names.index(alias)
    start, end = span(alias)
    if index + 1 < len(names):
        end = span(names[index + 1])[0]
        if "\n" in text[start:end]:  # one name per line: drop the whole line
            return Edit(header.line_start(alias.lineno), header.line_start(names[index + 1].lineno), "")
    else:
        start = span(names[index - 1])[1]
        if "\n" in text[start:span(alias)[0]]:
            line_start = header.line_start(alias.lineno)
            line_end = header.line_end(alias.lineno)
            return Edit(line_start, line_end, "")
    return Edit(start, end, "")


# -- adding ------------------------------------------------------------------------------------


def _statement(key: ImportKey) -> str:
    module, obj, asname = key
    alias = f" as {asname}" if asname else ""
    return f"import {module}{alias}" if obj is None else f"from {module} import {obj}{alias}"


def _add(text: str, key: ImportKey) -> str:
    header = _Header(text, _bound_name(key))
    module, obj, asname = key
    for stmt in header.tree.body:
        if _is_import(stmt) and any(_binds(alias, key, stmt) for alias in stmt.names) \
                and (header.first_read is None or stmt.end_lineno < header.first_read):
            return text  # already there (one below a line that reads the name is there too late)
    package = module.partition(".")[0]
    holding = [group for group in header.groups if any(_module_of(stmt).partition(".")[0] == package
                                                        for stmt in group)]
    if obj is not None:
        # `from M import ...` extended where the module's imports begin: the first run of
        # imports, or the first group of the package (not a late one, below code that the
        # planners, which take any import of a name as its spelling, may have used it in).
        for stmt in [*header.first_run, *(holding[0] if holding else ())]:
            if (isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module == module
                    and stmt.names[0].name != "*"):
                return splice(text, [_extend(header, stmt, f"{obj} as {asname}" if asname else obj)])
    nl = header.newline
    line = _statement(key)
    kind = _kind(module)
    # A file that keeps a package's imports in a group of their own (`import jax` below the other
    # third-party imports, as isort's sections do) gets the new one there.
    same = holding or next((found for found in ([group for group in header.groups
                                                 if any(_module_of(stmt).partition(".")[0] == near for stmt in group)]
                                                for near in (_BESIDE.get(package),)) if found), [])
    # (else a group of that kind alone before one that mixes kinds: `from functools import
    # partial` above `from toolz import curry` is no place for numpy)
    same = same or sorted((group for group in header.groups if _group_kind(group) == kind),
                          key=lambda group: any(_kind(_module_of(stmt)) != kind for stmt in group))
    if same:
        return splice(text, [_into_group(header, same[0], line, module, obj is not None)])
    if header.groups:
        after = [g for g in header.groups if _ORDER[_group_kind(g)] < _ORDER[kind]]
        if after:  # a new group after the last group of an earlier kind
            end = header.line_end(after[-1][-1].end_lineno)
            return splice(text, [Edit(end, end, f"{nl}{line}{nl}")])
        start = header.line_start(header.groups[0][0].lineno)
        return splice(text, [Edit(start, start, f"{line}{nl}{nl}")])
    if header.docstring is not None:
        end = header.line_end(header.docstring.end_lineno)
        return splice(text, [Edit(end, end, f"{nl}{line}{nl}")])
    start = _after_leading_comments(text)
    return splice(text, [Edit(start, start, f"{line}{nl}")])


def _extend(header: _Header, stmt: ast.ImportFrom, name: str) -> Edit:
    """``name`` added to an existing ``from M import a, b``, in sorted position when the names are
    sorted, else last; a parenthesised one-name-per-line list gets a line of its own."""
    text, span = header.text, header.source.span
    names = stmt.names
    shown = [text[slice(*span(alias))] for alias in names]
    sorted_names = shown == sorted(shown, key=str.lower)
    index = len(names)
    if sorted_names:
        index = next((i for i, s in enumerate(shown) if s.lower() > name.lower()), len(names))
    one_per_line = len(names) > 1 and all(a.lineno != b.lineno for a, b in zip(names, names[1:]))
    if one_per_line:
        if index < len(names):
            start = header.line_start(names[index].lineno)
            indent = text[start:span(names[index])[0]]
            return Edit(start, start, f"{indent}{name},{header.newline}")
        last = names[-1]
        end = span(last)[1]
        trailing = text[end:end + 1] == ","
        indent = text[header.line_start(last.lineno):span(last)[0]]
        at = end + 1 if trailing else end
        return Edit(at, at, f"{'' if trailing else ','}{header.newline}{indent}{name}{',' if trailing else ''}")
    if index < len(names):
        start = span(names[index])[0]
        return Edit(start, start, f"{name}, ")
    end = span(names[-1])[1]
    return Edit(end, end, f", {name}")


def _into_group(header: _Header, group: list[ast.stmt], line: str, module: str, is_from: bool) -> Edit:
    """``line`` inserted into ``group`` where a sorted group would have it."""
    def key(stmt: ast.stmt) -> str:
        return _module_of(stmt).lower()

    plain_first = all(isinstance(a, ast.Import) or isinstance(b, ast.ImportFrom)
                      for a, b in zip(group, group[1:]))
    runs = [[key(stmt) for stmt in group if isinstance(stmt, kind)] for kind in (ast.Import, ast.ImportFrom)] \
        if plain_first else [[key(stmt) for stmt in group]]
    package = [stmt for stmt in group if key(stmt).partition(".")[0] == module.lower().partition(".")[0]]
    if any(run != sorted(run) for run in runs) and package:
        # A group in no sorted order has no sorted place: the new line goes after its package's last
        # (`import jax` itself, before its package's first).
        if not is_from and "." not in module:
            start = header.line_start(package[0].lineno)
            return Edit(start, start, f"{line}{header.newline}")
        end = header.line_end(package[-1].end_lineno)
        if end == len(header.text) and not header.text.endswith(("\n", "\r")):
            return Edit(end, end, f"{header.newline}{line}")
        return Edit(end, end, f"{line}{header.newline}")
    for stmt in group:
        if plain_first and is_from and isinstance(stmt, ast.Import):
            continue
        # (`import jax` before `from jax import ...`: isort's order, plain or sorted within sections)
        if (plain_first and not is_from and isinstance(stmt, ast.ImportFrom)) or key(stmt) > module.lower() \
                or not is_from and isinstance(stmt, ast.ImportFrom) and key(stmt) == module.lower():
            start = header.line_start(stmt.lineno)
            return Edit(start, start, f"{line}{header.newline}")
    end = header.line_end(group[-1].end_lineno)
    if end == len(header.text) and not header.text.endswith(("\n", "\r")):
        return Edit(end, end, f"{header.newline}{line}")
    return Edit(end, end, f"{line}{header.newline}")


def _after_leading_comments(text: str) -> int:
    """Offset after a shebang / encoding cookie / leading comment lines."""
    at = 0
    for match in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n|$)", text):
        if not match.group().startswith("#") or not match.group():
            break
        at = match.end()
    return at


# -- helpers -----------------------------------------------------------------------------------


def _insert_helpers(text: str, helpers: dict[str, str]) -> str:
    header = _Header(text, *helpers)
    defined = {stmt.name for stmt in header.tree.body if isinstance(stmt, ast.FunctionDef)}
    new = [source for name, source in helpers.items() if name not in defined]
    if not new:
        return text
    nl = header.newline
    indent = header.module.indent
    blocks = [_reindent(source.strip("\n"), indent).replace("\n", nl) for source in new]
    body = f"{nl}{nl}{nl}".join(blocks)
    anchor = header.block[-1] if header.block else header.docstring
    if anchor is None:
        at = _after_leading_comments(text)
        return text[:at] + body + nl + nl + nl + text[at:].lstrip("\r\n")
    at = header.line_end(anchor.end_lineno)
    rest = text[at:]
    stripped = rest.lstrip("\r\n")
    tail = nl + nl + nl if stripped else nl
    return text[:at] + nl + nl + body + tail + stripped


def _reindent(source: str, unit: str) -> str:
    if unit == "    ":
        return source
    lines = []
    for line in source.split("\n"):
        stripped = line.lstrip(" ")
        lines.append(unit * ((len(line) - len(stripped)) // 4) + stripped)
    return "\n".join(lines)
