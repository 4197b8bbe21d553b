"""Moved and renamed names onto their JAX 0.10 spelling (JM303 ``Mesh``, JM304, JM305, JM309, JM601,
JM602).

``analyse_<rule>(text) -> list[Site]`` plans every place the rule reports (rewritable, or why it is
kept); ``rewrite(text, sites=None)`` rewrites the selected sites of all four rules in one pass
(``None``: every rewritable one). Planning is ``ast`` and the one resolver; LibCST loads only when a
fix moves a name out of an import statement (``_import_moves``).

The renames are the catalogue's non-manual entries of these rules (``replacement`` starts with the
new name in backticks); each pair is one object, or one function with one signature in JAX 0.4.30
and 0.10.2 (tests/test_runtime_moved_names.py and tests/test_runtime_removed_apis.py compare them);
an entry whose safety is ``unsafe`` (``jnp.fix`` -> ``jnp.trunc``) gives an unsafe site. An
``import``-kind entry (``import jax.config``) becomes the import of its parent (``import jax``). A dotted use keeps the user's base
(``J.tree_map`` -> ``J.tree.map``) or is spelled through the module's aliases, adding ``import jax``
once. ``from M import old as x`` moves to the new module keeping ``x``; where the new name differs
(``tree_map``/``map``) and every use provably reads the import, the uses are renamed and the import
goes. Imports left unused are removed. ``jax.experimental.shard_map.shard_map`` calls also get
mesh/in_specs/out_specs and ``check_rep`` (as ``check_vma``) by keyword: why that is exact, and what
is kept, is in JM305's docs (``lint/rules/experimental_shard_map.py``).
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from dataclasses import dataclass, field
from functools import cache

from jaxmigrate import catalogue
from jaxmigrate.core.source import SourceText
from jaxmigrate.core.fallbacks import catches_import_error
from jaxmigrate.core.edits import Edit
from jaxmigrate.core.module import ParsedModule, as_module
from jaxmigrate.migrate._import_moves import move_imports
from jaxmigrate.migrate._plan import Namer, Plan, Site, Unprovable, apply
from jaxmigrate.names import LOCAL, PARTIAL, ImportBinding

__all__ = ["Site", "analyse_experimental_maps", "analyse_partition_spec", "analyse_removed_apis",
           "analyse_removed_sharding_apis", "analyse_shard_map", "analyse_tree_aliases", "renames", "rewrite"]

Sites = frozenset[tuple[int, int]] | None

CODES = ("JM303", "JM304", "JM305", "JM309", "JM601", "JM602")
SHARD_MAP = "jax.experimental.shard_map.shard_map"
MAPS = "jax.experimental.maps"
_PARAMS = ("f", "mesh", "in_specs", "out_specs", "check_rep")  # the experimental one, in 0.10.2
_REQUIRED = ("mesh", "in_specs", "out_specs")


@cache
def renames() -> dict[str, str]:
    """Legacy qualified name -> JAX 0.10 qualified name, for these rules' non-manual entries."""
    table = {}
    for symbol in catalogue.symbols():
        if symbol.code in CODES and symbol.kind in catalogue.NAMED_KINDS and symbol.fix != "manual":
            if match := re.match(r"`([\w.]+)`", symbol.replacement):
                table.update(dict.fromkeys(symbol.names, match.group(1)))
    return table


def analyse_experimental_maps(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, "JM303")


def analyse_partition_spec(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, "JM304")


def analyse_shard_map(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, "JM305")


def analyse_tree_aliases(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, "JM601")


def analyse_removed_sharding_apis(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, "JM309")


def analyse_removed_apis(source: ParsedModule | str) -> list[Site]:
    return _analyse(source, "JM602")


def rewrite(text: str, sites: Sites = None) -> str:
    """Rewrite the selected sites of the CODES rules (all rewritable ones when None)."""
    planner = _planner(text)
    if planner is None:
        return text
    plan = _Plan()
    for position, node in planner.mentions(CODES).items():
        if sites is None or position in sites:
            planned = planner.site(position, node)[1]
            if planned is not None:
                plan.merge(planned)
    plan.edits = sorted(set(plan.edits) | set(move_imports(planner.module, plan.moved)))
    plan.remove_imports = {planner.import_key(alias) for alias in plan.dropped if planner.unused(alias, plan.edits)}
    del planner  # the tree goes before the result is parsed (``apply``)
    return apply(text, plan)


