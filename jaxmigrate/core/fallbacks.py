"""Compatibility fallbacks: imports inside ``except ImportError:`` are not legacy use."""

from __future__ import annotations

import ast

_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def catches_import_error(handler_type: ast.expr | None) -> bool:
    """Whether an ``except`` clause of this type catches a failed import (alone or in a tuple)."""
    if isinstance(handler_type, ast.Name):
        return handler_type.id in _IMPORT_ERRORS
    if isinstance(handler_type, ast.Tuple):
        return any(catches_import_error(element) for element in handler_type.elts)
    return False
