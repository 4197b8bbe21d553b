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
"""

from __future__ import annotations

import ast

from jaxmigrate.core.flow import enclosing_scope
from jaxmigrate.migrate.global_view.kinds import Blocked


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


def check_holder(module, owner: ast.ClassDef) -> None:
    """The class's attributes are reached only through its own methods' ``self``."""
    if owner.bases or owner.keywords or owner.decorator_list:
        if not (len(owner.bases) == 1 and isinstance(owner.bases[0], ast.Name) and owner.bases[0].id == "object"
                and not owner.keywords and not owner.decorator_list):
            raise Blocked(owner.lineno, f"`{owner.name}`, which holds the pmapped step, has a base class, keywords "
                          "or decorators: code this fix does not read may reach its attributes")
    for node in module.of_type(ast.ClassDef):
        if any(isinstance(base, ast.Name) and base.id == owner.name for base in node.bases):
            raise Blocked(node.lineno, f"`{node.name}` derives from `{owner.name}`, which holds the pmapped step")
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
