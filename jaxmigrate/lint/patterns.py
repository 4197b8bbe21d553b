"""Small shared recognisers for the sharp-bit rules (JM4xx/JM5xx): "is this jax's X" questions
answered through the one resolver, never by a bare name match."""

from __future__ import annotations

import ast
from functools import cache
from typing import Iterable, Iterator

from jaxmigrate.names import NameResolver, ValueBinding

DEVICE_COUNTS = frozenset({"jax.local_device_count", "jax.device_count"})
DEVICE_LISTS = frozenset({"jax.devices", "jax.local_devices"})
JIT = frozenset({"jax.jit", "jax.experimental.pjit.pjit"})
PMAP = frozenset({"jax.pmap"})
SHARD_MAP = frozenset({"jax.shard_map", "jax.experimental.shard_map.shard_map"})
VMAP = frozenset({"jax.vmap"})
PARTITION_SPEC = frozenset({"jax.sharding.PartitionSpec", "jax.P"})
# collective -> (position, keyword) of its axis name
COLLECTIVES = {
    **{f"jax.lax.{n}": (1, "axis_name") for n in (
        "psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "all_to_all", "psum_scatter",
        "pshuffle", "pbroadcast")},
    "jax.lax.axis_index": (0, "axis_name"),
    "jax.lax.axis_size": (0, "axis_name"),
}
MESH_MAKERS = frozenset({"jax.make_mesh", "jax.sharding.Mesh", "jax.experimental.maps.Mesh"})
TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
BROADCASTS = frozenset({"numpy.broadcast_to", "jax.numpy.broadcast_to"})
STACK_FUNCTIONS = frozenset({"numpy.stack", "jax.numpy.stack"})


def collective_axis_names(names: NameResolver, calls: Iterable[ast.AST]) -> set[str]:
    """The literal axis names the collectives among ``calls`` name (``psum(x, "i")``: ``{"i"}``)."""
    found: set[str] = set()
    for call in calls:
        name = call_name_among(names, call, _COLLECTIVE_NAMES)
        if name is not None and name in COLLECTIVES:
            value = argument(call, *COLLECTIVES[name])  # type: ignore[arg-type]
            parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            found |= {text for part in parts if (text := str_literal(part)) is not None}
    return found


def call_name(names: NameResolver, node: ast.AST) -> str | None:
    """The qualified name a call's callee unambiguously refers to."""
    return names.qualified_name(node.func) if node.__class__ is ast.Call else None


def call_name_among(names: NameResolver, node: ast.AST, wanted: frozenset[str]) -> str | None:
    """``call_name`` for a caller that only asks whether it is one of ``wanted``: None, without
    resolving, for an `x.attr(...)` whose attr no wanted name ends with."""
    if node.__class__ is not ast.Call:
        return None
    func = node.func
    if func.__class__ is ast.Attribute and func.attr not in _last_components(wanted):
        return None
    return names.qualified_name(func)


def calls_to(names: NameResolver, node: ast.AST, wanted: Iterable[str]) -> bool:
    if node.__class__ is not ast.Call:
        return False
    func = node.func
    if func.__class__ is ast.Attribute and func.attr not in _last_components(frozenset(wanted)):
        return False  # `x.attr` can only name something ending in `.attr`: no need to resolve it
    return names.qualified_name(func) in wanted


_COLLECTIVE_NAMES = frozenset(COLLECTIVES)


@cache
def _last_components(qualnames: frozenset[str]) -> frozenset[str]:
    return frozenset(name.rpartition(".")[2] for name in qualnames)


def str_literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return call.args[position]
    return None


def single_value(names: NameResolver, name: ast.Name) -> ast.expr | None:
    """The value a Name is bound to when its scope binds it exactly once, by a plain assignment."""
    bindings = names.bindings(name)
    if len(bindings) == 1 and isinstance(bindings[0], ValueBinding):
        return bindings[0].value
    return None


def is_device_count(names: NameResolver, expr: ast.AST, _depth: int = 0) -> bool:
    """``jax.local_device_count()``, ``jax.device_count()``, ``len(jax.devices())`` and names bound
    (once) to one of them: the number of devices, the size of pmap's leading axis."""
    if _depth > 4:
        return False
    if isinstance(expr, ast.Call):
        if calls_to(names, expr, DEVICE_COUNTS):
            return True
        if names.builtin(expr.func) == "len" and len(expr.args) == 1:
            return calls_to(names, expr.args[0], DEVICE_LISTS)
    if isinstance(expr, ast.Name):
        value = single_value(names, expr)
        return value is not None and is_device_count(names, value, _depth + 1)
    return False


def mentions_devices(names: NameResolver, expr: ast.AST) -> bool:
    """Whether the expression reads ``jax.devices()`` / ``jax.local_devices()`` (a device array)."""
    return reads_call(names, expr, DEVICE_LISTS)


