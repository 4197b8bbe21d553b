"""A codemod's plan and how it is applied: decide on ``ast``, splice text, write imports.

Every codemod (pmap, pjit, the sharding APIs, moved names) is a planner: it reads a
``core.module.ParsedModule`` through the one resolver and returns a ``Plan`` - text edits at exact
source spans (so everything outside a rewritten expression keeps its bytes, comments and layout)
plus the imports and module-level helpers they need - and ``apply`` makes it: lines the edits made
too long broken as a formatter would (``_layout``), imports and helpers written in the file's own
grouping (``_imports``).
"""

from __future__ import annotations

import ast
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from jaxmigrate.core.edits import Edit, splice
from jaxmigrate.core.fstrings import FStrings, requoted
from jaxmigrate.core.module import ParsedModule, release
from jaxmigrate.lint.patterns import collective_axis_names
from jaxmigrate.names import LOCAL
from jaxmigrate.migrate._imports import imports_read, write_imports
from jaxmigrate.migrate._layout import fit_edits


@dataclass(frozen=True)
class Site:
    """A place a lint rule reports (1-based line, 1-based character column) and what the codemod
    can do there: rewrite it, or keep it for ``reason``; ``unsafe`` says why a rewrite offered
    here can change behaviour (None: it cannot)."""

    line: int
    column: int
    rewritable: bool
    reason: str | None = None
    unsafe: str | None = field(default=None, kw_only=True)  # keyword: subclasses add positional fields


Sites = frozenset[tuple[int, int]] | None  # the positions a fix run rewrites; None: every provable one


class Unprovable(Exception):
    """Raised while planning a site whose rewrite cannot be shown to keep its meaning."""


@dataclass
class Plan:
    """Text edits plus the imports and helpers they need."""

    edits: list[Edit] = field(default_factory=list)
    add_imports: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    remove_imports: set[tuple[str, str | None, str | None]] = field(default_factory=set)
    helpers: dict[str, str] = field(default_factory=dict)  # name -> source of a top-level def


class Namer:
    """Spells jax names in the module's own terms: its aliases first, a new import when the short
    name is free, else the attribute path from the module's ``jax`` alias."""

    def __init__(self, module: ParsedModule, plan: Plan) -> None:
        self.module = module
        self.plan = plan

    def alias(self, qualname: str) -> str | None:
        """The module's own name for ``qualname`` (``ParsedModule.module_alias``). Its import is
        asked for too: one that comes below a line this plan writes the name on (a later notebook
        cell's `from jax.sharding import Mesh`) is no spelling there, and ``write_imports`` then
        adds it above that line; one above it is left as it is."""
        alias = self.module.module_alias(qualname)
        if alias:
            key = _import_key(self.module, alias)
            if key is not None:
                self.plan.add_imports.add(key)
        return alias

    def jax(self) -> str:
        alias = self.alias("jax")
        if alias:
            return alias
        if self.module.free("jax"):
            self.plan.add_imports.add(("jax", None, None))
            return "jax"
        raise Unprovable("the name `jax` is bound to something else here, so jax cannot be named")

    def numpy(self) -> str:
        alias = self.alias("numpy")
        if alias:
            return alias
        if self.module.free("np"):
            self.plan.add_imports.add(("numpy", None, "np"))
            return "np"
        raise Unprovable("the name `np` is bound to something other than numpy here")

    def multihost_utils(self) -> str:
        """``jax.experimental.multihost_utils`` as this module can spell it."""
        alias = self.alias("jax.experimental.multihost_utils")
        if alias:
            return alias
        if self.module.free("multihost_utils"):
            self.plan.add_imports.add(("jax.experimental", "multihost_utils", None))
            return "multihost_utils"
        raise Unprovable("the name `multihost_utils` is bound to something else here")

    def sharding(self, obj: str, short: str | None = None) -> str:
        """``jax.sharding.<obj>`` as this module can spell it (``short`` is a preferred alias)."""
        for qualname in (f"jax.sharding.{obj}", f"jax.{obj}"):
            alias = self.alias(qualname)
            if alias:
                return alias
        name = short or obj
        if self.module.free(name):
            self.plan.add_imports.add(("jax.sharding", obj, short if short and short != obj else None))
            return name
        return f"{self.jax()}.sharding.{obj}"


def _import_key(module: ParsedModule, name: str) -> tuple[str, str | None, str | None] | None:
    """(module, object, alias) of the module-level import statement that binds ``name``."""
    binding = next(iter(module.names.module_scope.bindings.get(name, ())), None)
    statement = getattr(binding, "statement", None)
    node = getattr(binding, "node", None)
    if isinstance(statement, ast.Import):
        return (node.name, None, node.asname)
    if isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
        return (statement.module, node.name, node.asname)
    return None