def _analyse(source: ParsedModule | str, code: str) -> list[Site]:
    planner = _planner(source)
    if planner is None:
        return []
    return [planner.site(position, node)[0] for position, node in sorted(planner.mentions((code,)).items())]


@dataclass
class _Plan(Plan):
    # (statement, alias, new qualified name): `from M import old as x` becomes an import of new as x.
    moved: list[tuple[ast.ImportFrom, ast.alias, str]] = field(default_factory=list)
    # Imports whose uses the edits may all replace: removed (RemoveImportsVisitor) when they do.
    dropped: list[ast.alias] = field(default_factory=list)
    unsafe: str | None = None  # why a rename planned here can change behaviour (catalogue safety)

    def merge(self, other: "_Plan") -> None:
        self.edits += other.edits
        self.add_imports |= other.add_imports
        self.moved += [m for m in other.moved if m not in self.moved]
        self.dropped += other.dropped
        self.unsafe = self.unsafe or other.unsafe


def _planner(source: ParsedModule | str) -> "_Planner | None":
    """A planner over the module's facts, found once: the four rules analysing a file and the fix
    of the same text share them (they are only read)."""
    module = as_module(source)
    if module is None:
        return None
    facts = module.shared.get("moved_names")
    if facts is None:
        facts = module.shared["moved_names"] = _Facts(module)
    return _Planner(module, facts)


class _Facts:
    """What planning reads of a module, kept in its ``shared``. It holds no reference back to the
    module: a cycle would keep the whole tree alive until the cyclic GC traversed it."""

    def __init__(self, module: ParsedModule) -> None:
        self.by_id: dict[str, list[ast.Name]] = {}
        self.strings: set[str] = set()  # `__all__` entries, string annotations: uses we cannot see
        self.declared: set[str] = set()  # global / nonlocal
        self.fallbacks: set[int] = set()  # imports in `except ImportError:`, left alone by the rules
        self.candidates: list[tuple[ast.AST, frozenset[str]]] | None = None  # see _Planner
        for node in module.of_type(ast.Name):
            self.by_id.setdefault(node.id, []).append(node)
        for node in module.of_type(ast.Constant):
            if isinstance(node.value, str) and node.value.isidentifier():
                self.strings.add(node.value)
        for node in module.of_type(ast.Global, ast.Nonlocal):
            self.declared.update(node.names)
        for node in module.of_type(ast.Try, ast.TryStar):
            self.fallbacks.update(id(sub) for handler in node.handlers if catches_import_error(handler.type)
                                  for stmt in handler.body for sub in ast.walk(stmt))


