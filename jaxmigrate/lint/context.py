"""What a rule sees of one file: its text, tree, resolver and target JAX, and how it reports."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.module import Index, ParsedModule, index, remember
from jaxmigrate.core.source import SourceText
from jaxmigrate.lint.findings import Blocker, Finding, Fix, Safety
from jaxmigrate.names import NameResolver


@dataclass
class FileContext:
    path: str
    source: SourceText
    tree: ast.Module
    target_jax: tuple[int, int]
    findings: list[Finding] = field(default_factory=list)
    code: str | None = None  # the code of the rule running now, set by the checker
    # The JAX the code was written for (`from-jax`, or the project's pin); None: not known.
    from_jax: tuple[int, int] | None = None

    @cached_property
    def _index(self) -> Index:
        return index(self.tree)

    @property
    def nodes(self) -> list[ast.AST]:
        """Every node of the tree (but the Load/Store/Del markers), in ``ast.walk`` order, walked
        once for all rules."""
        return self._index[0]

    @property
    def by_type(self) -> dict[type, list[tuple[int, ast.AST]]]:
        """(walk position, node) of every node, by node type: rules visit only what they ask for."""
        return self._index[1]

    @cached_property
    def attributes_at(self) -> dict[str, list[tuple[int, ast.Attribute]]]:
        """(walk position, node) of the Attribute nodes by attribute name (``x.pmap`` under "pmap")."""
        found: dict[str, list[tuple[int, ast.Attribute]]] = {}
        get = found.get
        for item in self.by_type.get(ast.Attribute, ()):
            bucket = get(item[1].attr)
            if bucket is None:
                found[item[1].attr] = [item]
            else:
                bucket.append(item)
        return found

    @cached_property
    def names_at(self) -> dict[str, list[tuple[int, ast.Name]]]:
        """(walk position, node) of the Name nodes by identifier."""
        found: dict[str, list[tuple[int, ast.Name]]] = {}
        get = found.get
        for item in self.by_type.get(ast.Name, ()):
            bucket = get(item[1].id)
            if bucket is None:
                found[item[1].id] = [item]
            else:
                bucket.append(item)
        return found

    @cached_property
    def attributes(self) -> dict[str, list[ast.Attribute]]:
        """Attribute nodes by attribute name, in walk order."""
        return {name: [node for _, node in items] for name, items in self.attributes_at.items()}

    @cached_property
    def names_by_id(self) -> dict[str, list[ast.Name]]:
        """Name nodes by identifier, in walk order."""
        return {name: [node for _, node in items] for name, items in self.names_at.items()}

    @cached_property
    def names(self) -> NameResolver:
        return NameResolver(self.tree)

    @cached_property
    def module(self) -> ParsedModule:
        """This file as the codemods' planners read it: the same tree and resolver, no second parse."""
        module = ParsedModule(self.text, self.tree, self.names, self.source, self._index)
        remember(module)  # a fix of this text reuses it (core.module.parse_module)
        return module

    @property
    def text(self) -> str:
        return self.source.text

    def segment(self, node: ast.AST) -> str:
        start, end = self.source.span(node)
        return self.source.text[start:end]

    def replace(self, node: ast.AST, content: str) -> Edit:
        start, end = self.source.span(node)
        return Edit(start, end, content)

    def fix(self, safety: Safety, message: str, *edits: Edit) -> Fix:
        return Fix(safety, message, tuple(edits))

    def report(
        self, node: ast.AST, message: str, fix: Fix | None = None, *, code: str | None = None,
        blockers: tuple[Blocker, ...] = (),
    ) -> None:
        start, end = self.source.span(node)
        line, column = self.source.position(start)
        end_line, end_column = self.source.position(end)
        self.findings.append(
            Finding(
                code=code or self.code,
                message=message,
                path=self.path,
                line=line,
                column=column,
                end_line=end_line,
                end_column=end_column,
                fix=fix,
                blockers=blockers,
            )
        )