def apply(text: str, plan: Plan) -> str:
    """Splice the plan's edits into ``text``, insert helpers, add and remove imports."""
    if not plan.edits and not plan.helpers:
        return text
    read_before = imports_read(text, plan.remove_imports)
    # The planner's module of ``text`` is not read again: let it go (once the codemod holds it no
    # more) before the result is parsed, so that two trees of a big file are never held at once.
    release(text)
    fstrings = FStrings(text)
    edits = requoted(fstrings, plan.edits)
    out = fit_edits(text, edits, splice(text, edits), fstrings)
    if not (plan.helpers or plan.add_imports or plan.remove_imports):
        return out
    return write_imports(text, out, plan.add_imports, plan.remove_imports, plan.helpers, read_before)


def declined_edits(module: ParsedModule, owned: Sequence[tuple[Hashable, Sequence[Edit]]]) -> dict[Hashable, str]:
    """Why some sites' edits cannot be made, by site: ``owned`` is each site with the edits its
    rewrite makes. A site whose edits overlap another's (a pmap applied to a pmap: the outer
    rewrite would hold the inner's text) is declined with the other, since one plan cannot make
    both; an edit inside an f-string is declined too, since a rewrite spelled across lines, or with
    the f-string's own quotes, cannot stand in a replacement field before Python 3.12. The pmap
    planner asks this of the edits it would offer, so a fix the lint advertises can be made; the
    other codemods' one-expression edits are made to fit an f-string by ``apply``
    (``core.fstrings``)."""
    reasons: dict[Hashable, str] = {}
    fstrings = [module.span(node) for node in module.of_type(ast.JoinedStr)]
    for key, edits in owned:
        for edit in edits:
            if any(start < edit.start and edit.end < end for start, end in fstrings):
                reasons[key] = "it is inside an f-string, whose replacement field cannot hold the rewrite"
    reach, reacher = -1, -1  # the furthest end of an edit seen so far in the sweep, and whose
    for start, end, index in sorted((e.start, e.end, i) for i, (_, edits) in enumerate(owned) for e in edits):
        if start < reach and index != reacher:
            lines = [module.src.position(owned[i][1][0].start)[0] for i in (reacher, index)]
            for one, other in ((reacher, lines[1]), (index, lines[0])):
                reasons.setdefault(owned[one][0], f"its rewrite overlaps that of the site at line {other} "
                                                  "(one inside the other): migrate it by hand")
        if end > reach:
            reach, reacher = end, index
    return reasons


def invented_axis(module: ParsedModule, preferred: str = "devices") -> str:
    """The name of the axis of a mesh a fix invents for pmap's unnamed device axis: ``preferred``,
    unless a collective of the module already names an axis so (``psum(x, axis_name="devices")``):
    the new axis would bind it, making code that raised run and silencing JM401 on it. Then
    ``devices_1``, ``devices_2``, ... The test is on collectives, not on every string: the meshes
    earlier passes wrote spell the name too, and must not move the next pass off it."""
    taken = collective_axis_names(module.names, module.of_type(ast.Call)) if preferred in module.text else set()
    name, count = preferred, 0
    while name in taken:
        count += 1
        name = f"{preferred}_{count}"
    return name


def selected(module: ParsedModule, expr: ast.expr, sites: Sites) -> tuple[tuple[int, int], bool]:
    """Where the lint rules report ``expr`` (its first mention), and whether this run rewrites it."""
    positions = module.mention_positions(expr)
    pos = min(positions) if positions else module.position(expr)
    return pos, sites is None or bool(positions & sites)


def resolves(module: ParsedModule, expr: ast.expr, names: frozenset[str]) -> str | None:
    """The one name of ``names`` ``expr`` refers to; Unprovable when it may also be something else."""
    candidates = module.names.candidates(expr)
    hit = candidates & names
    if not hit:
        return None
    if len(candidates) > 1:
        if LOCAL in candidates:
            raise Unprovable("the name may also refer to a local definition")
        from jaxmigrate.migrate.moved_names import renames  # it plans with this module

        # `Mesh` from jax.experimental.maps under one condition and from jax.sharding under another
        # is one class: JM303 moves the first onto the second, and whatever --fix does next must
        # be what check offered.
        if len({renames().get(name, name) for name in candidates}) == 1:
            return min(hit)
        raise Unprovable(f"the name may refer to any of {', '.join(sorted(candidates))} (imported more than once)")
    return next(iter(hit))


def remove_imports_of(module: ParsedModule, plan: Plan, qualnames: set[str]) -> None:
    """Schedule the removal of the imports of ``qualnames`` (done only where the edits made them unused)."""
    for binding, _scope in module.names.imports():
        for qual in qualnames:
            if binding.qualname == qual and "." in qual:
                mod, _, obj = qual.rpartition(".")
                plan.remove_imports.add((mod, obj, binding.node.asname))


def literal_ints(node: ast.expr) -> tuple[int, ...] | None:
    """``(4, 2)`` / ``[4, 2]`` / ``8`` / ``-1`` as ints, or None when not a literal."""
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [literal_int(e) for e in node.elts]
        return None if any(v is None for v in values) else tuple(values)  # type: ignore[arg-type]
    value = literal_int(node)
    return None if value is None else (value,)


def literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = literal_int(node.operand)
        return None if inner is None else -inner
    return None
