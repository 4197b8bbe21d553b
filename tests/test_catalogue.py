"""The legacy-symbol catalogue: it parses, it agrees with the rules, and it covers installed JAX."""

from __future__ import annotations

import importlib

import pytest

from jaxmigrate import catalogue
from jaxmigrate.lint import registry
from jaxmigrate.lint.legacy import CatalogueRule

RULES = {rule.code: rule for rule in registry.all_rules()}
CATALOGUE_RULES = [rule for rule in RULES.values() if issubclass(rule, CatalogueRule)]

# Modules of installed JAX with a `_deprecations` table; every entry must be in the catalogue or
# in ALLOWED below.
DEPRECATION_MODULES = (
    "jax",
    "jax.experimental.pjit",
    "jax.experimental.shard_map",
    "jax.sharding",
    "jax.experimental",
    "jax.experimental.mesh_utils",
    "jax.tree_util",
    "jax.interpreters.pxla",
    # every other public module of jax 0.10.2 with a `_deprecations` table (but Pallas')
    "jax.ad_checkpoint",
    "jax.core",
    "jax.interpreters.ad",
    "jax.interpreters.batching",
    "jax.lax",
    "jax.numpy",
    "jax.scipy.special",
)
_PXLA_INTERNALS = (
    "pmap/pjit runtime internals (executables, result handlers, sharding-spec types) that user "
    "code does not call; migrating pmap (JM101) removes the reason to touch them"
)
ALLOWED = {
    f"jax.interpreters.pxla.{name}": _PXLA_INTERNALS
    for name in (
        "Index", "MeshAxisName", "MeshComputation", "MeshExecutable",
        "global_aval_to_result_handler", "global_avals_to_results_handler",
        "global_result_handlers", "thread_resources", "are_hlo_shardings_equal",
        "is_hlo_sharding_replicated", "op_sharding_to_indices", "ArrayMapping", "_UNSPECIFIED",
        "array_mapping_to_axis_resources", "MapTracer", "PmapExecutable", "parallel_callable",
        "shard_args", "Chunked", "NoSharding", "Replicated", "ShardedAxis", "ShardingSpec",
        "Unstacked", "spec_to_indices",
    )
}


def test_catalogue_parses_and_is_not_empty():
    assert len(catalogue.symbols()) >= 20


@pytest.mark.parametrize("symbol", catalogue.symbols(), ids=lambda s: f"{s.code}:{s.name}:{s.keyword}")
def test_entry_is_consistent(symbol):
    assert symbol.code in RULES, f"{symbol.code} is not a registered rule"
    assert symbol.replacement and symbol.link.startswith("https://") and symbol.source
    for version in filter(None, (symbol.deprecated_in, symbol.removed_in)):
        assert catalogue.parse_version(version)
    if symbol.removed_in and symbol.deprecated_in:
        assert catalogue.parse_version(symbol.deprecated_in) < catalogue.parse_version(symbol.removed_in)


def test_named_entries_are_unique():
    seen: dict[str, str] = {}
    for symbol in catalogue.symbols():
        if symbol.kind in catalogue.NAMED_KINDS:
            for name in symbol.names:
                assert name not in seen, f"{name} is listed by {seen[name]} and {symbol.code}"
                seen[name] = symbol.code


@pytest.mark.parametrize("rule", CATALOGUE_RULES, ids=lambda r: r.code)
def test_catalogue_rule_has_entries_and_sound_trigger_words(rule):
    entries = catalogue.for_code(rule.code)
    assert entries, f"{rule.code} claims catalogue entries but has none"
    for symbol in entries:
        if symbol.kind == "keyword":
            # A finding needs both the keyword and the callee written: either is a sound trigger.
            callees = {n.rpartition(".")[2] for n in symbol.names}
            assert symbol.keyword in rule.trigger_words or callees <= set(rule.trigger_words)
        elif symbol.kind == "context-manager":
            assert {c.rpartition(".")[2] for c in symbol.constructors} <= set(rule.trigger_words)
        else:
            # Reaching a.b.c needs `.c`, `import c` or a bare `c`: the last component is written.
            assert {n.rpartition(".")[2] for n in symbol.names} <= set(rule.trigger_words)


