"""Exact migration: ``jax.pmap`` becomes ``jax.jit`` over ``jax.shard_map``, calling convention kept.

What it produces
----------------
::

    step = jax.pmap(train_step, axis_name="batch", donate_argnums=(0,))
    # becomes
    step = jax.jit(_shard_map_like_pmap(train_step, axis_name="batch"), donate_argnums=(0,))

    @partial(jax.pmap, axis_name="i", static_broadcasted_argnums=(1,))
    def f(x, n): ...
    # becomes
    @partial(jax.jit, static_argnums=(1,))
    @partial(_shard_map_like_pmap, axis_name="i", static_argnums=(1,))
    def f(x, n): ...

``_shard_map_like_pmap`` is written once, at the top of the module (after its imports), and is
plain public JAX: ``jax.shard_map`` of a per-device body over a 1-D ``Mesh`` named ``axis_name``.
Static arguments become ``jit``'s ``static_argnums`` (and the helper closes over them, as pmap's
``argnums_partial`` does); ``donate_argnums`` go to ``jit`` unchanged (both count positions with
static arguments included, and both drop static ones).

Why a call-time mesh (the design choice)
----------------------------------------
JAX 0.10 implements pmap itself as jit over shard_map (``jax/_src/pmap.py``), and sizes the mesh
from the *call*: ``Mesh(jax.devices()[:n], (axis_name,))`` where ``n`` is the mapped axis of the
first mapped argument, so a leading axis of 4 on an 8-device host runs on devices 0-3. A static
module-level mesh of all local devices agrees only when ``n`` equals the device count; for any
other ``n`` the new code would fail where the old one ran. So the helper builds the mesh inside
the traced function, where shapes are static: every ``n`` gets pmap's own mesh, and ``jit``'s
trace cache (keyed on shapes) is the mesh cache. The helper copies pmap's other rules too: the
``in_axes`` prefix is broadcast over ``(dynamic positional args, kwargs)`` with keyword arguments
mapped over axis 0, each mapped leaf is ``lax.squeeze``d on its axis and each output leaf
``lax.expand_dims``ed (``out_axes=None``: neither, spec ``P()``), and the shard_map runs with
``check_vma=False, axis_names={axis_name}``; ``axis_name=None`` becomes pmap's
``"_internal_pmap_axis_name"``. Collectives (``psum``, ``pmean``, ``all_gather``, ``ppermute``,
``axis_index``, ...) keep working on the same axis name. Exactness is checked at run time by
``tests/test_runtime_pmap.py`` against ``jax.pmap`` on 8 forced CPU devices.

Precondition: one process. Multi-process pmap also converts host-local arrays to global ones and
orders the mesh by process; the helper does not, so on a multi-host run the rewrite is not exact.

What is left alone (each such site gets a reason): nested pmaps, ``devices=``, ``backend=``,
``axis_size=``, non-literal ``in_axes`` / ``out_axes`` / argnums, ``*args`` / ``**kwargs`` in the
pmap call, ``partial(jax.pmap, ...)`` stored in a variable, names that may or may not be
``jax.pmap``, ``jax.pmap`` passed around as a value, and pmap calls with comments inside (the
replacement would drop them).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import PositionProvider

from jaxmigrate.lint.context import SourceText
from jaxmigrate.migrate._pmap_helper import helper_source
from jaxmigrate.migrate._pmap_sites import HELPER, PMAP, Application, Planner, Span
from jaxmigrate.names import ImportBinding

@dataclass(frozen=True)
class Site:
    """One application of ``jax.pmap``: where its ``jax.pmap`` is named (1-based line, 1-based
    character column, as findings count them), and whether it was rewritten or why not."""

    line: int
    column: int
    rewritten: bool
    reason: str | None = None


@dataclass(frozen=True)
class PmapMigration:
    text: str  # the new source; the input itself when nothing was rewritten
    sites: list[Site]

    @property
    def changed(self) -> bool:
        return any(site.rewritten for site in self.sites)


def rewrite_module(source: str, only: Collection[tuple[int, int]] | None = None) -> PmapMigration:
    """Rewrite every provable pmap application of ``source`` (or those at the ``(line, column)``
    positions in ``only``, positions as ``Site`` counts them)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return PmapMigration(source, [])
    planner = Planner(source, tree)
    apps = planner.applications()
    chosen = [a for a in apps if a.reason is None and (only is None or (a.line, a.column) in only)]
    if not chosen:
        return PmapMigration(source, [_site(a, False) for a in apps])
    module = cst.parse_module(source)
    context = CodemodContext()
    new_module = _PmapToShardMap(context, chosen, planner).transform_module(module)
    chosen_ids = {id(a) for a in chosen}
    return PmapMigration(new_module.code, [_site(a, id(a) in chosen_ids) for a in apps])


