"""A step held by an object: ``self.p_train_step = jax.pmap(...)`` in a method, with the values
that carry pmap's device axis (``self.params``) on the object's attributes too.

Training code often keeps its step and its replicated state on a trainer object::

    class Trainer:
        def __init__(self, lr):
            self.p_train_step = jax.pmap(partial(train_step, lr=lr), axis_name="batch")
            self.params = flax.jax_utils.replicate(init_params())

        def fit(self, batch):
            self.params, loss = self.p_train_step(self.params, common_utils.shard(batch))

The class's methods are then read like the functions that drive a step, and each attribute of
``self`` is one value for all of them: its kind is what every assignment in the class gives it,
joined (``driving``). That holds only while nothing else can reach those attributes, so a class
is followed when it derives from nothing (``object``), no class derives from it in the module,
``self`` is only ever used for its attributes, and an attribute with the device axis, or holding
the step, is read only as ``self.<name>`` in the class's own methods.

A method is also followed where it is called on an object known to be an instance of exactly its
class (``method_called``): a data stream's ``stream.train_iter()`` returning
``self.generate(self.train_dl)``, a generator method that splits each batch, is read at each call
as a function of the module is.
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import enclosing_scope
from jaxmigrate.migrate.global_view.kinds import Blocked
from jaxmigrate.names import OpaqueBinding, ValueBinding


def method_of(module, node: ast.AST) -> tuple[ast.ClassDef, ast.FunctionDef] | None:
    """The class and the method whose own body ``node`` is in (not a function nested in it)."""
    parent = enclosing_scope(module, node)
    if not isinstance(parent, ast.FunctionDef):
        return None
    owner = module.parent_of(parent)
    if not isinstance(owner, ast.ClassDef) or parent.decorator_list or not parent.args.args:
        return None
    return owner, parent


def self_attribute(module, node: ast.AST) -> tuple[ast.ClassDef, str] | None:
    """``self.<name>`` in a method of a class, ``self`` its first parameter: (the class, name)."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    found = method_of(module, node)
    if found is None:
        return None
    owner, method = found
    if node.value.id != method.args.args[0].arg:
        return None
    bindings = module.names.bindings(node.value)
    if not (len(bindings) == 1 and getattr(bindings[0], "node", None) is method.args.args[0]):
        return None  # `self` rebound in the method
    return owner, node.attr


def plain_class(owner: ast.ClassDef) -> bool:
    """A class with no base but ``object``, no keywords (a metaclass) and no decorators: nothing
    but its own body decides what its attributes are."""
    return len(owner.bases) <= 1 and all(isinstance(base, ast.Name) and base.id == "object" for base in owner.bases) \
        and not owner.keywords and not owner.decorator_list


def subclass_of(module, owner: ast.ClassDef) -> ast.ClassDef | None:
    """A class of the module that derives from ``owner`` (by its name)."""
    return next((node for node in module.of_type(ast.ClassDef)
                 if any(isinstance(base, ast.Name) and base.id == owner.name for base in node.bases)), None)


def check_holder(module, owner: ast.ClassDef) -> None:
    """The class's attributes are reached only through its own methods' ``self``."""
    if not plain_class(owner):
        raise Blocked(owner.lineno, f"`{owner.name}`, which holds the pmapped step, has a base class, keywords "
                      "or decorators: code this fix does not read may reach its attributes")
    derived = subclass_of(module, owner)
    if derived is not None:
        raise Blocked(derived.lineno, f"`{derived.name}` derives from `{owner.name}`, which holds the pmapped step")
    for statement in owner.body:
        if not isinstance(statement, ast.FunctionDef):
            continue  # class-level values: `class_level_names`
        if statement.decorator_list or not statement.args.args:
            raise Blocked(statement.lineno, f"`{owner.name}.{statement.name}` is a static, class or decorated "
                          "method of the class that holds the pmapped step")
        me = statement.args.args[0].arg
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id == me and isinstance(node.ctx, ast.Load):
                parent = module.parent_of(node)
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    raise Blocked(node.lineno, f"`{me}` is passed on here: code this fix does not read may reach "
                                  f"the attributes of `{owner.name}`, which holds the pmapped step")


def reads_only_through_self(module, owner: ast.ClassDef, attribute: str, read_scopes: frozenset[int],
                            what: str) -> None:
    """Every ``.attribute`` of the module is ``self.attribute`` in a method of ``owner`` the analysis
    read (``read_scopes``): anything else may see ``what``."""
    for node in module.of_type(ast.Attribute):
        if node.attr != attribute:
            continue
        found = self_attribute(module, node)
        method = method_of(module, node)
        if found is None or found[0] is not owner or method is None or id(method[1]) not in read_scopes:
            raise Blocked(node.lineno, f"`.{attribute}` is read here, where this fix does not follow it: "
                          f"on `{owner.name}` it holds {what}")


def class_level_names(owner: ast.ClassDef) -> dict[str, int]:
    """Names the class body binds (``params = None``), with their lines: ``self.<name>`` reads that
    value until a method assigns one, which a kind joined over the methods' assignments ignores."""
    found = {}
    for statement in owner.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    found.setdefault(node.id, statement.lineno)
    return found


def method_called(module, func: ast.expr) -> ast.FunctionDef | None:
    """The method of a class of this module that ``func`` (``x.name`` in ``x.name(...)``) calls, where
    the object is known to be an instance of exactly that class: ``stream.train_iter()`` with
    ``stream = DataStream(config)`` bound once in its scope, or ``self.generate(...)`` in a method of
    the class from which nothing in the module derives. None where it may be anything else: a
    class with a base (which may intercept attribute reads), a decorator, a metaclass, its own
    ``__getattribute__`` or ``__new__``, an attribute of that name assigned anywhere (an
    instance's own value shadows the method), the name bound twice in the class, or a decorated
    method (a property, a static method)."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    held = self_attribute(module, func)
    if held is not None:
        owner = held[0]
        if subclass_of(module, owner) is not None:
            return None
    else:
        bindings = module.names.bindings(func.value)
        made = bindings[0].value if len(bindings) == 1 and isinstance(bindings[0], ValueBinding) else None
        if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Name)):
            return None
        classes = module.names.bindings(made.func)
        owner = classes[0].node if len(classes) == 1 and isinstance(classes[0], OpaqueBinding) else None
        if not (isinstance(owner, ast.ClassDef) and isinstance(module.parent_of(owner), ast.Module)):
            return None
    if not plain_class(owner):
        return None
    if any(_binds(statement, special) for statement in owner.body for special in ("__getattribute__", "__new__")):
        return None  # (attribute reads intercepted; an instance of something else made)
    defined = [statement for statement in owner.body if _binds(statement, func.attr)]
    method = defined[0] if len(defined) == 1 else None
    if not (isinstance(method, ast.FunctionDef) and not method.decorator_list and method.args.args):
        return None
    if any(node.attr == func.attr and not isinstance(node.ctx, ast.Load) for node in module.of_type(ast.Attribute)):
        return None
    return method


def _binds(statement: ast.stmt, name: str) -> bool:
    """Whether a statement of a class body binds ``name`` there."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name == name
    targets = statement.targets if isinstance(statement, ast.Assign) else (
        [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else [])
    return any(isinstance(n, ast.Name) and n.id == name for target in targets for n in ast.walk(target))


def method_uses(module, method: ast.FunctionDef) -> list[ast.Attribute]:
    """Every ``.name`` of the module with the method's name: the reads that may reach it."""
    return [node for node in module.of_type(ast.Attribute) if node.attr == method.name]
