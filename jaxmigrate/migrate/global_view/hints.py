"""What made a value the global view does not recognise, told in its finding with what to use
instead: ``prefetch_to_device``, ``pad_shard_unpad``, a replication onto some of the devices, a
generator that stacks whole values per device. Read back from the argument through the names it
was bound from and the program's functions that return it."""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import enclosing_scope, reads_of
from jaxmigrate.lint.patterns import STACK_FUNCTIONS
from jaxmigrate.migrate._pmap_sites import planner_of
from jaxmigrate.names import OpaqueBinding

DEVICE_PUT_REPLICATED = "jax.device_put_replicated"
_SPLITS = frozenset(f"{np}.{name}" for np in ("jax.numpy", "numpy") for name in ("split", "array_split"))
_HINTS = {
    "flax.jax_utils.prefetch_to_device": "yields batches with pmap's device axis; in the global view make each "
    "host batch a global array with `jax.make_array_from_process_local_data` (prefetching those if needed)",
    "flax.jax_utils.pad_shard_unpad": "wraps the step in pmap's convention; call the jitted step on the "
    "padded global batch instead",
}

PAD_SHARD_UNPAD = "flax.jax_utils.pad_shard_unpad"


def stored_pad_wrapper(module, name: ast.Name) -> ast.Call | None:
    """The ``pad_shard_unpad(p_eval_step, ...)`` that the name read at ``name`` holds, where the
    program keeps the wrapped step under a name, as flax's full-evaluation guide does
    (``p_eval_step_pad = pad_shard_unpad(p_eval_step, static_argnums=(0,), static_return=True)``)
    and ``kept_for_calls`` holds."""
    bindings = module.names.bindings(name)
    value = getattr(bindings[0], "value", None) if len(bindings) == 1 else None
    return value if isinstance(value, ast.Call) and kept_for_calls(module, value) else None