class _Planner:
    def __init__(self, module: ParsedModule, facts: _Facts) -> None:
        self.module = module
        self.renames = renames()
        self.facts = facts
        self.by_id, self.strings, self.declared, self.fallbacks = (
            facts.by_id, facts.strings, facts.declared, facts.fallbacks)

    def mentions(self, codes) -> dict[tuple[int, int], ast.AST]:
        """Position -> node of every mention of these rules' names, where the lint rules report it:
        import aliases, the outermost legacy link of an attribute chain (links share a position),
        names a star import brought in. `maps.Mesh` is reported (and planned) at the import of maps."""
        found: dict[tuple[int, int], ast.AST] = {}
        for node, node_codes in self._candidates:
            if not node_codes.isdisjoint(codes):
                position, old = self.module.position(node), found.get(self.module.position(node))
                if old is None or _size(self.module, node) > _size(self.module, old):
                    found[position] = node
        return found

    @property
    def _candidates(self) -> list[tuple[ast.AST, frozenset[str]]]:
        """Every node that names a symbol of these rules, with the rules, in walk order: looked for
        once, whichever rules ask (the fix of a text asks again what its rules just asked)."""
        if self.facts.candidates is None:
            self.facts.candidates = self._find_candidates()
        return self.facts.candidates

    def _find_candidates(self) -> list[tuple[ast.AST, frozenset[str]]]:
        found = []
        names = self.module.names
        last, module_last = _last_components()
        for node in self.module.of_type(ast.alias, ast.Attribute, ast.Name):
            if isinstance(node, ast.alias) and id(self.module.parent_of(node)) not in self.fallbacks:
                quals = [self._alias_qualname(node)]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                if node.attr not in last and not _through_module(node.value, module_last):
                    continue  # it cannot name a catalogue symbol: no need to resolve it
                base = _base(node)
                quals = [t.name for t in names.resolve(node) if t.name != LOCAL and not t.partials]
                symbols = [symbol for q in quals if (symbol := catalogue.lookup(q))]
                if isinstance(base, ast.Name) and symbols and catalogue.reported_at_import(
                        [t.name for t in names.resolve(base) if t.name != LOCAL], symbols[0]):
                    continue  # (as the rules report it: the import is the mention)
            elif isinstance(node, ast.Name) and names.star_imports and not names.bindings(node):
                quals = [t.name for t in names.resolve(node)]
            else:
                continue
            node_codes = frozenset(_code(q) for q in quals if q) - {None}
            if not node_codes and isinstance(node, ast.alias) and (gone := self._import_only(node)):
                node_codes = frozenset({gone.code})
            if node_codes:
                found.append((node, node_codes))
        return found

    def site(self, position: tuple[int, int], node: ast.AST) -> tuple[Site, "_Plan | None"]:
        plan = _Plan()
        try:
            self._plan(node, plan)
        except Unprovable as exc:
            return Site(*position, False, str(exc)), None
        return Site(*position, True, unsafe=plan.unsafe), plan

    # -- planning ----------------------------------------------------------------------------

    def _plan(self, node: ast.AST, plan: _Plan) -> None:
        if isinstance(node, ast.Name) or (isinstance(node, ast.alias) and node.name == "*"):
            raise Unprovable("it comes from a star import; import it by name and the fix applies")
        if isinstance(node, ast.alias):
            stmt, qual = self.module.parent_of(node), self._alias_qualname(node)
            if qual == MAPS:
                return self._plan_maps_import(stmt, node, plan)
            if qual in self.renames and isinstance(stmt, ast.ImportFrom):
                return self._plan_from_import(stmt, node, qual, plan)
            if (gone := self._import_only(node)) is not None:
                if isinstance(stmt, ast.Import):
                    return self._plan_import_only(stmt, node, plan)
                raise Unprovable(f"`{stmt.module}` cannot be imported on JAX 0.10: use {gone.replacement}")
            raise Unprovable(_manual(qual))
        targets = self.module.names.resolve(node)
        if len(targets) != 1 or targets[0].name == LOCAL or targets[0].partials:
            raise Unprovable("the name may also refer to a local definition")
        if targets[0].name not in self.renames:
            raise Unprovable(_manual(targets[0].name))
        self._plan_chain(node, targets[0].name, plan)

    def _plan_chain(self, chain: ast.Attribute, qual: str, plan: _Plan) -> None:
        new = self.renames[qual]
        _mark_unsafe(qual, plan)
        if qual == SHARD_MAP:
            self._plan_shard_map(chain, plan)
        base = _base(chain)
        prefix = self.module.names.qualified_name(base) if isinstance(base, ast.Name) else None
        if prefix is None:
            raise Unprovable("the name may also refer to a local definition")
        if self.module.has_comment(chain):
            raise Unprovable("a comment inside the dotted name would be lost")
        if new.startswith(prefix + "."):  # keep the user's alias: J.tree_map -> J.tree.map
            plan.edits.append(Edit(self.module.span(base)[1], self.module.span(chain)[1], new[len(prefix):]))
            _load_home(new, plan)
            return
        plan.edits.append(Edit(*self.module.span(chain), self._spell(new, plan)))
        _load_home(new, plan)
        plan.dropped += [b.node for b in self.module.names.bindings(base) if isinstance(b, ImportBinding)]

    def _plan_from_import(self, stmt: ast.ImportFrom, alias: ast.alias, qual: str, plan: _Plan) -> None:
        new, local = self.renames[qual], alias.asname or alias.name
        _mark_unsafe(qual, plan)
        if qual == SHARD_MAP:
            for use in self._uses(alias):
                self._plan_shard_map(use, plan)
        elif new.rpartition(".")[2] != alias.name:
            trial = _Plan()
            try:  # the uses become `jax.tree.map` and the import goes, when nothing else sees `local`
                if local in self.strings or local in self.declared or not self._uses(alias):
                    raise Unprovable("the imported name may be used where its uses cannot be seen")
                spelled = self._spell(new, trial)
                trial.edits += [Edit(*self.module.span(use), spelled) for use in self._uses(alias)]
            except Unprovable:
                pass  # keep the local name: `from jax.tree import map as tree_map`
            else:
                plan.merge(trial)
                plan.dropped.append(alias)
                return
        plan.moved.append((stmt, alias, new))

    def _plan_maps_import(self, stmt: ast.stmt, alias: ast.alias, plan: _Plan) -> None:
        """`jax.experimental.maps` imported as a module: fixable when all it serves is `Mesh`."""
        dotted = isinstance(stmt, ast.Import) and not alias.asname  # `import jax.experimental.maps`
        refs = [node for node in self.module.of_type(ast.Attribute)
                if self.module.names.qualified_name(node) == MAPS and self._reads(_base(node), alias)
                ] if dotted else self._uses(alias)
        if not refs:
            raise Unprovable(_manual(MAPS))
        for ref in refs:
            member = self.module.parent_of(ref)
            if not (isinstance(member, ast.Attribute) and isinstance(member.ctx, ast.Load)):
                raise Unprovable(f"the module itself is used on line {ref.lineno}; " + _manual(MAPS))
            if f"{MAPS}.{member.attr}" not in self.renames:
                raise Unprovable(f"line {ref.lineno}: " + _manual(f"{MAPS}.{member.attr}"))
            self._plan_chain(member, f"{MAPS}.{member.attr}", plan)
        if not dotted:
            plan.dropped.append(alias)
            return
        # It binds `jax`: deleted where another `import jax` stays, else it becomes one.
        self._replace_dotted_import(stmt, alias, "jax", plan)

    def _plan_import_only(self, stmt: ast.Import, alias: ast.alias, plan: _Plan) -> None:
        """`import jax.config` binds `jax`: it becomes `import jax` (deleted where another plain
        `import jax` stays); `import jax.config as c` becomes `from jax import config as c`."""
        parent, _, last = alias.name.rpartition(".")
        if alias.asname:
            if len(stmt.names) != 1:
                raise Unprovable("an `import ... as` among other imports; split the statement and the fix applies")
            plan.edits.append(Edit(*self.module.span(stmt), f"from {parent} import {last} as {alias.asname}"))
            return
        self._replace_dotted_import(stmt, alias, alias.name.partition(".")[0], plan)  # what it binds

    def _replace_dotted_import(self, stmt: ast.Import, alias: ast.alias, new: str, plan: _Plan) -> None:
        """`import a.b` (binding `a`) becomes `import a`, or goes where another `import a` stays."""
        start, end = self.module.span(stmt)
        line, after = self.module.src.line_starts[stmt.lineno - 1], self.module.text.find("\n", end) + 1 or len(self.module.text)
        others = [b for b in self.module.names.module_scope.bindings.get(new, []) if isinstance(b, ImportBinding)
                  and b.node is not alias and b.node.name == new and not b.node.asname]
        alone = not (self.module.text[line:start] + self.module.text[end:after]).strip() and len(stmt.names) == 1
        plan.edits.append(Edit(line, after, "") if others and alone else Edit(*self.module.span(alias), new))

    def _import_only(self, alias: ast.alias) -> catalogue.Symbol | None:
        stmt = self.module.parent_of(alias)
        if isinstance(stmt, ast.Import):
            return catalogue.import_only(alias.name)
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            return catalogue.import_only(stmt.module)
        return None

    # -- shard_map -------------------------------------------------------------------------

    def _plan_shard_map(self, ref: ast.expr, plan: _Plan) -> None:
        parent = self.module.parent_of(ref)
        if isinstance(parent, ast.Call) and parent.func is ref:
            return self._convert(parent, 0, plan, direct=True)
        if (isinstance(parent, ast.Call) and parent.args and parent.args[0] is ref
                and self.module.names.candidates(parent.func) == PARTIAL):
            self._convert(parent, 1, plan, direct=False)
            for call, first in self._through(parent):  # calls made through the partial
                args = self._checked(call, first, {})
                if len(args) > (len(parent.args) < 2):
                    raise Unprovable(f"line {call.lineno} passes shard_map arguments other than f positionally")
                self._rename_check_rep(call, plan)
            return None
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise Unprovable("a bare `@shard_map` decorator has no mesh/in_specs/out_specs")
        if isinstance(ref, ast.Name) and not isinstance(ref.ctx, ast.Load):
            raise Unprovable(f"`{ref.id}` is rebound on line {ref.lineno}")
        raise Unprovable(f"shard_map is used as a value on line {ref.lineno}; whoever calls it may pass "
                         "mesh/in_specs/out_specs positionally, which jax.shard_map takes by keyword only")

    def _convert(self, call: ast.Call, first: int, plan: _Plan, direct: bool) -> None:
        """Positional mesh/in_specs/out_specs/check_rep of a shard_map call (or partial) -> keywords."""
        given = dict(zip(_PARAMS, call.args[first:]))
        args = self._checked(call, first, given)
        missing = [p for p in ("f",) * direct + _REQUIRED if p not in given]
        if missing:
            raise Unprovable(f"line {call.lineno}: shard_map without {', '.join(missing)}: the experimental "
                             "one raises, jax.shard_map would fill in defaults")
        starts = self._argument_starts(call)
        for index, arg in enumerate(args[1:], 1):
            keyword, at = _PARAMS[index].replace("check_rep", "check_vma"), starts[first + index]
            if isinstance(arg, ast.NamedExpr) and at == self.module.span(arg)[0]:  # `m := x` needs parentheses
                close = self.module.span(arg)[1]
                plan.edits += [Edit(at, at, f"{keyword}=("), Edit(close, close, ")")]
            else:
                plan.edits.append(Edit(at, at, f"{keyword}="))
        self._rename_check_rep(call, plan)

    def _checked(self, call: ast.Call, first: int, given: dict) -> list[ast.expr]:
        args = call.args[first:]
        if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in call.keywords):
            raise Unprovable(f"line {call.lineno}: `*`/`**` arguments cannot be matched to jax.shard_map's "
                             "keyword-only parameters")
        if len(args) > len(_PARAMS):
            raise Unprovable(f"line {call.lineno}: more positional arguments than shard_map takes")
        for keyword in call.keywords:
            if keyword.arg == "auto":
                raise Unprovable("`auto=` (JAX <= 0.5) has no exact jax.shard_map spelling: `axis_names=` "
                                 "is its complement over the mesh axes; migrate by hand")
            if keyword.arg == "f":
                raise Unprovable("`f=` is passed by keyword; jax.shard_map takes f positionally only")
            if keyword.arg not in _PARAMS or keyword.arg in given:
                raise Unprovable(f"line {call.lineno}: `{keyword.arg}=` is not a shard_map parameter here")
            given[keyword.arg] = keyword
        return args

    def _rename_check_rep(self, call: ast.Call, plan: _Plan) -> None:
        for keyword in call.keywords:
            if keyword.arg == "check_rep":
                at = self.module.src.offset(keyword.lineno, keyword.col_offset)
                plan.edits.append(Edit(at, at + len("check_rep"), "check_vma"))

    def _through(self, partial: ast.Call):
        """(call, index of its first shard_map argument) of each call through ``partial``, and of
        each further ``functools.partial`` of it."""
        for node in self.module.of_type(ast.Call):
            if node is not partial:
                again = self.module.names.candidates(node.func) == PARTIAL and bool(node.args)
                targets = self.module.names.resolve(node if again else node.func)
                if any(partial in t.partials for t in targets):
                    if len(targets) > 1:
                        raise Unprovable(f"the call on line {node.lineno} may also call something else")
                    yield node, int(again)

    def _argument_starts(self, call: ast.Call) -> list[int]:
        """Where each top-level argument of ``call`` starts, parentheses around it included."""
        start = self.module.span(call.func)[1]
        fragment = self.module.text[start:self.module.span(call)[1]]
        lines, starts, depth, expect = SourceText(fragment).line_starts, [], 0, False
        try:
            for tok in tokenize.generate_tokens(io.StringIO(fragment).readline):
                if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER):
                    continue
                if depth == 0:
                    depth, expect = (1, True) if tok.string == "(" else (0, False)
                    continue
                if expect and tok.string != ")":
                    starts.append(start + lines[tok.start[0] - 1] + tok.start[1])
                    expect = False
                if tok.type == tokenize.OP and tok.string in ("(", "[", "{"):
                    depth += 1
                elif tok.type == tokenize.OP and tok.string in (")", "]", "}"):
                    depth -= 1
                elif depth == 1 and tok.string == ",":
                    expect = True
        except (tokenize.TokenError, SyntaxError):
            starts = []
        if len(starts) != len(call.args) + len(call.keywords):
            raise Unprovable(f"line {call.lineno}: the call's layout could not be read")
        return starts

    # -- helpers ---------------------------------------------------------------------------

    def _spell(self, qualname: str, plan: _Plan) -> str:
        """``qualname`` through the module's own aliases (longest first), else from ``jax``."""
        parts, namer = qualname.split("."), Namer(self.module, plan)
        for k in range(len(parts), 0, -1):
            if alias := namer.alias(".".join(parts[:k])):
                return ".".join([alias, *parts[k:]])
        return ".".join([namer.jax(), *parts[1:]])

    def _uses(self, alias: ast.alias) -> list[ast.Name]:
        """The names reading the import ``alias``; Unprovable when one may also read something else."""
        uses = [n for n in self.by_id.get(alias.asname or alias.name, ()) if self._reads(n, alias)]
        for use in uses:
            if len(self.module.names.bindings(use)) > 1 or isinstance(use.ctx, ast.Del):
                raise Unprovable(f"`{use.id}` on line {use.lineno} may also be something else")
        return uses

    def unused(self, alias: ast.alias, edits: list[Edit]) -> bool:
        """Whether the (sorted) ``edits`` replace every name that reads the import ``alias``."""
        starts = [edit.start for edit in edits]
        for name in self.by_id.get((alias.asname or alias.name).partition(".")[0], ()):
            if self._reads(name, alias):
                start, end = self.module.span(name)
                index = bisect.bisect_right(starts, start) - 1
                if index < 0 or edits[index].end < end or edits[index].start == edits[index].end:
                    return False
        return True

    def _reads(self, name: ast.AST, alias: ast.alias) -> bool:
        return isinstance(name, ast.Name) and any(
            isinstance(b, ImportBinding) and b.node is alias for b in self.module.names.bindings(name))

    def _alias_qualname(self, alias: ast.alias) -> str | None:
        stmt = self.module.parent_of(alias)
        if isinstance(stmt, ast.Import):
            return alias.name
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            return stmt.module if alias.name == "*" else f"{stmt.module}.{alias.name}"
        return None

    def import_key(self, alias: ast.alias) -> tuple[str, str | None, str | None]:
        stmt = self.module.parent_of(alias)
        if isinstance(stmt, ast.ImportFrom):
            return (stmt.module or "", alias.name, alias.asname)
        return (alias.name, None, alias.asname)