def decorated_by(names: NameResolver, func: ast.AST, wanted: frozenset[str]) -> bool:
    """``@jax.jit``, ``@jax.jit(...)``-style and ``@partial(jax.jit, ...)`` decorators."""
    for decorator in getattr(func, "decorator_list", ()):
        target = decorator.func if isinstance(decorator, ast.Call) and not names.resolve(decorator) else decorator
        if any(t.name in wanted for t in names.resolve(target)):
            return True
    return False


def is_exact_pmap_rewrite(names: NameResolver, node: ast.AST) -> bool:
    """``jax.jit(jax.shard_map(jax.vmap(f), ...))`` (also without the jit) or a def decorated by
    both ``partial(jax.shard_map, ...)`` and ``jax.vmap``: the form JM101's exact fix writes for a
    pmap, which keeps pmap's leading device axis. The rules about that axis (JM503, JM505) count
    it as a pmap, so a finding does not vanish because the pmap it depends on was rewritten."""
    if isinstance(node, ast.Call):
        if node.args and calls_to(names, node, JIT):
            node = node.args[0]
        return calls_to(names, node, SHARD_MAP) and bool(node.args) and calls_to(names, node.args[0], VMAP)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return decorated_by(names, node, SHARD_MAP) and decorated_by(names, node, VMAP)
    return False


def has_exact_pmap_rewrite(names: NameResolver, by_type: dict) -> bool:
    """Whether the module holds ``is_exact_pmap_rewrite`` code (``by_type``: the file's index)."""
    return any(is_exact_pmap_rewrite(names, node)
               for kind in (ast.Call, ast.FunctionDef, ast.AsyncFunctionDef)
               for _, node in by_type.get(kind, ()))


def own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of a body that runs in that body's scope: nested defs, lambdas and classes
    are skipped (their code runs in another scope, at another time)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


# -- helpers added for JM402 / JM507 / JM508 ------------------------------------------------------

MESH_CONTEXTS = frozenset({
    "jax.set_mesh", "jax.sharding.set_mesh", "jax.sharding.use_mesh", "jax.use_mesh",
    "jax.sharding.use_abstract_mesh",
})
NAMED_SHARDING = frozenset({"jax.sharding.NamedSharding", "jax.NamedSharding"})
SHARD_MAPS = frozenset({
    "jax.shard_map", "jax.experimental.shard_map.shard_map", "jax.smap", "jax.experimental.maps.xmap",
})


def literal_strings(node: ast.AST | None) -> set[str] | None:
    """The strings of a literal string or (nested) tuple/list of them; None when not all literal."""
    if (text := str_literal(node)) is not None:
        return {text}
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = [literal_strings(e) for e in node.elts]
        return None if any(p is None for p in parts) else set().union(*parts)
    return None


def spec_repr(call: ast.Call) -> str:
    """How JAX prints a ``PartitionSpec(...)`` call's value (``P('batch',)``), when every entry is
    a literal name, ``None`` or a tuple of names; ``P(...)`` otherwise."""

    def entry(node: ast.expr):
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
            return node.value
        if isinstance(node, ast.Tuple) and all(str_literal(e) is not None for e in node.elts):
            return tuple(str_literal(e) for e in node.elts)
        raise ValueError

    try:
        return "P" + repr(tuple(entry(arg) for arg in call.args)) if not call.keywords else "P(...)"
    except ValueError:
        return "P(...)"


def leaf_function_body(names: NameResolver, value: ast.AST) -> ast.AST:
    """The body of the lambda a tree map applies (``jax.tree.map(lambda x: <body>, tree)``), else
    ``value`` itself: what each leaf of the value is made by."""
    if call_name_among(names, value, TREE_MAPS) in TREE_MAPS and value.args and isinstance(value.args[0], ast.Lambda):
        return value.args[0].body
    return value


def broadcast_copies(names: NameResolver, value: ast.AST) -> bool:
    """``np.broadcast_to(x, (n, *np.shape(x)))``, or a tree map of it: copies of one value along a
    new leading axis, as ``device_put_replicated`` made them and JM302's fix writes them."""
    return call_name_among(names, leaf_function_body(names, value), BROADCASTS) in BROADCASTS


def reads_call(names: NameResolver, expr: ast.AST, wanted: frozenset[str]) -> bool:
    """Whether the expression calls one of ``wanted``, directly or through names bound once."""
    for node in ast.walk(expr):
        if calls_to(names, node, wanted):
            return True
        if isinstance(node, ast.Name):
            value = single_value(names, node)
            if value is not None and any(calls_to(names, n, wanted) for n in ast.walk(value)):
                return True
    return False


def refers_to(names: NameResolver, name: ast.Name, definition: ast.AST) -> bool:
    """Whether the only thing a Name may read is the binding made by ``definition`` (a def, or
    the value of a single assignment)."""
    bindings = names.bindings(name)
    return len(bindings) == 1 and getattr(bindings[0], "node", getattr(bindings[0], "value", None)) is definition

