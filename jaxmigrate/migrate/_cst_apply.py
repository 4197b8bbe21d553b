"""The LibCST half of applying a plan: insert helpers, add and remove imports.

Kept apart from ``_plan`` (which imports it only when a plan needs it) so that planning, ``ast``
only and on the check path, never imports LibCST.
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor



ImportKey = tuple[str, "str | None", "str | None"]  # (module, object or None, alias or None)


def add_helpers_and_imports(text: str, helpers: dict[str, str], add_imports: set[ImportKey],
                            remove_imports: set[ImportKey]) -> str:
    """Insert ``helpers`` (name -> source of a top-level def) after the imports, add and remove
    imports; ``text`` already has the plan's edits made."""
    module = cst.parse_module(text)
    if helpers:
        module = module.visit(_InsertHelpers(helpers, module))
    context = CodemodContext()
    for mod, obj, asname in sorted(add_imports, key=str):
        AddImportsVisitor.add_needed_import(context, mod, obj, asname)
    for mod, obj, asname in sorted(remove_imports, key=str):
        RemoveImportsVisitor.remove_unused_import(context, mod, obj, asname)
    if add_imports:
        module = AddImportsVisitor(context).transform_module(module)
    if remove_imports:
        module = RemoveImportsVisitor(context).transform_module(module)
    return module.code


class _InsertHelpers(cst.CSTTransformer):
    """Puts each generated helper after the module's leading imports, unless it is already there."""

    def __init__(self, helpers: dict[str, str], module: cst.Module) -> None:
        super().__init__()
        existing = {
            stmt.name.value for stmt in module.body if isinstance(stmt, cst.FunctionDef)
        }
        self.helpers = [src for name, src in helpers.items() if name not in existing]
        self.config = module.config_for_parsing

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.helpers:
            return updated
        body = list(updated.body)
        index = 0
        for i, stmt in enumerate(body):
            if _is_import_or_docstring(stmt, i):
                index = i + 1
            else:
                break
        new = []
        for src in self.helpers:
            parsed = cst.parse_module(src, config=self.config).body
            first, *rest = parsed
            first = first.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
            new.extend([first, *rest])
        if index < len(body):
            follower = body[index]
            blank = [cst.EmptyLine(), cst.EmptyLine()]
            body[index] = follower.with_changes(leading_lines=[*blank, *_strip_blank(follower.leading_lines)])
        return updated.with_changes(body=[*body[:index], *new, *body[index:]])


def _strip_blank(lines):
    lines = list(lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return lines


def _is_import_or_docstring(stmt: cst.CSTNode, index: int) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            continue
        if index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
            continue
        return False
    return True