@cache
def _last_components() -> tuple[frozenset[str], frozenset[str]]:
    """The last components of every catalogue name (what `x.attr` must end with to be one), and
    of the legacy modules (`x.maps.anything` is a member of one)."""
    named = [s for s in catalogue.symbols() if s.kind in catalogue.NAMED_KINDS]
    return (frozenset(n.rpartition(".")[2] for s in named for n in s.names),
            frozenset(n.rpartition(".")[2] for s in named if s.kind in catalogue.CONTAINER_KINDS for n in s.names))


def _through_module(chain: ast.expr, module_last: frozenset[str]) -> bool:
    """Whether a link of this attribute chain may be a legacy module (its base name is checked
    on its own: a base that resolves to one is reported at its import)."""
    while isinstance(chain, ast.Attribute):
        if chain.attr in module_last:
            return True
        chain = chain.value
    return False


# Packages `import jax` does not load (checked on jax 0.4.30 and 0.10.2: it loads jax.numpy,
# jax.sharding, jax.tree, jax.errors, jax.core, ... but not jax.extend): a renamed attribute chain
# into one needs its module imported, or it raises AttributeError.
_NOT_LOADED_BY_JAX = ("jax.extend",)


def _load_home(new: str, plan: _Plan) -> None:
    home = new.rpartition(".")[0]
    if home.startswith(_NOT_LOADED_BY_JAX):
        plan.add_imports.add((home, None, None))


def _mark_unsafe(qualname: str, plan: _Plan) -> None:
    symbol = catalogue.lookup(qualname)
    if symbol is not None and symbol.safety == "unsafe":
        plan.unsafe = symbol.note or "the replacement is not the same function"


def _code(qualname: str) -> str | None:
    symbol = catalogue.lookup(qualname)
    return symbol.code if symbol is not None and symbol.kind in catalogue.NAMED_KINDS else None


def _manual(qualname: str | None) -> str:
    if qualname == f"{MAPS}.xmap":
        return "xmap has no mechanical replacement; port it by hand"
    if qualname == MAPS:
        return ("the module was deleted in JAX 0.4.31: use `jax.sharding.Mesh` for its Mesh, port xmap "
                "by hand, then delete the import")
    return f"`{qualname}` has no same-meaning JAX 0.10 name to rename it to; migrate it by hand"


def _base(chain: ast.expr) -> ast.expr:
    while isinstance(chain, ast.Attribute):
        chain = chain.value
    return chain


def _size(module: ParsedModule, node: ast.AST) -> int:
    start, end = module.span(node)
    return end - start