def kept_for_calls(module, wrapper: ast.Call) -> bool:
    """``wrapper``, a ``pad_shard_unpad`` of a name, is the whole value of a name bound once, by an
    assignment of its own, that is read only where it is called, in the scope that binds it."""
    statement = module.parent_of(wrapper)
    if not (module.names.qualified_name(wrapper.func) == PAD_SHARD_UNPAD and wrapper.args
            and isinstance(wrapper.args[0], ast.Name) and isinstance(statement, ast.Assign)
            and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
        return False
    name, scope = statement.targets[0].id, enclosing_scope(module, statement)
    reads = reads_of(module, name, wrapper)
    if any(len(module.names.bindings(read)) != 1 for read in reads):
        return False  # another binding may reach a read
    if any(isinstance(store.ctx, ast.Store) and store is not statement.targets[0]
           and enclosing_scope(module, store) is scope for _, store in module.names_at.get(name, ())):
        return False  # bound again in that scope
    return bool(reads) and all(isinstance(module.parent_of(r), ast.Call) and module.parent_of(r).func is r
                               and enclosing_scope(module, r) is scope for r in reads)


def step_used_as_value(module, node: ast.Name) -> str:
    """Why a step named other than in a call of it blocks, said for the uses that have a name."""
    parent = module.parent_of(node)
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node \
            and module.names.qualified_name(parent.func) == PAD_SHARD_UNPAD:
        return (f"`{node.id}` is wrapped in `pad_shard_unpad`, which pads each batch to a multiple of the local "
                "devices and splits it per device: the fix writes that padding out only where the wrapped step is "
                "called at once (`pad_shard_unpad(step, static_return=True)(...)`) or kept under a name bound once "
                "and only called, in the scope that binds it")
    return f"`{node.id}` is used other than by calling it"


def _outer_name_not_followed(drivers, arg: ast.expr) -> str | None:
    """Where ``arg`` reads a name of the function defining the nested one being read, at a call
    that does not read it as a closure (LRA's evaluation called through another nested function
    that binds the same name): the value of that name is not known there."""
    if not drivers._inline:
        return None
    func = drivers._inline[-1][0]
    if not isinstance(func, ast.FunctionDef) or id(func) in drivers.closures:
        return None
    for name in (n for n in ast.walk(arg) if isinstance(n, ast.Name) and drivers.scope_of(n) is func):
        for binding in drivers.names.bindings(name):
            node = getattr(binding, "node", None)
            defining = drivers.scope_of(node) if node is not None else None
            if isinstance(defining, ast.FunctionDef) and defining is not func \
                    and drivers.module.parent_of(func) is defining:
                return (f"; `{name.id}` is a name of `{defining.name}`, which defines `{func.name}`: this fix reads "
                        f"`{func.name}` with `{defining.name}`'s values only at its calls in `{defining.name}`, or in "
                        "another function nested there that binds none of the names it reads from there")
    return None


def made_by(drivers, arg: ast.expr, depth: int = 0) -> str:
    """What made ``arg`` with pmap's device axis, when it is a known maker, with what to use instead
    (a parameter of a function being read at its call: what that call passed). ``drivers``: the
    ``driving.DriverAnalyzer`` reading the code around ``arg``."""
    producers: list[ast.AST] = [arg]
    outer = _outer_name_not_followed(drivers, arg) if depth == 0 else None
    if outer is not None:
        return outer
    if isinstance(arg, ast.Name) and depth < len(drivers._passed) and drivers._inline \
            and drivers.scope_of(arg) is drivers._inline[-1 - depth][0] and arg.id in drivers._passed[-1 - depth]:
        return made_by(drivers, drivers._passed[-1 - depth][arg.id], depth + 1)
    names, short = drivers.names, drivers._short
    # What the names in it were bound to, and what the program's functions called there
    # return, a few steps back (imagenet's `batch` of `train_iter`, of `create_input_iter(...)`,
    # which returns `it`, made by `prefetch_to_device(it, 2)`). Each name of each scope is looked
    # up once, in an index of its scope's assignments made once.
    indexes: dict[int, dict[str, list[ast.AST]]] = {}
    looked_up: set[tuple[int, str]] = set()
    layer = list(producers)
    for _ in range(5):
        found = []
        for name in (n for p in layer for n in ast.walk(p) if isinstance(n, ast.Name)):
            scope = drivers.scope_of(name)
            if (id(scope), name.id) in looked_up:
                continue
            looked_up.add((id(scope), name.id))
            if id(scope) not in indexes:
                indexes[id(scope)] = _bound_values(scope)
            found += indexes[id(scope)].get(name.id, [])
            made = names.bindings(name)
            if len(made) == 1 and isinstance(made[0], OpaqueBinding) and isinstance(made[0].node, ast.FunctionDef):
                found += [n.value for n in ast.walk(made[0].node)
                          if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None]
        producers += found
        layer = found
    for producer in producers:
        for call in ast.walk(producer):
            if not isinstance(call, ast.Call):
                continue
            qualified = names.qualified_name(call.func)
            if qualified in _HINTS:
                return f"; `{short(call)}` (line {call.lineno}) {_HINTS[qualified]}"
            if qualified == DEVICE_PUT_REPLICATED and len(call.args) == 2:
                return (f"; `{short(call)}` (line {call.lineno}) replicates onto `{short(call.args[1])}`, not "
                        "shown to be every local device, which the mesh holds")
            count = drivers.shapes.split_by_every_process(call)
            if count is not None:
                bound = names.bindings(count) if isinstance(count, ast.Name) else ()
                counted = f" (`{short(bound[0].value)}`, line {bound[0].value.lineno})" if bound else ""
                return (f"; `{short(call)}` (line {call.lineno}) splits by `{short(count)}`{counted}, which counts "
                        "the devices of every process, where pmap maps over this process's own: this module runs "
                        f"as several processes ({planner_of(drivers.module).multi_process}); split by "
                        "`jax.local_device_count()`")
            stacked = _stacks(names, call.func)
            if stacked is not None:
                return (f"; `{short(call)}` (line {call.lineno}) gives values stacked on a new leading axis "
                        f"(`{short(stacked)}`, line {stacked.lineno}): one whole value per device, not the "
                        "slices of one batch that a reshape or `shard` makes")
    return ""


def _stacks(names, func: ast.expr) -> ast.Call | None:
    """The ``stack`` call in what a def of this module called as ``func`` returns or yields
    (jraph's ``device_batch`` generator stacks ``local_device_count()`` graph batches)."""
    if not isinstance(func, ast.Name):
        return None
    bindings = names.bindings(func)
    if len(bindings) != 1 or not isinstance(bindings[0], OpaqueBinding) \
            or not isinstance(bindings[0].node, ast.FunctionDef):
        return None
    for node in ast.walk(bindings[0].node):
        if isinstance(node, (ast.Return, ast.Yield)) and node.value is not None:
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and names.qualified_name(call.func) in STACK_FUNCTIONS and not (
                        call.args and isinstance(call.args[0], ast.Call)
                        and names.qualified_name(call.args[0].func) in _SPLITS):
                    return call  # (a stack of `split(x, n)` is a reshape: slices of one batch)
    return None


def _bound_values(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """The values each name of ``scope`` (and of what it nests) is assigned, or iterates over."""
    values: dict[str, list[ast.AST]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.For):
            for target in ast.walk(node.target):
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.iter)
    return values
