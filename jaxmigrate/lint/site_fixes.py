"""Fixes for catalogue rules whose rewrite is a whole-module codemod that plans *sites*.

A site planner (``analyse_*`` in ``jaxmigrate.migrate.sharding_apis``) reads the module with
``ast`` and the one resolver, and says for every place the rule reports whether the codemod can
rewrite it or why not. The rule offers the codemod as the finding's fix where it can, and appends
the reason to the message where it cannot: the user sees exactly what ``--fix`` will do.

Planning runs only for files where the rule has something to report, and imports no LibCST.
"""

from __future__ import annotations

import ast
from importlib import import_module
from typing import ClassVar

from jaxmigrate.catalogue import Symbol
from jaxmigrate.lint.context import FileContext
from jaxmigrate.lint.findings import Blocker, Fix, Safety
from jaxmigrate.lint.legacy import describe


class SiteFixes:
    """Mixin for a ``CatalogueRule``: set the three class attributes below and ``fixable``, the
    safety of the fix."""

    site_planner: ClassVar[str]  # "module:analyse_function", ParsedModule | text -> list[Site]
    site_codemod: ClassVar[str]  # "module:rewrite_function", (text, sites) -> text
    site_fix_message: ClassVar[str]
    fixable: ClassVar[Safety]

    def report(self, node: ast.AST, symbol: Symbol, shown: str, ctx: FileContext, ambiguous=False):
        message = describe(symbol, shown, ctx, ambiguous)
        site = self._planned_sites(ctx).get(ctx.source.position(ctx.source.span(node)[0]))
        fix = None
        if site is not None and site.rewritable and not ambiguous:
            # A site that says why its rewrite can change behaviour gets an unsafe fix, and the
            # finding says why (``fixable`` is the rule's strongest fix).
            safety = Safety.UNSAFE if site.unsafe else self.fixable
            fix = Fix(safety, self.site_fix_message, codemod=self.site_codemod)
            if site.unsafe:
                message += f"; the fix is unsafe: {site.unsafe}"
        blockers = ()
        if fix is None and site is not None and site.reason:
            message += f"; not rewritten: {site.reason}"
            blockers = (Blocker("rewrite", site.reason, site.line),)
        ctx.report(node, message, fix, blockers=blockers)

    def _planned_sites(self, ctx: FileContext) -> dict:
        # Rule instances live for one file (the checker makes them per lint), so this caches the
        # plan of the file being checked.
        if getattr(self, "_sites_of", None) is None:
            module, _, function = self.site_planner.partition(":")
            sites = getattr(import_module(module), function)(ctx.module)
            self._sites_of = {(site.line, site.column): site for site in sites}
        return self._sites_of
