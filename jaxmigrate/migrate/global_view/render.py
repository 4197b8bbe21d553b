"""The global view written: the module's pmapped steps, their collectives and the code driving
them rewritten into one Plan (``jax.jit``, the mesh built where the driving code runs, layouts,
collectives dropped or scaled, replicate / unreplicate calls and device-count reshapes removed).

The analyses it reads: ``step`` (what the step's collectives reduce), ``driving`` (where values get
and lose the device axis), ``options`` (how pmap is applied). Anything they cannot prove raises
``Blocked`` with its line, and the module keeps its pmaps.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace

from jaxmigrate.core.edits import Edit
from jaxmigrate.core.flow import ancestors, child_of, enclosing_scope, reaching_assignment, reads_of
from jaxmigrate.core.module import is_main_guard, is_script
from jaxmigrate.lint.patterns import TREE_MAPS
from jaxmigrate.migrate._meshes import every_device_mesh_axis
from jaxmigrate.migrate._layout import has_own_brackets
from jaxmigrate.migrate._plan import Namer, Plan, literal_int
from jaxmigrate.migrate._pmap_sites import Application, planner_of
from jaxmigrate.migrate.global_view.commented_call import LOST, arguments_span, call_arguments, jit_in_place
from jaxmigrate.migrate.global_view.einops_patterns import quoted_like
from jaxmigrate.migrate.global_view.driving import (
    DriverAnalyzer,
    Step,
    binding_node,
    call_given,
    literal,
    literal_positions,
    short,
)
from jaxmigrate.migrate.global_view.helpers import Helper, only_parameter
from jaxmigrate.migrate.global_view.hints import PAD_SHARD_UNPAD, kept_for_calls, step_used_as_value, stored_pad_wrapper
from jaxmigrate.migrate.global_view.kinds import BOT, KEY, ROWS, Blocked, M, R, S, U, describe, leaves
from jaxmigrate.migrate.global_view.options import (
    branches_apart,
    def_of,
    every_device,
    factory_of,
    made_def_of,
    partial_of,
    read_options,
    returned_def,
)
from jaxmigrate.migrate.global_view.modes import Mode, runs_only_in, runs_only_outside
from jaxmigrate.migrate.global_view.objects import method_of, self_attribute
from jaxmigrate.migrate.global_view.one_mesh import MeshPassing, pass_one_mesh
from jaxmigrate.migrate.global_view.shapes import DeviceAxisShapes
from jaxmigrate.migrate.global_view.step import CollectiveEdit, StepAnalyzer
from jaxmigrate.names import ImportBinding, ValueBinding

# Transforms that bind an axis name a collective may read, besides pmap.
_AXIS_BINDERS = frozenset({"jax.vmap", "jax.shard_map", "jax.experimental.shard_map.shard_map",
                           "jax.experimental.maps.xmap"})
_OPTIONS = frozenset({"axis_name", "in_axes", "out_axes", "static_broadcasted_argnums", "donate_argnums"})
# pmap's options that `jax.jit` takes too, by the name jit gives them.
_JIT_OPTIONS = {"static_broadcasted_argnums": "static_argnums", "donate_argnums": "donate_argnums"}
# Words of a comment that speaks of what the global view removes (devices, their copies, collectives).
_DEVICE_WORDS = re.compile(r"\b(devices?|replicas?|replicated|across|cross[- ]replica|pmean|psum|all[- ]?reduce|"
                           r"sync|synchroni[sz]ed?)\b", re.IGNORECASE)
# Calls that fetch a replicated array to the host: on any process, from the copy it holds.
_HOST_READS = frozenset({"jax.device_get", "numpy.asarray", "numpy.array", "builtins.float", "builtins.int"})


class Builder:
    def __init__(self, module, apps: list[Application], mode: Mode | None = None) -> None:
        self.module = module
        self.apps = apps
        self.mode = mode  # the pmap mode of a program that runs in one of two (``modes``)
        self.plan = Plan()
        self.namer = Namer(module, self.plan)
        self.axis: str | None = None
        self.steps: dict[str, Step] = {}
        self.jit_options: dict[str, list[str]] = {}  # a step's keywords for `jax.jit` (`donate_argnums=...`)
        self.app_of: dict[str, Application] = {}
        self.fun: dict[str, ast.expr | None] = {}  # call form: the function pmap maps
        self.jitted: dict[int, ast.Call] = {}  # a pmap call's id -> the `jax.jit(...)` around it
        self.notes: set[str] = set()
        self._keys_noted = False  # a note says the per-device keys' random streams change
        self.passed: list[ast.Name] = []  # steps passed to functions of the module (``_given_to_function``)
        self._dropped: set[int] = set()  # statements the rewrite deletes whole (a kept pad wrapper)
        self._deleted: set[int] = set()  # every statement whose lines the rewrite deletes
        self.unused: dict[int, str] = {}  # the line of a pmap left as it is (``_leave_unused``) -> why
        self._helpers_going: list[Helper] | None = None  # (``_unused_helpers``, found once the edits are known)

    # -- the pmap applications ---------------------------------------------------------------

    def build(self) -> Plan:
        for app in self.apps:
            self._step(app)
        self._leave_unused()
        self._no_other_uses()
        drivers = DriverAnalyzer(self.module, self.steps, self.mode)
        # A factory's locals are host values: its callers pass only those (driving code's `_host`).
        factories = frozenset(id(step.factory) for step in self.steps.values() if step.factory is not None)
        analyses = {}
        for _ in range(4):
            try:
                drivers.analyse()
            except Blocked as blocked:
                raise self._with_what_the_step_does(blocked, drivers, factories) from None
            for step in self.steps.values():
                if step.name in drivers.called:
                    continue
                owner = enclosing_scope(self.module, step.binding)
                if isinstance(owner, ast.FunctionDef) and step.holder is None and step.factory is None:
                    raise Blocked(step.binding.lineno, f"`{step.name}` is made in `{owner.name}` and never called: "
                                  "with no call, the values it is meant for are not known (delete it if it is not "
                                  "used)")
                raise Blocked(step.line, f"`{step.name}` is not called in this module: its callers "
                              "elsewhere pass values with pmap's device axis")
            changed = False
            for step in self.steps.values():
                if any(p == BOT for p in step.params):
                    continue  # fed another step's outputs, not known yet on this round
                if step.opaque is not None:  # its arguments are all replicated (the driving code's check)
                    changed = changed or step.outputs != R
                    step.outputs = R
                    continue
                analysis = StepAnalyzer(self.module, step.axis, drivers.host_scopes() | factories).analyse(
                    step.func, step.params, step.bound)
                analyses[step.name] = analysis
                if analysis.output != step.outputs:
                    step.outputs, changed = analysis.output, True
                if any(isinstance(leaf, U) or leaf == ROWS for leaf in leaves(step.outputs)):
                    # Why the step's values are unknown, not where the driving code then reads them.
                    self._check_outputs(step)
            if not changed:
                for step in self.steps.values():
                    if any(p == BOT for p in step.params):
                        missing = step.params.index(BOT) + 1
                        raise Blocked(step.line, f"argument {missing} of `{step.name}` is never laid out "
                                      "by code this fix follows")
                break
        else:
            raise Blocked(1, "the kinds of the step's values do not settle")
        self._passed_steps_read(drivers)
        if self.mode is not None:
            self._other_mode_untouched(drivers)
        if drivers.averaged:
            self.notes.add(f"the host's averages of per-shard means the steps return one per device "
                           f"({_lines(drivers.averaged)}) stay: they are the global mean the steps now compute, as "
                           "pmap's was in one process (run as several, pmap's was each process's own)")
        if drivers.logged:
            written = "print or log replicated values" if len(drivers.logged) > 1 else "prints or logs a replicated value"
            self.notes.add(f"{_lines(drivers.logged)} {written}: the one value now, where pmap's showed one copy per "
                           "device")
        # The mesh's axis: the name of the pmap that is given the batch (the train step's, not a
        # sync helper's), else the first name; one even where pmap had none.
        batched = [step.axis for step in self.steps.values()
                   if step.axis and any(leaf == S for p in step.params for leaf in leaves(p))]
        self.axis = batched[0] if batched else self.axis or "batch"
        for step in self.steps.values():
            self._check_outputs(step)
        self._rewrite_steps()
        edits: dict[int, CollectiveEdit] = {}
        for analysis in analyses.values():
            edits.update(analysis.edits)
        for edit in edits.values():
            self._collective(edit)
        # Only placements read the mesh: a function that just reads values back needs none.
        placements = [e.node for e in drivers.edits.values()
                      if e.action in ("replicate", "shard", "opaque", "key", "place", "local", "pad")]
        firsts = self._first_placements(placements, drivers.placement_scope)
        self._helpers_going = self._unused_helpers(drivers.edits.values())
        on_object = self._object_mesh(firsts)
        if on_object is not None:  # a trainer object's methods lay out values: its mesh is `self.mesh`
            init, me, where = on_object
            for edit in drivers.edits.values():
                self._driver(edit, f"{_self_of(self.module, edit.node) or me}.mesh")
            self._insert_mesh(f"{me}.mesh", [(init, where)])
        else:
            built = self._built_mesh(firsts)
            # Several functions lay out values: one mesh where they are called from, handed down
            # under the name the program's own mesh has there, if it builds one, else the view's.
            passing = None if built else pass_one_mesh(self.module, firsts, drivers.placement_scope)
            if passing is not None:
                own = self._built_mesh([(passing.root, passing.first)])
                if passing.can_take(own or self._mesh_name()):
                    built, firsts = own, [(passing.root, passing.first)]
                else:
                    passing = None
            mesh = built or self._mesh_name()
            if passing is not None:
                self._hand_down(passing, mesh)
            for edit in drivers.edits.values():
                self._driver(edit, mesh)
            if built is None:
                self._insert_mesh(mesh, firsts)
        removed = self._drop_unused_helpers()
        rewritten = [self.module.span(app.node) for app in self.app_of.values() if app.node is not None]
        self._drop_unused_locals([span for e in drivers.edits.values() for span in self._replaced_spans(e)] + removed,
                                 removed, rewritten + [self.module.span(e.node) for e in edits.values()])
        self._drop_emptied_blocks()
        self._close_blank_gaps()
        draws = {line for analysis in analyses.values() for line in analysis.draws}
        if draws and not self._keys_noted:
            self.notes.add(f"the steps' random draws for the batch's examples ({_lines(draws)}) become one draw for "
                           "the whole batch, where pmap drew each device's slice with that device's key (the same key "
                           "on every device, where the step makes it): the random streams change")
        return self.plan

    def _close_blank_gaps(self) -> None:
        """Lines deleted whole between two blank lines (a step's block of pmeans set apart) leave
        the blank line above them alone: the one below goes with them. The comment lines right
        above such lines, at their indentation, speak of them when nothing follows them in their
        paragraph (``# average gradients across devices`` over the pmeans), or when they speak of
        devices (``# every device computed gradients on its own shard: average them``, whose
        words would be wrong of the global view): they go too."""
        starts, line = self.module.src.line_starts, self.module.src.line
        line_of = {start: number for number, start in enumerate(starts, 1)}
        runs: list[list[int]] = []
        for edit in sorted(self.plan.edits):
            if edit.content or edit.start == edit.end or edit.start not in line_of or edit.end not in line_of:
                continue
            if runs and runs[-1][1] == edit.start:
                runs[-1][1] = edit.end
            else:
                runs.append([edit.start, edit.end])
        touched = {edit.start for edit in self.plan.edits} | {edit.end for edit in self.plan.edits}
        for start, end in runs:
            first, below = line_of[start], line_of[end]
            indent = _indentation(line(first))
            top = first
            while top > 3 and line(top - 1).strip().startswith("#") and _indentation(line(top - 1)) == indent \
                    and starts[top - 2] not in touched:
                top -= 1
            if top < first and (below > len(starts) or not line(below).strip()
                                or len(_indentation(line(below))) < len(indent)
                                or any(_DEVICE_WORDS.search(line(n)) for n in range(top, first))):
                self.plan.edits.append(Edit(starts[top - 1], start, ""))
                start = starts[top - 1]
            above = line_of[start] - 1
            if above < 1 or below >= len(starts) or self.module.src.line(above).strip() \
                    or self.module.src.line(below).strip() or starts[below] in touched:
                continue
            self.plan.edits.append(Edit(end, starts[below], ""))

    def _leave_unused(self) -> None:
        """A step a function (or the ``__main__`` block, which no importer runs) makes and never
        uses (``p_eval_step = jax.pmap(eval_step)`` in a ``main`` that never evaluates) is dead
        code, with no values known for it: it keeps pmap (its finding says why) and the module's
        other steps move without it. Only beside a step that is used: with none, nothing moves and
        the reason stays the finding's."""
        unused, dead = {}, {}
        for name, step in self.steps.items():
            assign = self.module.parent_of(step.binding)
            if self.app_of[name].kind == "decorator" or step.opaque is not None or step.holder or step.entry \
                    or step.factory is not None or not isinstance(assign, ast.Assign) or len(assign.targets) != 1 \
                    or not isinstance(assign.targets[0], ast.Name):
                continue
            owner, target = enclosing_scope(self.module, step.binding), assign.targets[0].id
            in_main = isinstance(owner, ast.Module) and any(map(is_main_guard, ancestors(self.module, assign)))
            if not (isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) or in_main) \
                    or self.module.names.declared_shared(target):
                continue
            again = self._overwritten(step)
            if not reads_of(self.module, target, step.binding):
                where = "the `__main__` block" if in_main else f"`{owner.name}`"
                unused[name] = f"`{target}` is made in {where} and never used (delete it if it is not needed)"
            elif again is not None and self._own_lines(assign):
                dead[name] = (assign, again)  # dead code, a pmap that runs nothing: it goes
            elif again is not None:
                unused[name] = (f"`{target}` is made in `{owner.name}` and bound again at line {again.lineno} before "
                                "any use (delete it if it is not needed)")
        if len(unused) + len(dead) == len(self.steps):
            return
        moving = {id(step.func) for name, step in self.steps.items() if name not in unused and name not in dead}
        gone = []
        for name, why in unused.items():
            if id(self.steps[name].func) not in moving:
                self.unused[self.app_of[name].line] = why
                continue
            assign = self.module.parent_of(self.steps[name].binding)
            if not (self._own_lines(assign) and _without_effects(self.module, assign.value)):
                raise Blocked(self.app_of[name].line, f"{why}; it maps the function a step that moves maps, whose "
                              "collectives the global view removes")
            # Dead code that would map a function whose collectives go: it goes too (timesfm's
            # `p_test_step` made beside the train and eval steps and never called).
            gone.append(name)
            self._delete_lines(assign)
            for node in ast.walk(assign.value):  # (an import it alone read goes with it)
                if isinstance(node, (ast.Name, ast.Attribute)):
                    self._drop_import(node)
            self.notes.add(f"line {assign.lineno}: `{assign.targets[0].id}`, a pmap never used, of a function a step "
                           "that moves maps too, goes")
        for name, (assign, again) in dead.items():
            self._delete_lines(assign)
            self._drop_import(self.app_of[name].ref)
            self.notes.add(f"line {assign.lineno}: `{assign.targets[0].id}`, a pmap bound again at line "
                           f"{again.lineno} before any use, goes")
        for name in [*unused, *dead, *gone]:
            for table in (self.steps, self.app_of, self.fun, self.jit_options):
                table.pop(name, None)

    def _overwritten(self, step: Step) -> ast.Assign | None:
        """The assignment that binds a step's name again, in the function that made it, before any
        read of the step (``p_eval_step = jax.pmap(eval_step)`` made twice, the first never read):
        every read of the name is reached by another of its assignments there. None where one
        may read this one, or it is not made so."""
        assign = self.module.parent_of(step.binding)
        if step.holder or step.entry or step.factory is not None or not isinstance(assign, ast.Assign) \
                or len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name):
            return None
        target, scope = assign.targets[0].id, enclosing_scope(self.module, assign)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        assigns = [node for node in ast.walk(scope) if isinstance(node, ast.Assign) and len(node.targets) == 1
                   and _same_name(node.targets[0], target) and enclosing_scope(self.module, node) is scope]
        reads = reads_of(self.module, target, step.binding)
        reached = [reaching_assignment(self.module, read, assigns) for read in reads]
        if not reads or any(found is None or found is assign for found in reached):
            return None
        later = [node for node in assigns if node.lineno > assign.lineno]
        return min(later, key=lambda node: node.lineno) if later else None

    def _with_what_the_step_does(self, blocked: Blocked, drivers, factories) -> Blocked:
        """Where an argument of a step is made by something the driving code's analysis does not
        recognise (an input pipeline, often), whether the step itself could move: read with that
        argument as a batch split per device and the others as they are known (where not known yet,
        those after it a batch too, those before it replicated). A step that computes something
        else over the whole batch (BatchNorm statistics of each device's slice) is the reason that
        counts: a new input pipeline would not change it."""
        if blocked.argument is None:
            return blocked
        step, position = blocked.argument
        if step.opaque is not None or step.func is None:
            return blocked
        # The arguments after it, not read yet, are taken as made by the same pipeline (a batch's
        # inputs and targets), those before as replicated state.
        params = [S if p == BOT and i > position else R if p == BOT else p for i, p in enumerate(step.params)]
        params[position] = S
        why = None
        try:
            analysis = StepAnalyzer(self.module, step.axis, drivers.host_scopes() | factories).analyse(
                step.func, params, step.bound)
            unknown = next((leaf for leaf in leaves(analysis.output) if isinstance(leaf, U)), None)
            if unknown is not None:
                why = f"line {unknown.line or step.line}: `{step.name}` returns {describe(unknown)} ({unknown.why})"
        except Blocked as inner:
            why = f"line {inner.line}: {inner.message}"
        if why is None:
            return blocked
        return Blocked(blocked.line, f"{blocked.message}; and with it laid out as a batch, the step still would not "
                       f"compute the same over the whole batch: {why}")

    def _object_mesh(self, firsts) -> tuple[ast.FunctionDef, str, ast.stmt] | None:
        """Where a class holding the step builds its one mesh: when every value is laid out in its
        methods and it has an ``__init__``, ``self.mesh = jax.make_mesh(...)`` there (above its
        first placement, else above the step's binding, else at its top), so no method builds
        a mesh at each call. (``init``, the name of its ``self``, the statement to go above.)"""
        owners = {id(step.holder[0]): step for step in self.steps.values() if step.holder}
        if not owners or not firsts:
            return None
        found = [method_of(self.module, first) for _, first in firsts]
        if any(f is None or id(f[0]) not in owners for f in found) or len({id(f[0]) for f in found}) != 1:
            return None
        owner = found[0][0]
        init = next((m for m in owner.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None or any(n.attr == "mesh" for n in self.module.of_type(ast.Attribute)):
            return None
        where = next((first for scope, first in firsts if scope is init), None)
        if where is None:
            binding = owners[id(owner)].binding
            where = next((s for s in init.body if any(n is binding for n in ast.walk(s))), None)
        if where is None:
            body = init.body
            docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1
            where = body[1] if docstring else body[0]
        return init, init.args.args[0].arg, where

    def _hand_down(self, passing: MeshPassing, mesh: str) -> None:
        """``mesh`` added as the last parameter of each function ``passing`` gives it to (keyword-only
        after defaults) and passed at each of their calls."""
        text, span = self.module.text, self.module.span
        public = [f"`{func.name}`" for func in passing.receivers
                  if not (func.name.startswith("_") or is_script(self.module))]
        if public:  # (the global view changes what they take already; the new parameter says so loudly)
            self.notes.add(f"{', '.join(public)} now take{'s' if len(public) == 1 else ''} the mesh as a "
                           f"parameter, `{mesh}`: callers in other modules must pass it")
        for func in passing.receivers:
            args = func.args
            if passing.by_keyword(func):
                last = _last_parameter_end(self.module, func, keyword_only=bool(args.kwonlyargs))
                self.plan.edits.append(Edit(last, last, f", {mesh}" if args.kwonlyargs else f", *, {mesh}"))
                continue
            if args.args:
                end = span(args.args[-1])[1]
                self.plan.edits.append(Edit(end, end, f", {mesh}"))
            else:
                opening = text.index("(", span(func)[0] + text[span(func)[0]:].index(func.name))
                self.plan.edits.append(Edit(opening + 1, opening + 1, mesh))
        keyword = {id(func) for func in passing.receivers if passing.by_keyword(func)}
        for call, callee in passing.calls:
            by_name = id(callee) in keyword or bool(call.keywords)
            given = f"{mesh}={mesh}" if by_name else mesh
            parts = [*call.args, *call.keywords]
            if parts:
                end = max(span(part)[1] for part in parts)
                self.plan.edits.append(Edit(end, end, f", {given}"))
            else:
                closing = span(call)[1] - 1
                self.plan.edits.append(Edit(closing, closing, given))

    def _replaced_spans(self, edit) -> list[tuple[int, int]]:
        """The text a driving-code edit replaces, around what it keeps (``edit.inner``, and the
        arguments of a padded call): a name read only there is no longer read. Where a split is
        kept as the same rearrangement of whole rows, only the device count and what merges with it."""
        span = self.module.span
        if edit.stacked is not None:
            return []  # (`stack` renamed `concatenate`: no name is read less)
        if edit.merged is not None:
            return [(span(edit.merged[0])[0], span(edit.merged[1])[1])]
        if edit.einops is not None:
            return [span(edit.einops[2])]
        if edit.action == "pad_call":  # the wrapper and its `min_device_batch=`; the arguments stay
            return [span(edit.node.func), *(span(k) for k in edit.node.keywords)]
        (start, end), (kept_start, kept_end) = span(edit.node), span(edit.inner)
        if not start <= kept_start <= kept_end <= end:
            return [(start, end)]
        return [(start, kept_start), (kept_end, end)]

    def _drop_unused_helpers(self) -> list[tuple[int, int]]:
        """A replicate / unreplicate helper of the program whose every use this fix rewrote goes
        (its spans are returned): those ``_unused_helpers`` found."""
        removed = []
        for helper in self._helpers_going:
            statement = helper.statement
            owner = self.module.parent_of(statement)
            self._delete_lines(statement, blank_after=owner is self.module.tree,
                               blank_before=isinstance(owner, ast.ClassDef), comments_above=True)
            for node in ast.walk(helper.fn):
                if isinstance(node, (ast.Name, ast.Attribute)):
                    self._drop_import(node)
            removed.append(self.module.span(statement))
        return removed

    def _unused_helpers(self, edits) -> list[Helper]:
        """The helpers whose every use this fix rewrote; one used elsewhere stays. A public
        module-level def of a module that is not a script stays too: other modules may import it."""
        # (a tree map's leaf function is used as its first argument)
        rewritten = {id(n) for e in edits if e.helper is not None and isinstance(e.node, ast.Call)
                     for n in (e.node.func, *e.node.args[:1])}
        helpers = {id(e.helper.fn): e.helper for e in edits if e.helper is not None and e.helper.fn is not None}
        exported = self._exported()
        unused = []
        for helper in helpers.values():
            statement = helper.statement
            owner = self.module.parent_of(statement)
            module_level = owner is self.module.tree
            if module_level and (helper.name in exported or not (helper.name.startswith("_") or is_script(self.module))):
                continue
            if isinstance(owner, ast.ClassDef):  # a method (`state.replicate()`): read as any attribute
                if owner.name in exported or not (owner.name.startswith("_") or is_script(self.module)) \
                        or len(owner.body) < 2:
                    continue
                uses = [n for n in self.module.of_type(ast.Attribute) if n.attr == helper.name
                        and self.module.names.qualified_name(n) is None]  # (not `jax_utils.replicate`)
            else:
                uses = reads_of(self.module, helper.name, helper.fn)
            if not uses or any(id(use) not in rewritten for use in uses) or not self._own_lines(statement):
                continue
            unused.append(helper)
        return unused

    def _drop_unused_locals(self, replaced: list[tuple[int, int]], removed: list[tuple[int, int]],
                            rewritten: list[tuple[int, int]]) -> None:
        """``n = jax.local_device_count()`` in a function, read only by the reshapes and splits the
        fix ``replaced``, goes with them (at module level only in a script, and not one its ``__all__``
        lists: other modules may import a library's, as the helpers of ``_unused_helpers``); so
        does a shape those reshapes alone read (``shape_prefix = (n, per_device)``), and an axis
        name read only by the pmaps and collectives the fix ``rewritten`` (``axis_name = "x"``)."""
        loads: dict[int, list[ast.Name]] = {}
        for node in self.module.of_type(ast.Name):
            if isinstance(node.ctx, ast.Load):
                for binding in self.module.names.bindings(node):
                    if isinstance(binding, ValueBinding):
                        loads.setdefault(id(binding.value), []).append(node)
        axes = {step.axis for step in self.steps.values()}
        exported = self._exported()
        shapes = DeviceAxisShapes(self.module)
        deleted: list[tuple[int, int]] = []  # (a device list read only by a count that goes, goes after it)
        pending = [node for node in self.module.of_type(ast.Assign)
                   if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)]
        while pending:
            kept = []
            for node in pending:
                value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in axes:
                    spans = rewritten
                elif (isinstance(value, ast.Call) and (shapes.is_device_count(value) or not value.args
                                                       and shapes.is_every_local_device(value))
                        or isinstance(value, ast.Tuple)
                        and all(isinstance(e, (ast.Name, ast.Constant)) for e in value.elts)
                        or isinstance(value, ast.BinOp) and _arithmetic(value)):
                    spans = replaced + deleted
                else:
                    continue
                module_level = self.module.parent_of(node) is self.module.tree
                if module_level and (not is_script(self.module) or node.targets[0].id in exported) \
                        or not self._own_lines(node):
                    continue
                if any(start <= self.module.span(node)[0] < end for start, end in removed):
                    continue  # goes with the helper it is in
                uses = loads.get(id(value), [])
                if uses and all(any(start <= self.module.span(u)[0] < end for start, end in spans) for u in uses):
                    # the first statement of a block goes with the blank lines after it: no block opens blank
                    body = getattr(self.module.parent_of(node), "body", None)
                    if module_level:  # between blank lines, the blank lines after it stay: the file's spacing
                        self._delete_lines(node, blank_before=self._blank_after(node))
                    else:
                        self._delete_lines(node, blank_after=bool(body) and body[0] is node)
                    deleted.append(self.module.span(node))
                else:
                    kept.append(node)
            pending = kept if len(kept) < len(pending) else []

    def _step(self, app: Application) -> None:
        func, bound, leading, factory, returned, holder, entry = app.mapped, {}, 0, None, None, None, None
        options, fun = read_options(self.module, app)
        if app.kind == "decorator":
            if not isinstance(func, ast.FunctionDef):
                raise Blocked(app.line, "the pmapped function is not a `def`")
            if len(func.decorator_list) != 1:
                raise Blocked(app.line, f"`{func.name}` has other decorators besides pmap")
            name, binding = func.name, func
            self._one_mode(func, func.name)
            made = returned_def(self.module, func)
            if made is not None:  # `def make_step(): @partial(jax.pmap, ...) def step(...): ...; return step`
                factory, returned = made
                name = f"{factory.name}(...)"
        else:
            call = made = app.node
            assign = self.module.parent_of(call)
            if self._jit_of(call, assign):  # `jax.jit(jax.pmap(f, ...))`: pmap already compiles; one jit stays
                made, assign = assign, self.module.parent_of(assign)
                self.jitted[id(call)] = made
            at_once = isinstance(assign, ast.Call) and assign.func is made  # jax.pmap(f, "i")(x)
            factory = factory_of(self.module, made)  # `return jax.pmap(update, ...)` in `make_update`
            holder = self_attribute(self.module, assign.targets[0]) if isinstance(assign, ast.Assign) \
                and len(assign.targets) == 1 else None  # `self.p_train_step = jax.pmap(...)` in a method
            entry = self._dict_entry(made, assign)  # `steps = {"train": jax.pmap(...)}`
            given = self._given_to_function(made)  # `run_epoch(jax.pmap(train_step, ...), state)`
            if given:
                self.passed.append(made)
            if not at_once and not given and factory is None and holder is None and entry is None and not (
                    isinstance(assign, ast.Assign) and len(assign.targets) == 1
                    and isinstance(assign.targets[0], ast.Name)):
                where = "passed to another call" if isinstance(assign, ast.Call) else (
                    "stored in an attribute or container" if isinstance(assign, ast.Assign) else "used as a value")
                raise Blocked(app.line, f"the pmapped function is {where}, not assigned to a name whose calls "
                              "this fix can follow")
            if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name):
                self._one_mode(assign, assign.targets[0].id, fun)
            func = def_of(self.module, fun, call) if isinstance(fun, ast.Name) else fun if isinstance(fun, ast.Lambda) \
                else None
            if self.module.has_comment(call) and (made is not call or isinstance(fun, ast.Lambda)):
                raise Blocked(app.line, LOST)  # (written anew around its function: ``jit_in_place`` is for calls)
            if func is None and at_once and not options and made is call and self._opaque(fun, assign):
                if self.module.has_comment(call):
                    raise Blocked(app.line, LOST)
                name = f"jax.pmap(...) at line {app.line}"
                self.fun[name], self.jit_options[name], self.app_of[name] = fun, [], app
                self.steps[name] = Step(name, call, None, (0,) * len(assign.args), fun=fun, opaque=len(assign.args))
                return
            if func is None and isinstance(fun, (ast.Name, ast.Call)):  # `make_train_step(optimizer)`, by name or not
                func = next(iter(made_def_of(self.module, fun, app.line) or ()), None)
            if func is None:
                func, bound, leading = partial_of(self.module, fun, app.line)
            if not isinstance(func, (ast.FunctionDef, ast.Lambda)):
                raise Blocked(app.line, "the pmapped function is not a `def` or lambda of this module")
            # A step called at once has no name of its own: it is known by where pmap is applied;
            # one a factory returns, by the factory its callers call.
            name = f"jax.pmap(...) at line {app.line}" if at_once or given else (
                f"{factory.name}(...)" if factory is not None else
                f"self.{holder[1]}" if holder is not None else
                f'{self.module.parent_of(assign).targets[0].id}["{entry[1]}"]' if entry is not None else
                assign.targets[0].id)
            binding = made
        name = self._own_name(name, binding)
        if name in self.steps and self._overwritten(self.steps[name]) is not None:
            # (the earlier one, dead, is left as it is: ``_leave_unused``)
            earlier = f"{name}` made first in `{enclosing_scope(self.module, binding).name}"
            for table in (self.steps, self.app_of, self.fun, self.jit_options):
                if name in table:
                    table[earlier] = table.pop(name)
            self.steps[earlier].name = earlier
        self.fun[name] = fun
        values = {}
        for option, value in options.items():
            if option == "devices" and every_device(self.module, value, app.line):
                continue  # the mesh's devices: nothing to say to jit
            if option not in _OPTIONS:
                raise Blocked(app.line, f"pmap's `{option}=` has no global-view counterpart here")
            values[option] = value
        analyzer = StepAnalyzer(self.module, None)
        axis = None
        if "axis_name" in values:
            axis = analyzer.literal_string(values["axis_name"])
            if axis is None:
                raise Blocked(app.line, "`axis_name=` is not a literal string")
        # Each pmap names its own axis for its own collectives (flax's `sync_batch_stats` pmaps a
        # `pmean` over 'x' beside a train step over 'batch'); the one mesh takes the first name.
        self.axis = self.axis or axis
        for option in ("static_broadcasted_argnums", "donate_argnums"):
            if option in values and id(app.node) in self.jitted:
                raise Blocked(app.line, f"`{option}=` on a pmap that `jax.jit` wraps: the jit does not take it")
        out_axes = _out_axes(literal(values["out_axes"])) if "out_axes" in values else 0
        if out_axes == "?":
            raise Blocked(app.line, "`out_axes=` other than 0 or None, or a tuple of them, one per output")
        positional = [a.arg for a in func.args.args]
        if bound:
            named = set(positional) | {a.arg for a in func.args.kwonlyargs}
            if func.args.vararg or func.args.kwarg or set(bound) - named:
                raise Blocked(app.line, "`partial(...)` binds arguments the step does not name")
            # (a parameter after one `partial` binds by name is given by name too: LRA's
            # `partial(train_step, learning_rate_fn=...)` called with `dropout_rng=`)
            positional = [a for a in positional if a not in bound]
        in_axes, static = (0,) * len(positional), ()
        if "in_axes" in values:
            given = literal(values["in_axes"])
            if given == 0:
                pass
            elif isinstance(given, (tuple, list)) and len(given) == len(positional) \
                    and all(a in (0, None) for a in given):
                in_axes = tuple(given)
            else:
                raise Blocked(app.line, "`in_axes=` other than 0 or a tuple of 0 / None per argument")
        if "static_broadcasted_argnums" in values:
            # pmap hands a static argument to every device as the Python value it is, as jit's
            # `static_argnums=` hands it to the one program: the driving code passes a host value
            # there, unmapped (pmap ignores `in_axes` at those positions).
            static = literal_positions(values["static_broadcasted_argnums"])
            if not (static and all(type(i) is int and 0 <= i < len(positional) for i in static)):
                raise Blocked(app.line, "`static_broadcasted_argnums=` other than literal positions of the "
                              "step's parameters")
            in_axes = tuple(None if i in static else axis for i, axis in enumerate(in_axes))
        # Keyword-only parameters come after the positional ones; pmap maps whatever is passed by
        # keyword over its first axis, whatever `in_axes` says.
        keyword_only = tuple(a.arg for a in func.args.kwonlyargs if a.arg not in bound)
        in_axes += (0,) * len(keyword_only)
        if name in self.steps:
            raise Blocked(app.line, f"`{name}` is bound to more than one pmap")
        self.steps[name] = Step(name, binding, func, in_axes, static=static, bound=tuple(bound), leading=leading,
                                keyword_only=keyword_only, fun=fun, factory=factory, returned=returned,
                                holder=holder, entry=entry, axis=axis, out_axes=out_axes)
        self.jit_options[name] = [f"{keyword}={self.module.segment(values[option])}"
                                  for option, keyword in _JIT_OPTIONS.items() if option in values]
        self.app_of[name] = app

    def _other_mode_untouched(self, drivers: DriverAnalyzer) -> None:
        """In a program of two modes, the rewrite touches only code the pmap mode alone runs: each
        edit of the driving code is in a branch of that mode; each call of a step is there too, or
        calls a name the other mode binds to its own function (``step_fn`` pmapped in one branch and
        jitted in the other); and no transform but pmap binds the axis the step's collectives name
        (so the collectives the step loses are ones the other mode never runs: outside pmap they
        would raise)."""
        mode, module = self.mode, self.module
        for edit in drivers.edits.values():
            if not runs_only_in(module, edit.node, mode):
                raise Blocked(edit.node.lineno, f"`{short(module, edit.node)}` runs in both modes of the program: "
                              "its rewrite would change the mode without pmap too")
        for call in drivers.step_calls:
            if runs_only_in(module, call, mode):
                continue
            bindings = module.names.bindings(call.func) if isinstance(call.func, ast.Name) else []
            own = [b for b in bindings if binding_node(b) is not None and runs_only_in(module, binding_node(b), mode)]
            other = [b for b in bindings if binding_node(b) is not None
                     and runs_only_outside(module, binding_node(b), mode)]
            if not (own and all(b in own or b in other or self._rebound_by_each_mode(b, own, other, call)
                                for b in bindings)):
                raise Blocked(call.lineno, "the step is called here in both modes of the program, and the mode "
                              "without pmap calls it with values laid out its own way")
        for node in module.of_type(ast.Call):
            qualified = module.names.qualified_name(node.func)
            if qualified in _AXIS_BINDERS and (qualified != "jax.vmap" or any(k.arg == "axis_name"
                                                                                for k in node.keywords)):
                raise Blocked(node.lineno, f"`{qualified}` binds an axis too: the step's collectives may run in the "
                              "program's other mode, which the global view does not rewrite")

    def _rebound_by_each_mode(self, binding, own: list, other: list, call: ast.Call) -> bool:
        """Whether ``binding`` (a def) is bound again in both branches of one ``if`` between it and
        ``call``, a branch each mode runs (``predict = jax.pmap(predict, ...)`` / ``else: predict =
        jax.jit(predict)``): no read at ``call`` sees it."""
        module, node = self.module, binding_node(binding)
        if not isinstance(node, ast.FunctionDef):
            return False
        for mine, theirs in ((binding_node(a), binding_node(b)) for a in own for b in other):
            branch = branches_apart(module, mine, theirs)
            if branch is None:
                continue
            scope = enclosing_scope(module, branch)
            if enclosing_scope(module, node) is scope and enclosing_scope(module, call) is scope \
                    and node.end_lineno < branch.lineno and call.lineno > branch.end_lineno:
                return True
        return False

    def _one_mode(self, statement: ast.stmt, name: str, mapped: ast.expr | None = None) -> None:
        """A step made under an `if` whose name the same function binds to something else too
        (`if use_pmap and n_devices > 1: step_fn = jax.pmap(...)` / `else: step_fn = jax.jit(...)`,
        or a `def` decorated either way): the program runs in one of two modes chosen at run time,
        which the analysis does not follow (the values it lays out are replicated in one mode
        only). Said as such, rather than as whatever in the other mode blocks first. Read in its
        pmap mode (``modes``), a step whose name is bound otherwise only where that mode skips is
        that mode's, and so is one that takes the name of the def it maps (``train_step =
        jax.pmap(train_step, ...)`` in one branch, ``jax.jit(train_step)`` in the other)."""
        scope_node = enclosing_scope(self.module, statement)
        scope = self.module.names.scope_opened_by(scope_node)
        bound = [binding_node(b) for b in (scope.bindings.get(name, ()) if scope is not None else ())]
        if self.mode is not None and runs_only_in(self.module, statement, self.mode):
            maps = {id(binding_node(b)) for b in self.module.names.bindings(mapped)} \
                if isinstance(mapped, ast.Name) and mapped.id == name else set()
            shared = [node for node in bound if node is not None and node is not statement
                      and node is not getattr(statement, "value", None) and id(node) not in maps
                      and not runs_only_outside(self.module, node, self.mode)]
            if not shared:
                return  # bound otherwise in the other mode alone
            raise Blocked(statement.lineno, f"`{name}` is bound where both modes run too (line {shared[0].lineno}): "
                          "which of the two a read of it means depends on the mode, and the global view does not "
                          "follow one name through both")
        branch = next((node for node in ancestors(self.module, statement)
                       if node is scope_node or isinstance(node, ast.If) and not is_main_guard(node)), None)
        if not isinstance(branch, ast.If) or len(bound) < 2:
            return
        raise Blocked(branch.lineno, f"`{name}` is pmapped only where `{self.module.segment(branch.test)}` holds "
                      f"and bound otherwise too: the program runs in one of two modes chosen at run time, "
                      "and the global view does not follow a mode (the mode without pmap may already be the "
                      "program to keep, its inputs laid out with `NamedSharding`)")

    def _own_name(self, name: str, binding: ast.AST) -> str:
        """The name a step is known by: a second one of the same name bound in another function
        (`p_eval_step` made in `train_and_evaluate` and again in `evaluate`) is `p_eval_step` in
        `evaluate`; one bound twice in the same scope keeps the name, and blocks."""
        if name not in self.steps:
            return name
        here = enclosing_scope(self.module, binding)
        if not isinstance(here, ast.FunctionDef) or here is enclosing_scope(self.module, self.steps[name].binding):
            return name
        return f"{name}` in `{here.name}"

    def _named(self, identifier: str) -> list[str]:
        """The steps a name written in the code may be (by their names in ``self.steps``)."""
        return [name for name in self.steps if name.split("` in `")[0] == identifier]

    def _opaque(self, fun: ast.expr, call: ast.Call) -> bool:
        """``jax.pmap(f)(x, ...)`` with no option, ``f`` a name or attribute that is not a function
        of this module (``opt_init`` of ``opt_init, opt_update = optax.adam(1e-4)``, ``optimizer.init``),
        called at once with positional arguments."""
        if not isinstance(fun, (ast.Name, ast.Attribute)) or not call.args or call.keywords:
            return False
        return not any(isinstance(getattr(b, "node", None), (ast.FunctionDef, ast.Lambda))
                       for b in self.module.names.bindings(fun)) if isinstance(fun, ast.Name) else True

    def _no_other_uses(self) -> None:
        """The step is only called: passed around, it would carry pmap's convention elsewhere."""
        self._entries_only_called()
        for step in self.steps.values():
            if step.factory is not None:
                self._factory_only_binds_names(step.factory)
        for node in self.module.of_type(ast.Assign, ast.Name):
            if isinstance(node, ast.Assign) and any(_same_name(t, "__all__") for t in node.targets):
                names = {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
                for step in self.steps:
                    if step.split("` in `")[0] in names:
                        raise Blocked(node.lineno, f"`{step}` is exported in `__all__`: its callers elsewhere pass "
                                      "values with pmap's device axis")
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for name in self._named(node.id):
                    self._only_called(node, name)

    def _only_called(self, node: ast.Name, name: str) -> None:
        """``node``, a read of the step ``name`` (if it resolves to that step's binding), calls it,
        hands it to a function that does, or is wrapped by ``pad_shard_unpad`` as the fix follows."""
        step, fun = self.steps[name], self.fun.get(name)
        if node is fun:
            return  # `f = jax.pmap(f, ...)`: the def pmap maps
        if not any(getattr(b, "node", getattr(b, "value", None)) is step.binding
                   for b in self.module.names.bindings(node)) or branches_apart(self.module, node, step.binding):
            return  # (in the other branch of an `if` around the pmap, the name is what that branch binds)
        parent = self.module.parent_of(node)
        if self._given_to_function(node):
            self.passed.append(node)  # the driving code's analysis reads that function's calls of it
            return
        if not (isinstance(parent, ast.Call) and parent.func is node or self._padded(node)):
            raise Blocked(node.lineno, step_used_as_value(self.module, node))
        if isinstance(fun, ast.Name) and fun.id == node.id and node.lineno <= step.binding.lineno:
            raise Blocked(node.lineno, f"`{node.id}` is called before pmap rebinds it")

    def _dict_entry(self, call: ast.Call, parent: ast.AST) -> tuple | None:
        """(the dict, its key) where ``call`` is the value of a constant string key of a dict
        literal that is the whole value of an assignment to one name."""
        if not (isinstance(parent, ast.Dict) and call in parent.values):
            return None
        key = parent.keys[parent.values.index(call)]
        statement = self.module.parent_of(parent)
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)
                and isinstance(statement, ast.Assign) and statement.value is parent
                and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
            return None
        return parent, key.value

    def _entries_only_called(self) -> None:
        """A dict holding steps is bound once and read only as ``steps["<key>"](...)``, a key of
        a step: stored, passed or read otherwise, an entry would carry pmap's convention where
        the fix does not follow it."""
        held: dict[int, tuple[ast.Dict, set]] = {}
        for step in self.steps.values():
            if step.entry is not None:
                held.setdefault(id(step.entry[0]), (step.entry[0], set()))[1].add(step.entry[1])
        for held_in, keys in held.values():
            statement = self.module.parent_of(held_in)
            name = statement.targets[0].id
            if len(held_in.keys) != len({k.value for k in held_in.keys if isinstance(k, ast.Constant)}):
                raise Blocked(statement.lineno, f"`{name}` holds the pmapped steps under keys that are not distinct "
                              "constants")
            for _, use in sorted(self.module.names_at.get(name, ())):  # (in the order of the text)
                if use is statement.targets[0]:
                    continue
                bindings = self.module.names.bindings(use)
                if not any(getattr(b, "value", None) is held_in for b in bindings):
                    continue
                if len(bindings) != 1 or not isinstance(use.ctx, ast.Load):
                    raise Blocked(use.lineno, f"`{name}`, which holds the pmapped steps, is bound again")
                item, call = self.module.parent_of(use), self.module.parent_of(self.module.parent_of(use))
                if not (isinstance(item, ast.Subscript) and item.value is use and isinstance(item.slice, ast.Constant)
                        and item.slice.value in keys and isinstance(call, ast.Call) and call.func is item):
                    raise Blocked(use.lineno, f"`{name}`, which holds the pmapped steps, is used other than by "
                                  f"calling `{name}[key](...)` with the key of a step")

    def _given_to_function(self, node: ast.expr) -> bool:
        """Whether ``node`` is an argument of a call of a def of this module (``run_epoch(p_step,
        state, batches)``), which the driving code's analysis may read with the step in it."""
        call = call_given(self.module, node)
        if not (isinstance(call, ast.Call) and call.func is not node and isinstance(call.func, ast.Name)):
            return False
        return any(isinstance(getattr(b, "node", None), ast.FunctionDef) for b in self.module.names.bindings(call.func))

    def _passed_steps_read(self, drivers: DriverAnalyzer) -> None:
        """Each step passed to a function of the module went to a call the driving code's analysis
        read, which follows the step into that function to its calls there."""
        read = drivers.reader_calls | drivers.method_reader_calls
        for node in self.passed:
            if id(call_given(self.module, node)) not in read:
                raise Blocked(node.lineno, step_used_as_value(self.module, node))

    def _padded(self, node: ast.Name) -> bool:
        """Whether ``node`` is the step in ``pad_shard_unpad(step, ...)(...)``, called at once (the
        driving code's analysis reads that call)."""
        wrapper = self.module.parent_of(node)
        return (isinstance(wrapper, ast.Call) and wrapper.args and wrapper.args[0] is node
                and self.module.names.qualified_name(wrapper.func) == PAD_SHARD_UNPAD
                and (isinstance(self.module.parent_of(wrapper), ast.Call)
                     and self.module.parent_of(wrapper).func is wrapper or kept_for_calls(self.module, wrapper)))

    def _factory_only_binds_names(self, factory: ast.FunctionDef) -> None:
        """Each call of a function returning the step binds it to one name (``p_update =
        make_update(0.1)``), whose calls the driving code's analysis then follows."""
        if factory.name in self._exported():
            raise Blocked(factory.lineno, f"`{factory.name}` (which returns the pmapped step) is exported in "
                          "`__all__`: its callers elsewhere pass values with pmap's device axis")
        for node in reads_of(self.module, factory.name, factory):
            call = self.module.parent_of(node)
            assign = self.module.parent_of(call)
            if not (isinstance(call, ast.Call) and call.func is node and isinstance(assign, ast.Assign)
                    and assign.value is call and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)):
                raise Blocked(node.lineno, f"`{factory.name}` (which returns the pmapped step) is used other than "
                              f"in `name = {factory.name}(...)`")

    def _exported(self) -> set:
        """The names the module's ``__all__`` lists."""
        return {e.value for node in self.module.of_type(ast.Assign) if any(_same_name(t, "__all__")
                for t in node.targets) for e in ast.walk(node.value) if isinstance(e, ast.Constant)}

    def _check_outputs(self, step: Step) -> None:
        if step.opaque is not None:
            return  # replicated: every device computed the same value
        returns = [n for n in ast.walk(step.func) if isinstance(n, ast.Return)
                   and enclosing_scope(self.module, n) is step.func]  # not a nested loss function's
        line = max(r.lineno for r in returns) if returns else step.func.lineno
        for leaf in leaves(step.outputs):
            # (a key the step splits off is passed back to it, one in all; the driving code's reads
            # of a per-shard mean were proven to average it: `driving.OWN_MEAN`)
            if leaf not in (R, S, KEY, M):
                why = f" ({leaf.why}, line {leaf.line})" if hasattr(leaf, "why") and leaf.line else (
                    f" ({leaf.why})" if hasattr(leaf, "why") else "")
                raise Blocked(line, f"`{step.name}` returns {describe(leaf)}{why}: pmap returns one per device, the "
                              "global view one in all")

    # -- edits ---------------------------------------------------------------------------------

    def _replace(self, node: ast.AST, text: str) -> None:
        start, end = self.module.span(node)
        self.plan.edits.append(Edit(start, end, text))

    def _jit_of(self, call: ast.Call, parent: ast.AST) -> bool:
        """``parent`` is ``jax.jit(call)``, with no option of its own (evojax wraps its pmaps so)."""
        return isinstance(parent, ast.Call) and parent.args == [call] and not parent.keywords \
            and self.module.names.qualified_name(parent.func) == "jax.jit"

    def _rewrite_steps(self) -> None:
        jax = self.namer.jax()
        for name, step in self.steps.items():
            app = self.app_of[name]
            options = self.jit_options[name]
            if step.opaque is not None:  # the driving code's edit (`_driver`), where the mesh is known
                continue
            if app.kind == "decorator":
                node = app.node
                if not options:
                    self._replace(node, f"{jax}.jit")
                    if isinstance(node, ast.Call):
                        self._drop_import(node.func)
                else:
                    partial = self.module.segment(node.func) if isinstance(node, ast.Call) else "functools.partial"
                    self._replace(node, f"{partial}({jax}.jit, {', '.join(options)})")
            else:
                args = [self.module.segment(self.fun[name]), *options]
                outer = self.jitted.get(id(app.node))
                if outer is not None:  # `jax.jit(jax.pmap(f, ...))`: the pmap goes, the jit stays
                    start, end = self.module.span(app.node)
                    self.plan.edits.append(Edit(start, end, self.module.segment(self.fun[name])))
                    self._drop_import(app.ref)
                    continue
                if isinstance(step.func, ast.Lambda):
                    # The lambda's collectives are edits of their own: only what surrounds it changes.
                    start, end = self.module.span(app.node)
                    fun_start, fun_end = self.module.span(self.fun[name])
                    self.plan.edits.append(Edit(start, fun_start, f"{jax}.jit("))
                    self.plan.edits.append(Edit(fun_end, end, "".join(f", {a}" for a in args[1:]) + ")"))
                elif self.module.has_comment(app.node):
                    self.plan.edits += jit_in_place(self.module, app.node, f"{jax}.jit", _JIT_OPTIONS)
                elif app.node.lineno != app.node.end_lineno:  # keep a call laid out one argument a line
                    indent = self.module.src.line(app.node.lineno)
                    indent = indent[: len(indent) - len(indent.lstrip())]
                    inner = "".join(f"{indent}    {a},\n" for a in args)
                    self._replace(app.node, f"{jax}.jit(\n{inner}{indent})")
                else:
                    self._replace(app.node, f"{jax}.jit({', '.join(args)})")
                if isinstance(app.node.func, ast.Call):  # partial(jax.pmap, ...)(f): the partial goes
                    self._drop_import(app.node.func.func)
            self._drop_import(app.ref)

    def _collective(self, edit: CollectiveEdit) -> None:
        node, arg = edit.node, edit.arg
        if edit.action == "drop":
            node, arg = self._identity_map(node, arg) or (node, arg)
        inside = {id(n) for n in ast.walk(arg)}
        for name in ast.walk(node):  # what the replaced call alone imported (`lax` of axis_index) goes too
            if isinstance(name, ast.Name) and id(name) not in inside:
                self._drop_import(name)
        if edit.action == "unfold":
            self._keys_noted = True
            self.notes.add("per-device RNG keys (`fold_in(key, axis_index(...))`) become the one key they were "
                           "folded from: the random streams change")
            self._replace(node, self._atom(arg, node))
            return
        if edit.action == "drop":
            statement = self.module.parent_of(node)
            assigned = isinstance(statement, ast.Assign) and statement.value is node and len(statement.targets) == 1
            if assigned and _same_names(statement.targets[0], arg) and self._own_lines(statement):
                self._delete_lines(statement)  # `grads = pmean(grads)`: nothing is left to assign
                return
            text = self._atom(arg, node)
            if assigned and isinstance(arg, ast.Tuple) and has_own_brackets(self.module.src, arg) \
                    and arg.lineno == arg.end_lineno:
                text = text[1:-1]  # `avg_loss, avg_grads = loss, grads`, as one would write it
            self._replace(node, text)
            return
        count = f"{self.namer.jax()}.device_count()"
        if edit.tree:
            self._replace(node, f"{self.namer.jax()}.tree.map(lambda x: x * {count}, {self.module.segment(arg)})")
        elif isinstance(arg, ast.Constant) and arg.value == 1:
            self._replace(node, count)  # psum(1): the number of devices
        else:
            self._replace(node, f"{self._paren(arg)} * {count}")

    def _identity_map(self, node: ast.Call, arg: ast.expr) -> tuple[ast.expr, ast.expr] | None:
        """``jax.tree.map(lambda x: pmean(x, "i"), tree)`` with the pmean dropped maps each leaf to
        itself: the tree map goes whole (the call, and its tree in its place). So does a
        comprehension over values written out, ``loss, grads = (pmean(x, "i") for x in (loss,
        grads))``, where a tuple of them is the same (unpacked, or a list comprehension over a list)."""
        comprehension = self._identity_comprehension(node, arg)
        if comprehension is not None:
            return comprehension
        fn = self.module.parent_of(node)
        if not (isinstance(fn, ast.Lambda) and fn.body is node and isinstance(arg, ast.Name)
                and only_parameter(fn.args) == arg.id):
            return None
        call = self.module.parent_of(fn)
        if isinstance(call, ast.Call) and self.module.names.qualified_name(call.func) in TREE_MAPS \
                and len(call.args) == 2 and call.args[0] is fn and not call.keywords:
            return call, call.args[1]
        return None

    def _identity_comprehension(self, node: ast.Call, arg: ast.expr) -> tuple[ast.expr, ast.expr] | None:
        comprehension = self.module.parent_of(node)
        if not (isinstance(comprehension, (ast.GeneratorExp, ast.ListComp)) and comprehension.elt is node
                and isinstance(arg, ast.Name) and len(comprehension.generators) == 1):
            return None
        loop = comprehension.generators[0]
        items = loop.iter
        if loop.ifs or loop.is_async or not _same_name(loop.target, arg) or not isinstance(items, (ast.Tuple, ast.List)) \
                or any(isinstance(item, ast.Starred) for item in items.elts):
            return None
        statement = self.module.parent_of(comprehension)
        unpacked = isinstance(statement, ast.Assign) and statement.value is comprehension \
            and len(statement.targets) == 1 and isinstance(statement.targets[0], (ast.Tuple, ast.List))
        if unpacked or isinstance(comprehension, ast.ListComp) and isinstance(items, ast.List):
            return comprehension, items
        return None

    def _atom(self, arg: ast.expr, replaced: ast.AST) -> str:
        text = self.module.segment(arg)
        parent = self.module.parent_of(replaced)
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript, ast.Call, ast.Compare)) \
                and not (isinstance(parent, ast.Call) and replaced is not parent.func):
            return self._paren(arg)
        return text

    def _paren(self, node: ast.expr) -> str:
        """``node``'s text, parenthesised unless it is an atom or a tuple with brackets of its own."""
        text = self.module.segment(node)
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Dict)):
            return text
        if isinstance(node, ast.Tuple) and has_own_brackets(self.module.src, node):
            return text
        return f"({text})"

    def _own_lines(self, statement: ast.stmt) -> bool:
        """Alone on its lines (no ``;`` neighbour, no trailing comment): it can be deleted whole. A
        def's comments, inside it or ending its last line, are its own: they go with it."""
        text, starts = self.module.text, self.module.src.line_starts
        start, end = self.module.span(statement)
        line_end = text.find("\n", end)
        after = (text[end:] if line_end < 0 else text[end:line_end]).strip()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return not text[starts[statement.lineno - 1]:start].strip() and (not after or after.startswith("#"))
        return not text[starts[statement.lineno - 1]:start].strip() and not after \
            and not self.module.has_comment(statement)

    def _delete_lines(self, statement: ast.stmt, blank_after: bool = False, blank_before: bool = False,
                      comments_above: bool = False) -> None:
        """Delete ``statement``'s lines (with ``blank_after``, the blank lines after it too, so a
        removed module-level def leaves the file's spacing between its neighbours; with
        ``blank_before``, those above it, as a removed method leaves its class's; with
        ``comments_above``, the comment lines right above it, which speak of it: a def's own)."""
        starts = self.module.src.line_starts
        first = statement.lineno
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.decorator_list:
            first = statement.decorator_list[0].lineno
        while comments_above and first > 2 and self.module.src.line(first - 1).lstrip().startswith("#") \
                and not _CELL_MARKER.match(self.module.src.line(first - 1)):
            first -= 1  # (never line 1 or 2: a shebang or an encoding line is the file's; nor a cell's marker)
        if blank_before:
            while first > 1 and not self.module.src.line(first - 1).strip():
                first -= 1
        start = starts[first - 1]
        last = statement.end_lineno
        if blank_after:
            while last < len(starts) and not self.module.src.line(last + 1).strip():
                last += 1
        end = starts[last] if last < len(starts) else len(self.module.text)
        self.plan.edits.append(Edit(start, end, ""))
        self._deleted.add(id(statement))

    def _keep_else_alone(self, node: ast.If) -> None:
        """``if use_pmap: <all gone> else: x = np.asarray(x)`` -> ``if not use_pmap: x = ...``."""
        line = self._else_line(node)
        if node.body[0].lineno == node.lineno or line is None:
            raise Blocked(node.lineno, "every statement of this `if`'s branch goes, and its `else` is not "
                          "written on a line of its own")
        self._delete_span(self.module.src.line_starts[node.body[0].lineno - 1], self.module.src.line_starts[line])
        test = node.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self._replace(test, self.module.segment(test.operand))
        else:
            text = self.module.segment(test)
            self._replace(test, f"not ({text})" if isinstance(test, (ast.BoolOp, ast.IfExp, ast.Lambda,
                                                                         ast.NamedExpr)) else f"not {text}")

    def _drop_else(self, node: ast.If) -> None:
        """``if plain: ... else: x = rearrange(x, ...)``, the split gone: the ``else`` (or ``elif``)
        goes with it."""
        starts, first = self.module.src.line_starts, node.orelse[0]
        elif_ = isinstance(first, ast.If) and self.module.src.line(first.lineno).lstrip().startswith("elif")
        line = first.lineno if elif_ else self._else_line(node)
        if line is None:
            raise Blocked(node.lineno, "every statement of this `if`'s `else` goes, and the `else` is not "
                          "written on a line of its own")
        end = node.orelse[-1].end_lineno
        self._delete_span(starts[line - 1], starts[end] if end < len(starts) else len(self.module.text))

    def _else_line(self, node: ast.If) -> int | None:
        """The line of ``node``'s ``else:``, where it is written alone on its line."""
        src, line = self.module.src, node.orelse[0].lineno - 1
        while line > node.body[-1].end_lineno and src.line(line).strip() != "else:":
            line -= 1
        return line if src.line(line).strip() == "else:" else None

    def _delete_span(self, start: int, end: int) -> None:
        """Delete ``[start, end)``, which holds whole statements the rewrite deletes (their own
        deletions go: one edit covers them)."""
        self.plan.edits = [e for e in self.plan.edits if not (start <= e.start and e.end <= end and not e.content)]
        self.plan.edits.append(Edit(start, end, ""))

    def _drop_emptied_blocks(self) -> None:
        """An ``if`` whose every statement goes goes too (``if use_pmap: x = x.reshape(...)``, the
        reshape now gone, in a program of two modes), innermost first; one with an ``else`` keeps
        the ``else``'s statements under the negated test. An ``else`` whose every statement goes
        goes (a split under ``not`` a flag). Any other block left empty blocks the rewrite, which
        would not parse."""
        starts, deleted = self.module.src.line_starts, self._deleted
        for node in reversed(self.module.of_type(ast.If)):
            emptied_else = bool(node.orelse) and all(id(s) in deleted for s in node.orelse)
            if not node.body or not all(id(s) in deleted for s in node.body):
                if emptied_else:
                    self._drop_else(node)
                continue
            if node.orelse and not emptied_else:
                self._keep_else_alone(node)
                continue
            start = starts[node.lineno - 1]
            end = starts[node.end_lineno] if node.end_lineno < len(starts) else len(self.module.text)
            self._delete_span(start, end)
            deleted.add(id(node))
        for node in self.module.of_type(ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try):
            if id(node) not in deleted and node.body and all(id(s) in deleted for s in node.body):
                raise Blocked(node.lineno, "every statement of this block goes")

    def _blank_after(self, statement: ast.stmt) -> bool:
        last = statement.end_lineno
        return last < len(self.module.src.line_starts) and not self.module.src.line(last + 1).strip()

    def _drop_import(self, ref: ast.expr) -> None:
        """Schedule the import that names ``ref``'s root for removal (LibCST removes it only if unused)."""
        root = ref
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return
        for binding in self.module.names.bindings(root):
            if isinstance(binding, ImportBinding):
                statement = self.module.parent_of(binding.node)
                if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                    self.plan.remove_imports.add((statement.module, binding.node.name, binding.node.asname))
                elif isinstance(statement, ast.Import) and binding.node.name != "jax" and "." not in binding.node.name:
                    self.plan.remove_imports.add((binding.node.name, None, binding.node.asname))

    def _mesh_name(self) -> str:
        for name in ("mesh", f"{self.axis}_mesh"):
            if self.module.free(name) or self._only_in_unused_helpers(name):
                return name
        raise Blocked(1, "no free module-level name for the mesh (`mesh` is taken)")

    def _only_in_unused_helpers(self, name: str) -> bool:
        """Whether every use of the identifier ``name`` is in a helper the fix deletes (a replicate
        helper's own ``mesh``): once it goes, the name is free."""
        if self.module.names.star_imports or self._helpers_going is None:
            return False
        spans = [self.module.span(helper.statement) for helper in self._helpers_going]
        named = [node for node in self.module.nodes if name in _identifiers_of(node)]
        return bool(named) and bool(spans) and all(
            any(start <= self.module.span(node)[0] < end for start, end in spans) for node in named)

    def _driver(self, edit, mesh: str) -> None:
        # What the replaced expression alone imported (numpy for a tree map of np.broadcast_to)
        # goes with it; an import still used elsewhere stays. (A placed argument replaces nothing.)
        for node in ast.walk(edit.node) if edit.node is not edit.inner else ():
            if isinstance(node, ast.Name) and node is not edit.inner:
                self._drop_import(node)
        jax = self.namer.jax()
        if edit.stacked is not None:  # jnp.stack(xs) -> jnp.concatenate(xs): the batches' rows in order
            end = self.module.span(edit.stacked)[1]
            self.plan.edits.append(Edit(end - len(edit.stacked.attr), end, "concatenate"))
        if edit.einops is not None:  # rearrange(x, "(d b) c -> d b c'", d=n) -> rearrange(x, "b c -> b c'")
            literal, whole, count = edit.einops
            self._replace(literal, quoted_like(whole, self.module.segment(literal)))
            self._delete_argument(edit.node, count)
        if edit.merged is not None:  # x.reshape(n, k, 28, 28) -> x.reshape(-1, 28, 28)
            count, size = edit.merged
            self.plan.edits.append(Edit(self.module.span(count)[0], self.module.span(size)[0], ""))
            shape = self.module.parent_of(size)
            alone = isinstance(shape, ast.Tuple) and len(shape.elts) == 2  # `(n, -1)` -> `(-1,)`
            trailing = alone and self.module.text[self.module.span(size)[1]:self.module.span(shape)[1]].strip(" )")
            if literal_int(size) != -1 or alone and not trailing:
                self._replace(size, "-1," if alone and not trailing else "-1")
        if edit.action in ("replicate", "shard", "key", "place"):
            named = self.namer.sharding("NamedSharding")
            spec = self.namer.sharding("PartitionSpec", "P")
            if edit.action == "key" or edit.keys:  # one key per device -> the one key they were split from
                self._keys_noted = True
                self.notes.add("per-device RNG keys become the one key they were split from: the random streams "
                               "change")
            if edit.action in ("replicate", "key"):
                # A key too is laid out as the key a step hands back is: a step fed its own key
                # back would compile again for a key on one device.
                self._around(edit, f"{jax}.device_put(", f", {named}({mesh}, {spec}()))")
            else:
                self._around(edit, self._batch_layout(mesh), ")")
            if edit.action != "place" and edit.stacked is None:
                self._drop_import(edit.node.func)
        elif edit.action == "pad":  # flax's padding written out, the padded batch laid out on the mesh
            per_device = "" if edit.per_device is None else f", {self.module.segment(edit.per_device)}"
            self._around(edit, f"{self._batch_layout(mesh)}{self._padding_helper()}(", f"{per_device}))")
        elif edit.action == "pad_call":  # pad_shard_unpad(step, ...)(x, y, min_device_batch=n) -> step(x, y)
            call = edit.node
            stored = stored_pad_wrapper(self.module, call.func) if isinstance(call.func, ast.Name) else None
            if stored is not None:  # p_eval_step_pad(x, y): the name that kept the wrapper goes with it
                self._drop_pad_wrapper(stored)
            start, end = self.module.span(call.func)
            self.plan.edits.append(Edit(start, end, self.module.segment(edit.inner)))
            if call.keywords:  # `min_device_batch=`
                self._delete_argument(call, call.keywords[0])
            if stored is None:
                self._drop_import(call.func.func)
        elif edit.action == "opaque":  # jax.pmap(opt_init) -> jit, its output replicated on the mesh
            named = self.namer.sharding("NamedSharding")
            spec = self.namer.sharding("PartitionSpec", "P")
            self._around(edit, f"{jax}.jit(", f", out_shardings={named}({mesh}, {spec}()))")
        elif edit.action == "local":  # a process's own rows of a global array, as pmap gave them
            spec = self.namer.sharding("PartitionSpec", "P")
            opening = "iter(" if edit.iterator else ""
            self._around(edit, f"{opening}{self.namer.multihost_utils()}.global_array_to_host_local_array(",
                         f", {mesh}, {spec}({json.dumps(self.axis)}))" + (")" if edit.iterator else ""))
            if isinstance(edit.node, ast.Call) and edit.node is not edit.inner:
                self._drop_import(edit.node.func)
        elif edit.action == "metrics":  # flax's get_metrics: device 0's copies, stacked over time, on the host
            self._around(edit, f"{jax}.tree.map(lambda *xs: {self.namer.numpy()}.stack(xs), *{jax}.device_get(", "))")
            self._drop_import(edit.node.func)
        elif edit.iterator:  # `np.array(chain(*mask))`: an iterator over the rows, as chain was
            self._around(edit, "iter(", ")")
            self._drop_import(edit.node.func)
        elif edit.action == "fetch":  # device 0's copies on the host: the replicated value's, from any process
            self._around(edit, f"{jax}.device_get(", ")")
            if isinstance(edit.node, ast.Call):
                self._drop_import(edit.node.func)
        elif edit.action == "index" and self._on_some_processes(edit.node) and not self._read_on_the_host(edit):
            # pmap's copy was on this process's first device. The global array spans every
            # process, and a computation on it that only some processes run breaks JAX's
            # multi-process rule (each runs every computation on its global arrays): the copy
            # this process holds is what the branch computes with.
            self._around(edit, f"{jax}.tree.map(lambda x: x.addressable_data(0), ", ")")
            if isinstance(edit.node, ast.Call):
                self._drop_import(edit.node.func)
        else:  # index / unshard / unwrap / transfer: the device axis is gone, the value itself is what was read
            if edit.action == "unwrap":
                self.notes.add("flax's `prefetch_to_device` goes: each batch is laid out where the step takes it, "
                               "its transfer asynchronous as the step's dispatch")
            comprehension = self.module.parent_of(edit.node)
            if isinstance(comprehension, ast.DictComp) and edit.node is comprehension.value:
                statement = self.module.parent_of(comprehension)  # `batch = {k: v for k, v in batch.items()}`
                if _copies_itself(statement, comprehension, edit.inner) and self._own_lines(statement):
                    self._delete_lines(statement)
                    self._drop_import(edit.node.func)
                    return
            choice = self.module.parent_of(edit.node)
            if isinstance(choice, ast.IfExp) and edit.node is not choice.test and self.module.segment(edit.inner) \
                    == self.module.segment(choice.orelse if edit.node is choice.body else choice.body):
                edit = replace(edit, node=choice)  # `unreplicate(x) if use_pmap else x`: `x` either way now
            statement = self.module.parent_of(edit.node)
            if isinstance(statement, ast.Assign) and statement.value is edit.node and len(statement.targets) == 1 \
                    and _same_name(statement.targets[0], edit.inner) and self._own_lines(statement):
                self._delete_lines(statement)  # `x = x[0]` / `probs = probs.reshape(...)`: nothing left to do
                return
            self._around_atom(edit)
            if isinstance(edit.node, ast.Call):
                self._drop_import(edit.node.func)

    def _delete_argument(self, call: ast.Call, argument: ast.AST) -> None:
        """``argument`` of ``call`` goes, and the comma before or after it."""
        parts = call_arguments(call)
        index = parts.index(argument)
        self.plan.edits.append(Edit(*arguments_span(self.module, parts, index, index), ""))

    def _drop_pad_wrapper(self, wrapper: ast.Call) -> None:
        """``p_eval_step_pad = pad_shard_unpad(p_eval_step, ...)`` goes (once, whatever the calls):
        its calls now call the step itself."""
        statement = self.module.parent_of(wrapper)
        if id(statement) in self._dropped:
            return
        if not self._own_lines(statement):
            raise Blocked(statement.lineno, "the line keeping `pad_shard_unpad`'s wrapper holds a comment or "
                          "another statement, which the fix would have to delete with it")
        self._dropped.add(id(statement))
        self._delete_lines(statement)
        self._drop_import(wrapper.func)

    def _on_some_processes(self, node: ast.AST) -> bool:
        """Whether ``node`` runs in a branch of a multi-process module taken by some processes only
        (``if jax.process_index() == 0:``)."""
        if not planner_of(self.module).multi_process:
            return False
        child, parent = node, self.module.parent_of(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.Lambda, ast.Module)):
            if isinstance(parent, (ast.If, ast.While, ast.IfExp)) and child is not parent.test \
                    and self._reads_process_index(parent.test):
                return True
            child, parent = parent, self.module.parent_of(parent)
        return False

    def _reads_process_index(self, test: ast.expr, through_names: bool = True) -> bool:
        """Whether ``test`` asks ``jax.process_index()``, itself or through a name bound to an
        expression that does (``is_main = jax.process_index() == 0``)."""
        for node in ast.walk(test):
            if isinstance(node, ast.Call) and self.module.names.qualified_name(node.func) == "jax.process_index":
                return True
            if through_names and isinstance(node, ast.Name) and any(
                    isinstance(getattr(b, "value", None), ast.expr) and self._reads_process_index(b.value, False)
                    for b in self.module.names.bindings(node)):
                return True
        return False

    def _read_on_the_host(self, edit) -> bool:
        """Whether the value ``edit`` leaves is only fetched to the host (``jax.device_get(...)``),
        which reads the copy this process holds without computing on the global array."""
        parent = self.module.parent_of(edit.node)
        return (isinstance(parent, ast.Call) and edit.node in parent.args
                and self.module.names.qualified_name(parent.func) in _HOST_READS)

    def _batch_layout(self, mesh: str) -> str:
        """What opens a host batch laid out along the mesh's axis, each process its own rows:
        ``jax.make_array_from_process_local_data(NamedSharding(mesh, P(axis)), `` (the batch and
        ``)`` follow)."""
        named = self.namer.sharding("NamedSharding")
        spec = self.namer.sharding("PartitionSpec", "P")
        axis = json.dumps(self.axis)
        return f"{self.namer.jax()}.make_array_from_process_local_data({named}({mesh}, {spec}({axis})), "

    def _padding_helper(self) -> str:
        """The module's ``pad_to_local_devices``: flax's ``pad_shard_unpad`` padding, without the
        split per device (a batch laid out on the mesh divides over its devices by itself)."""
        name = "pad_to_local_devices"
        if name not in self.plan.helpers:
            if not self.module.free(name):
                raise Blocked(1, f"no free module-level name for the padding helper (`{name}` is taken)")
            jax, np = self.namer.jax(), self.namer.numpy()
            self.plan.helpers[name] = (
                f"def {name}(tree, min_device_batch=None):\n"
                '    """`tree`\'s arrays with zero rows added, to the same number per local device (at least\n'
                '    `min_device_batch`), as flax\'s `pad_shard_unpad` padded them for pmap."""\n'
                f"    devices = {jax}.local_device_count()\n"
                f"    rows = {jax}.tree.leaves(tree)[0].shape[0]\n"
                "    per_device = max(-(-rows // devices), min_device_batch or 0)\n"
                "\n"
                "    def pad(x):\n"
                f"        padding = {np}.zeros((per_device * devices - rows, *x.shape[1:]), x.dtype)\n"
                f"        return {np}.concatenate([x, padding])\n"
                "\n"
                f"    return {jax}.tree.map(pad, tree)\n")
        return name

    def _around(self, edit, before: str, after: str) -> None:
        """Replace what surrounds ``edit.inner`` in ``edit.node``, not the inner text itself: a call
        site edit inside it (``unreplicate(step(params, shard(batch)))``) then stays its own edit."""
        start, end = self.module.span(edit.node)
        inner_start, inner_end = self.module.span(edit.inner)
        for a, b, text in ((start, inner_start, before), (inner_end, end, after)):
            if a != b or text:
                self.plan.edits.append(Edit(a, b, text))

    def _around_atom(self, edit) -> None:
        """``edit.node`` becomes its inner expression alone, parenthesised where the context needs it."""
        text = self.module.segment(edit.inner)
        wrapped = self._atom(edit.inner, edit.node) != text
        self._around(edit, "(" if wrapped else "", ")" if wrapped else "")

    def _first_placements(self, nodes: list[ast.AST], scope_of) -> list[tuple[ast.AST, ast.stmt]]:
        """Per driving scope, the first statement that lays out a value: the mesh goes just above."""
        if not nodes:
            raise Blocked(1, "no call site lays out the step's arguments")
        firsts: dict[int, tuple[ast.AST, ast.stmt]] = {}
        for node in nodes:
            scope = scope_of(node)
            statement = self._statement_in(node, scope)
            if isinstance(scope, ast.Module) and is_main_guard(statement):
                scope = statement  # a script's `__main__` block: the mesh goes in it, not at import
                statement = self._statement_in(node, scope)
            known = firsts.get(id(scope))
            if known is None or statement.lineno < known[1].lineno:
                firsts[id(scope)] = (scope, statement)
        return list(firsts.values())

    def _built_mesh(self, firsts: list[tuple[ast.AST, ast.stmt]]) -> str | None:
        """The name of a mesh the program already builds where the global view would build its
        own: in every driving scope, a name bound once, by an assignment of that scope's own body
        above its first placement, to the 1-D Auto mesh of every device over this axis. It is used
        instead of building a second, identical mesh."""
        found = set()
        for scope, first in firsts:
            body = getattr(scope, "body", None)
            if not isinstance(body, list) or isinstance(scope, ast.Module):
                return None  # module level: the mesh the view builds there is the one a script needs
            match = None
            for statement in body:
                if statement is first or statement.lineno >= first.lineno:
                    break
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                        and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Call):
                    axis = every_device_mesh_axis(self.module, statement.value)
                    if isinstance(axis, ast.Constant) and axis.value == self.axis:
                        match = statement.targets[0].id
            if match is None or not self._bound_once(scope, match):
                return None
            found.add(match)
        return found.pop() if len(found) == 1 else None

    def _bound_once(self, scope: ast.AST, name: str) -> bool:
        """``name`` has one binding in the resolver's scope of ``scope`` (a function, or the module
        for a `__main__` block) and no `global` / `nonlocal` elsewhere rebinds it."""
        names = self.module.names
        owner = names.scope_opened_by(scope) or names.module_scope
        return len(owner.bindings.get(name, [])) == 1 and not names.declared_shared(name)

    def _insert_mesh(self, mesh: str, firsts: list[tuple[ast.AST, ast.stmt]]) -> None:
        """The mesh is built where the driving code runs, never at import of a module that did not
        already run JAX there: at the top of each driving function, just before the first statement
        that lays out a value (so a ``jax.distributed.initialize()`` above it still runs first), and
        at module level only for a script whose own top level drives the step. Every copy is the same
        mesh (same devices, same axis), so no step compiles twice."""
        jax = self.namer.jax()
        axis_type = self.namer.sharding("AxisType")
        text = (f"{mesh} = {jax}.make_mesh(({jax}.device_count(),), ({json.dumps(self.axis)},), "
                f"axis_types=({axis_type}.Auto,))")
        newline = self.module.src.newline
        for scope, first in firsts:
            if isinstance(scope, ast.Module):
                gap = newline * 2 if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
                offset = self.module.insertion_point(first)
                self.plan.edits.append(Edit(offset, offset, text + newline + gap))
            else:
                line = self.module.src.line(first.lineno)
                indent = line[: len(line) - len(line.lstrip(" \t"))]
                offset = self.module.src.line_starts[first.lineno - 1]
                self.plan.edits.append(Edit(offset, offset, indent + text + newline))

    def _statement_in(self, node: ast.AST, scope: ast.AST) -> ast.stmt:
        """The statement of ``scope``'s own body that ``node`` is part of."""
        return child_of(self.module, node, scope)


