"""Which code of a module may run under a JAX trace, where ``jax.set_mesh`` raises.

0.10.2's ``set_mesh`` checks ``core.trace_state_clean()`` and raises ``ValueError: `set_mesh` can
only be used outside of `jax.jit``` inside a trace, where ``with mesh:`` did not. A function is
traced here when it is:

* decorated by a transform (``@jax.jit``, ``@partial(jax.pmap, ...)``, ``@jax.checkpoint``, ...);
* given to a transform, by name, as a lambda, as ``partial(f, ...)`` or as ``self.f``
  (``jax.jit(step)``, ``jax.lax.scan(body, ...)``, ``pjit(lambda x: ..., ...)``);
* a method of a flax / haiku Module, which ``init`` / ``apply`` run under their transforms;
* called by name from a traced function of the module (followed to a fixed point).

Functions of other modules are not followed; what they do stays the fix's stated risk.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.module import ParsedModule
from jaxmigrate.names import OpaqueBinding

TRANSFORMS = frozenset({
    "jax.jit", "jax.pmap", "jax.vmap", "jax.grad", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev",
    "jax.hessian", "jax.jvp", "jax.vjp", "jax.linearize", "jax.checkpoint", "jax.remat", "jax.eval_shape",
    "jax.make_jaxpr", "jax.custom_jvp", "jax.custom_vjp", "jax.named_call", "jax.xla_computation",
    "jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.cond", "jax.lax.switch", "jax.lax.map",
    "jax.lax.associative_scan", "jax.shard_map", "jax.experimental.shard_map.shard_map",
    "jax.experimental.pjit.pjit", "jax.pjit", "jax._src.pjit.pjit", "jax.experimental.maps.xmap",
    "flax.linen.jit", "flax.linen.vmap", "flax.linen.scan", "flax.linen.remat", "flax.linen.checkpoint",
    "flax.linen.while_loop", "flax.linen.cond", "flax.linen.switch", "flax.linen.map_variables",
})
_MODULE_BASES = frozenset({"flax.linen.Module", "flax.linen.module.Module", "haiku.Module"})
_PARTIAL = frozenset({"functools.partial"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class TracedCode:
    """The module's functions that may run under a trace, each with why."""

    def __init__(self, module: ParsedModule) -> None:
        self.module = module
        self.why: dict[int, str] = {}
        self._seed()
        self._propagate()

    def around(self, node: ast.AST) -> str | None:
        """Why ``node`` may run under a trace (the innermost traced function around it), or None."""
        parent = self.module.parent_of(node)
        while parent is not None:
            if isinstance(parent, _FUNCTIONS) and id(parent) in self.why:
                return self.why[id(parent)]
            parent = self.module.parent_of(parent)
        return None

    # -- what starts a trace -------------------------------------------------------------------

    def _transform(self, expr: ast.expr) -> str | None:
        """The transform ``expr`` is (``jax.jit``, ``partial(jax.jit, ...)``), spelled as written."""
        names = self.module.names
        if isinstance(expr, ast.Call) and names.candidates(expr.func) & _PARTIAL and expr.args:
            expr = expr.args[0]
        if isinstance(expr, (ast.Name, ast.Attribute)) and names.candidates(expr) & TRANSFORMS:
            return self.module.segment(expr)
        return None

    def _seed(self) -> None:
        module = self.module
        for fn in module.of_type(ast.FunctionDef, ast.AsyncFunctionDef):
            for decorator in fn.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) and not (
                    module.names.candidates(decorator.func) & _PARTIAL) else decorator
                if (name := self._transform(target)) is not None:
                    self._mark(fn, f"`{fn.name}` is traced by `@{name}`")
        for call in module.of_type(ast.Call):
            name = self._transform(call.func)
            if name is None:
                continue
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                for fn in self._functions(arg):
                    label = "a lambda" if isinstance(fn, ast.Lambda) else f"`{fn.name}`"
                    self._mark(fn, f"{label} is traced by `{name}` (line {call.lineno})")
        for cls in module.of_type(ast.ClassDef):
            if any(module.names.candidates(base) & _MODULE_BASES for base in cls.bases):
                for fn in cls.body:
                    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self._mark(fn, f"`{cls.name}.{fn.name}` is a Module method, which init/apply trace")

    def _mark(self, fn: ast.AST, why: str) -> None:
        self.why.setdefault(id(fn), why)

    def _functions(self, arg: ast.expr) -> list[ast.AST]:
        """The module's functions ``arg`` hands over (a lambda, a name, ``self.f``, ``partial(f, ...)``)."""
        module = self.module
        if isinstance(arg, ast.Lambda):
            return [arg]
        if isinstance(arg, ast.Call) and module.names.candidates(arg.func) & _PARTIAL and arg.args:
            return self._functions(arg.args[0])
        if isinstance(arg, ast.Name):
            return [b.node for b in module.names.bindings(arg)
                    if isinstance(b, OpaqueBinding) and isinstance(b.node, _FUNCTIONS)]
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id in ("self", "cls"):
            cls = module.parent_of(arg)
            while cls is not None and not isinstance(cls, ast.ClassDef):
                cls = module.parent_of(cls)
            if cls is not None:
                return [fn for fn in cls.body
                        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == arg.attr]
        return []

    def _propagate(self) -> None:
        """A function called by name from a traced one runs under the same trace."""
        by_id = {id(fn): fn for fn in self.module.of_type(*_FUNCTIONS)}
        todo = list(self.why)
        while todo:
            caller = by_id[todo.pop()]
            for call in (n for n in ast.walk(caller) if isinstance(n, ast.Call)):
                for fn in self._functions(call.func):
                    if id(fn) not in self.why and not isinstance(fn, ast.Lambda):
                        root = self.why[id(caller)].partition(": ")[2] or self.why[id(caller)]
                        self.why[id(fn)] = f"`{fn.name}` is called from traced code: {root}"
                        todo.append(id(fn))