@pytest.mark.parametrize(
    ("qualname", "code"),
    [
        pytest.param("jax.pmap", "JM101", id="exact"),
        pytest.param("jax.experimental.PositionalSharding", "JM301", id="alias"),
        pytest.param("jax.experimental.maps.anything", "JM303", id="member-of-removed-module"),
        pytest.param("jax.tree_util.tree_map", None, id="modern-tree-map"),
        pytest.param("jax.experimental.pjit", None, id="module-that-still-exists"),
        pytest.param("jax.experimental.mapsx", None, id="prefix-is-not-a-member"),
    ],
)
def test_lookup(qualname, code):
    found = catalogue.lookup(qualname)
    assert (found.code if found else None) == code


def test_target_version_decides_status():
    (pjit,) = [s for s in catalogue.for_code("JM201")]
    assert not pjit.applies_to((0, 7)) and pjit.applies_to((0, 8))
    assert pjit.status((0, 10)) == "is deprecated since JAX 0.8.0"
    (tree_map,) = [s for s in catalogue.symbols() if s.name == "jax.tree_map"]
    assert tree_map.status((0, 5)) == "is deprecated since JAX 0.4.26"
    assert tree_map.status((0, 6)) == "was removed in JAX 0.6.0"
    (pmap,) = catalogue.for_code("JM101")
    assert pmap.applies_to((0, 1)) and pmap.status((0, 10)) == "is superseded"


def test_bad_entry_is_rejected():
    with pytest.raises(catalogue.CatalogueError):
        catalogue.load(
            '[[symbol]]\nname="a.b"\nkind="function"\nreplacement="c"\ncode="JM101"\n'
            'deprecated_in="1"\nremoved_in=""\nfix="rename"\nsafety="safe"\nlink="https://x"\n'
        )


def _deprecation_entries():
    pytest.importorskip("jax")
    for module_name in DEPRECATION_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "_deprecations", {}):
            yield f"{module_name}.{name}"


def test_installed_jax_deprecations_are_covered():
    covered = {name for symbol in catalogue.symbols() for name in symbol.names}
    missing = [
        name for name in _deprecation_entries() if name not in covered and name not in ALLOWED
    ]
    assert missing == [], f"add these to symbols.toml (or ALLOWED, with a reason): {missing}"


def test_allow_list_is_not_stale():
    present = set(_deprecation_entries())
    assert set(ALLOWED) <= present, set(ALLOWED) - present


def _present_in_installed_jax(symbol, name: str) -> bool:
    import inspect

    if symbol.kind == "import":
        try:
            importlib.import_module(name)
        except ImportError:
            return False
        return True
    obj = catalogue.installed(name)
    if symbol.kind != "keyword" or obj is None:
        return obj is not None
    parameter = inspect.signature(obj).parameters.get(symbol.keyword)
    return parameter is not None and parameter.kind is not parameter.POSITIONAL_ONLY


JAX_NAMES = [
    pytest.param(symbol, name, id=f"{symbol.code}:{name}:{symbol.keyword}")
    for symbol in catalogue.symbols() if symbol.kind != "context-manager"
    for name in symbol.names if name.startswith("jax.")
]


# Keywords still in the installed signature that are gone all the same, and why.
KEPT_IN_SIGNATURE = {
    ("jax.numpy.sort", "kind"): "kept as `kind: None = None`; any other value raises TypeError",
    ("jax.numpy.argsort", "kind"): "kept as `kind: None = None`; any other value raises TypeError",
}
# Callees of an entry that never took its keyword: the finding is for code written as if they did.
NEVER_TOOK = {("jax.shard_map", "check_rep"): "the entry is the experimental wrapper's; its calls are renamed to jax.shard_map"}


@pytest.mark.parametrize(("symbol", "name"), JAX_NAMES)
def test_removed_in_agrees_with_installed_jax(symbol, name):
    """An entry removed by 0.10 is gone from the installed jax 0.10.2 (the module does not import,
    the attribute raises, the callee has no such parameter); one without ``removed_in`` is there."""
    jax = pytest.importorskip("jax")
    installed = catalogue.parse_version(jax.__version__)[:2]
    assert installed == (0, 10)
    if symbol.kind == "keyword" and catalogue.installed(name) is None:
        pytest.skip(f"{name} itself is gone")  # e.g. jax.extend.ffi.ffi_call: the module went first
    if (name, symbol.keyword) in KEPT_IN_SIGNATURE:
        assert _present_in_installed_jax(symbol, name), "no longer in the signature: drop the exception"
        return
    if (name, symbol.keyword) in NEVER_TOOK:
        assert not _present_in_installed_jax(symbol, name)
        return
    assert _present_in_installed_jax(symbol, name) == (not symbol.removed_for(installed)), symbol.removed_in