def _copies_itself(statement: ast.AST, comprehension: ast.DictComp, value: ast.expr) -> bool:
    """``name = {k: v for k, v in name.items()}``, once ``value`` is what each entry keeps: the
    dict bound to itself again, a statement with nothing left to do."""
    loop = comprehension.generators[0]
    items = loop.iter
    return (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.value is comprehension
            and isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2
            and _same_name(comprehension.key, loop.target.elts[0]) and _same_name(value, loop.target.elts[1])
            and isinstance(items, ast.Call) and isinstance(items.func, ast.Attribute) and items.func.attr == "items"
            and _same_name(statement.targets[0], items.func.value))


def _without_effects(module, node: ast.expr) -> bool:
    """Evaluating ``node`` does nothing but make a value: names, attributes, literals, and calls of
    ``jax.pmap`` and ``functools.partial`` over such."""
    for part in ast.walk(node):
        if isinstance(part, ast.Call) and module.names.qualified_name(part.func) not in ("jax.pmap", "functools.partial"):
            return False
        if isinstance(part, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Subscript)):
            return False
    return True


def _out_axes(value):
    """``out_axes=`` as the driving code reads it: 0 (every output mapped), None (every output
    unmapped), a tuple of 0 / None one per output, or "?"."""
    if _every_axis_zero(value):
        return 0
    if value is None:
        return None
    if isinstance(value, (tuple, list)) and value and all(axis is None or _every_axis_zero(axis) for axis in value):
        return tuple(None if axis is None else 0 for axis in value)
    return "?"


