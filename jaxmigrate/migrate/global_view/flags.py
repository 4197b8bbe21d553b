"""A function's own flag parameters, given a literal at a call: the branches that call runs.

A batch function written for both a pmapped and a plain caller splits its batch only where the
caller asks (a Premchand-text GPT script's ``get_batch(..., for_pmap=True)``)::

    def get_batch(split, data, block_size, batch_size, for_pmap=False):
        if for_pmap:
            batch_size = jax.device_count() * batch_size
        ...
        if for_pmap:
            x = rearrange(x, "(d b) t -> d b t", d=jax.device_count())
        return x, y

Read at a call that passes a literal (or leaves the parameter to a literal default), an ``if`` on
the parameter, or on ``not`` it, runs one branch: the call with ``for_pmap=True`` splits, the
calls without never do. A parameter the function rebinds is no flag (its value at the ``if`` is
not the call's).
"""

from __future__ import annotations

import ast

from jaxmigrate.migrate.global_view.modes import skipped, without_not


def literal_flags(names, func: ast.FunctionDef, given: dict[str, ast.expr], defaults: bool = True) -> dict[str, bool]:
    """The truth of each parameter of ``func`` that this call (``given``: parameter to argument)
    binds to a literal, or leaves to a literal default (where ``defaults``: nothing else fills it),
    and that ``func`` never binds again (``names``: the module's resolver)."""
    args = func.args
    left: dict[str, ast.expr] = {}
    if defaults:
        left = dict(zip([a.arg for a in args.args[len(args.args) - len(args.defaults):]], args.defaults))
        left.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    literal = {param.arg: value.value for param in [*args.args, *args.kwonlyargs]
               if isinstance(value := given.get(param.arg, left.get(param.arg)), ast.Constant)}
    if not literal:
        return {}  # (the common case: no walk of the body)
    scope = names.scope_opened_by(func)
    return {name: bool(value) for name, value in literal.items()
            if scope is not None and len(scope.bindings.get(name, ())) == 1 and not names.declared_shared(name)}


def branch(test: ast.expr, flags: dict[str, bool]) -> bool | None:
    """Whether the body of an ``if`` on ``test`` runs (False: its ``else``); None where ``test`` is
    not one of ``flags`` or ``not`` one."""
    inner, negated = without_not(test)
    if isinstance(inner, ast.Name) and inner.id in flags:
        return flags[inner.id] != negated
    return None


def runs(module, node: ast.AST, flags: dict[str, bool]) -> bool:
    """Whether ``node``, in the body of a function, runs at a call with ``flags``: no ``if`` (or
    conditional expression) around it in its scope on a flag takes the other branch. (A nested
    scope's ``if`` on the name reads its own binding, not the flag: it is not asked.)"""
    return not skipped(module, node, lambda test: branch(test, flags))