def fix(text: str, sites: Collection[tuple[int, int]]) -> str:
    """Rewrite the applications at these ``Site`` positions: ``function(text, sites) -> text``."""
    return rewrite_module(text, only=sites).text


def fix_mentions(text: str, mentions: Collection[tuple[int, int]]) -> str:
    """JM101's codemod: rewrite the applications that stem from the reported mentions of
    ``jax.pmap`` (an import alias, an attribute chain, or the value a name was bound to)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    planner = Planner(text, tree)
    source = SourceText(text)
    chosen = {
        (app.line, app.column)
        for app in planner.applications()
        for mention in planner.resolver.mentions(app.ref)
        if source.position(source.offset(mention.lineno, mention.col_offset)) in mentions
    }
    return rewrite_module(text, only=chosen).text if chosen else text


def _site(app: Application, rewritten: bool) -> Site:
    if rewritten:
        return Site(app.line, app.column, True, None)
    return Site(app.line, app.column, False, app.reason or "not selected")


class _PmapToShardMap(VisitorBasedCodemodCommand):
    """Splices the planned replacements, adds the helper once and schedules import changes."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, context: CodemodContext, apps: list[Application], planner: Planner) -> None:
        super().__init__(context)
        self.calls = {a.span: a for a in apps if a.kind == "call"}
        self.decorators = {a.span: a for a in apps if a.kind == "decorator"}
        self.planner = planner
        self.done: set[int] = set()

    def _span(self, node: cst.CSTNode) -> Span:
        pos = self.get_metadata(PositionProvider, node)
        return (pos.start.line, pos.start.column, pos.end.line, pos.end.column)

    def _expression(self, text: str) -> cst.BaseExpression:
        return cst.parse_expression(text, config=self.module.config_for_parsing)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        app = self.calls.get(self._span(original))
        if app is None:
            return updated
        self.done.add(id(app))
        new = self._expression(app.replacement)
        return new.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator):
        app = self.decorators.get(self._span(original.decorator))
        if app is None:
            return updated
        self.done.add(id(app))
        first, second = (self._expression(text) for text in app.decorators)
        return cst.FlattenSentinel([
            updated.with_changes(decorator=first),
            cst.Decorator(decorator=second, whitespace_after_at=updated.whitespace_after_at),
        ])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.done:
            return updated
        if self.planner.needs_jax_import:
            AddImportsVisitor.add_needed_import(self.context, "jax")
        if self.planner.functools_alias is None:
            AddImportsVisitor.add_needed_import(self.context, "functools")
        for binding, scope in self.planner.resolver.imports():
            if scope is self.planner.resolver.module_scope and binding.qualname == PMAP:
                alias: ImportBinding = binding
                if alias.node.name != "*":
                    RemoveImportsVisitor.remove_unused_import(self.context, "jax", "pmap", alias.node.asname)
        if HELPER in self.planner.resolver.module_scope.bindings:
            return updated  # already there, and identical (checked when planning)
        return self._with_helper(updated)

    def _with_helper(self, module: cst.Module) -> cst.Module:
        text = helper_source(self.planner.module_alias, self.planner.functools_alias or "functools",
                             module.default_newline, module.default_indent)
        helper = cst.parse_module(text + module.default_newline, config=module.config_for_parsing).body
        body = list(module.body)
        at = _after_header(body)
        blank = cst.EmptyLine()
        helper = [helper[0].with_changes(leading_lines=[blank, blank]), *helper[1:]]
        if at < len(body):
            following = body[at]
            lines = list(following.leading_lines)
            blanks = len(lines) - len(list(_strip_leading_blanks(lines)))
            following = following.with_changes(leading_lines=[blank] * max(0, 2 - blanks) + lines)
            body[at] = following
        return module.with_changes(body=[*body[:at], *helper, *body[at:]])


def _strip_leading_blanks(lines):
    it = iter(lines)
    for line in it:
        if line.comment is not None:
            yield line
            yield from it
            return


def _after_header(body: list[cst.BaseStatement]) -> int:
    """Index after the module docstring and the leading run of import statements."""
    at = 0
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        at = 1
    while at < len(body) and isinstance(body[at], cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in body[at].body
    ):
        at += 1
    return at