def _every_axis_zero(value) -> bool:
    """``0``, or a tuple, list or dict of them (``out_axes=(0, 0)``, one per output: pmap then maps
    each output over its first axis, as ``0`` does)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return bool(value) and all(_every_axis_zero(v) for v in value)
    return type(value) is int and value == 0


def _arithmetic(node: ast.expr) -> bool:
    """Names, numbers and an array's sizes (``x.shape[0]``) joined by arithmetic (``per_device =
    images.shape[0] // n_devices``): reading it has no effect, so a binding of it no one reads can go."""
    if isinstance(node, ast.BinOp):
        return _arithmetic(node.left) and _arithmetic(node.right)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return isinstance(node.value.value, ast.Name) and isinstance(node.slice, ast.Constant) \
            and type(node.slice.value) is int
    return isinstance(node, ast.Name) or isinstance(node, ast.Constant) and type(node.value) in (int, float)


# A notebook cell's first line (`# %%` of jupytext, VS Code and Spyder; `# In[3]:` of an exported
# notebook): it belongs to the cell, not to the def below it.
_CELL_MARKER = re.compile(r"\s*#\s*(%%|In\[[\d ]*\]:|<codecell>)")


def _same_names(target: ast.expr, value: ast.expr) -> bool:
    """``target`` names what ``value`` names, in order: ``x`` and ``x``, ``(a, b)`` and ``(a, b)`` or ``[a, b]``."""
    if isinstance(target, ast.Name) and isinstance(value, ast.Name):
        return target.id == value.id
    sequences = (ast.Tuple, ast.List)  # (`loss, grads = [loss, grads]` assigns them to themselves too)
    return isinstance(target, sequences) and isinstance(value, sequences) and len(target.elts) == len(value.elts) \
        and all(_same_names(t, v) for t, v in zip(target.elts, value.elts))


def _same_name(a: ast.expr, b: ast.expr | str) -> bool:
    name = b if isinstance(b, str) else getattr(b, "id", None) if isinstance(b, ast.Name) else None
    return isinstance(a, ast.Name) and a.id == name


def _last_parameter_end(module, func: ast.FunctionDef, keyword_only: bool) -> int:
    """Where ``func``'s last positional (or, with ``keyword_only``, keyword-only) parameter ends,
    its annotation and default included."""
    args = func.args
    if keyword_only:
        pairs = list(zip(args.kwonlyargs, args.kw_defaults))
    else:
        positional = [*args.posonlyargs, *args.args]
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        pairs = list(zip(positional, defaults))
    return max(module.span(node)[1] for node in pairs[-1] if node is not None)


def _self_of(module, node: ast.AST) -> str | None:
    """The name of ``self`` in the method ``node`` is in."""
    found = method_of(module, node)
    return found[1].args.args[0].arg if found is not None else None


def _identifiers_of(node: ast.AST) -> tuple[str, ...]:
    """The identifiers a node spells: a name, an attribute, a parameter, a definition, an import's
    names, a keyword, a ``global`` / ``nonlocal``, an exception's or a pattern's capture."""
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    if isinstance(node, ast.arg):
        return (node.arg,)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0],)
    if isinstance(node, ast.keyword) and node.arg:
        return (node.arg,)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return tuple(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        return (node.name,)
    if isinstance(node, ast.MatchMapping) and node.rest:
        return (node.rest,)
    return ()


def _lines(numbers: set[int]) -> str:
    """``line 7`` / ``lines 7, 12``."""
    return ("lines " if len(numbers) > 1 else "line ") + ", ".join(map(str, sorted(numbers)))


def _indentation(text: str) -> str:
    return text[:len(text) - len(text.lstrip())]
