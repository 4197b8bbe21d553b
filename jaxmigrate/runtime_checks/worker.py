"""One side of a verification, run as a standalone script: ``python worker.py request.json``.

This file runs under whatever interpreter the user points the harness at (a venv with
jax 0.4.30, say) where jaxmigrate is not installed, so it imports only the standard library,
numpy and jax - never the jaxmigrate package - and keeps to syntax every supported Python reads.

The parent puts JAX_PLATFORMS / XLA_FLAGS (forced CPU device count, HLO dump dir) in this
process's environment; XLA reads them once, when the backend starts, so they must be in place
before jax is imported - which is why jax is imported inside main(), after checking them.

Protocol: the request names the program, entries, optional inputs function, output dir and
dump dir. The worker (re)writes ``result.json`` in the output dir after every step, so a parent
that has to kill a hung worker still knows how far it got, and saves each entry's output leaves
to ``<index>.npz``. Every compilation JAX reports while an entry runs is recorded with the entry.

With ``timing`` ({"warmup": W, "repeat": K}) and a ``turn_file``, once every entry has run once the
worker says ``phase: await-timing`` and waits until the parent creates the turn file (the parent
lets one side measure at a time where the machine lacks the cores for both), then calls each entry
W + K more times with fresh arguments, each call synchronised, and keeps the last K durations.

With ``processes`` > 1 the request also names this worker's ``process_id`` and the side's
``coordinator`` (always 127.0.0.1:PORT): the worker joins the others with
``jax.distributed.initialize`` and gloo CPU collectives before the program is imported (a program
may call jax at import). A process that fails stops there, says so in result.json (the parent
watches for it and kills the peers that do not finish soon after) and exits at once, skipping
JAX's exit barrier, which would wait for peers that may be blocked in a collective - except
process 0, which hosts the coordinator: if it left, the others' JAX clients would abort before
they could report their own errors, so it waits in that barrier until they are done or killed.
"""

import os
import sys

# Run as a script, this file's folder is sys.path[0]; a user program importing a module named
# like one of ours (compare, report, hlo) must get its own, so drop that entry first.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import importlib.util  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

_AFTER_OPT = re.compile(r"^module_\d+\..+\.(?:[a-z]+_)?after_optimizations\.txt$")
EXIT_OK, EXIT_FAILED, EXIT_NO_JAX = 0, 3, 4
# This process's id once it has joined the others (see the module docstring on failing processes).
_CONNECTED = []


# jax.monitoring duration events of a compilation, in both jax 0.4.30 and 0.10.2 (jax/_src/dispatch.py).
_COMPILE_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_seconds",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_seconds",
                   "/jax/core/compile/backend_compile_duration": "xla"}
_COMPILE_LOG = re.compile(r"^Finished XLA compilation of (?P<name>.+) in [0-9.eE+-]+ sec$")


class _Compilations:
    """The compilations JAX reports, into whichever record ``into`` names (None: not counted).

    jax.monitoring gives the XLA compile, trace and lowering durations. Newer JAX passes the
    function's name with each event (``fun_name``); jax 0.4.30 passes none, but logs "Finished XLA
    compilation of NAME" on ``jax._src.dispatch`` just before recording the event, so until a
    named event arrives that logger is opened to DEBUG with a filter that keeps the name and lets
    through only what its handlers would have seen anyway.
    """

    def __init__(self, jax):
        self.into = None
        self._pending = []
        self._logger = logging.getLogger("jax._src.dispatch")
        self._level = self._logger.level
        self._logger.addFilter(self)
        self._logger.setLevel(logging.DEBUG)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def filter(self, record):
        match = _COMPILE_LOG.match(record.getMessage())
        if match:
            self._pending.append(match.group("name"))
        return record.levelno >= (self._level or self._logger.parent.getEffectiveLevel())

    def _stop_logging(self):
        if self._logger.level == logging.DEBUG:
            self._logger.setLevel(self._level)
        self._logger.removeFilter(self)

    def _on_duration(self, event, duration, **kwargs):
        field = _COMPILE_EVENTS.get(event)
        if field is None:
            return
        name = kwargs.get("fun_name")
        if name is not None and self._pending is not None:
            self._stop_logging()
            self._pending = None
        if field != "xla":
            if self.into is not None:
                self.into[field] = self.into.get(field, 0.0) + duration
            return
        if name is None:
            name = self._pending.pop() if self._pending else "?"
            del self._pending[:]
        if self.into is not None:
            self.into.setdefault("compilations", []).append({"name": str(name), "seconds": duration})

    def record(self):
        """A fresh record that collects from now on."""
        self.into = {"compilations": [], "trace_seconds": 0.0, "lower_seconds": 0.0}
        return self.into


def _peak_rss():
    """This process's peak resident memory in bytes (None where the OS does not say)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class _Result:
    def __init__(self, out_dir):
        self.path = os.path.join(out_dir, "result.json")
        self.data = {"status": "running", "phase": "start", "entries": {}}

    def update(self, **fields):
        self.data.update(fields)
        self.flush()

    def flush(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=1, default=str)
        os.replace(tmp, self.path)


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s as a module" % path)
    module = importlib.util.module_from_spec(spec)
    # Registered before executing, so pickling, dataclasses and self-imports see it.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _module_name(path, fallback):
    stem = os.path.splitext(os.path.basename(path))[0]
    # A stem that shadows an imported module (jax.py, numpy.py) would replace it.
    if stem.isidentifier() and stem not in sys.modules:
        return stem
    return fallback


def _optimized_modules(dump_dir):
    try:
        names = os.listdir(dump_dir)
    except FileNotFoundError:
        return set()
    return {n for n in names if _AFTER_OPT.match(n)}


def _did_you_mean(module, entry):
    """" (did you mean 'train_step'?)" for a misspelt entry, from the module's own functions."""
    import difflib

    names = [name for name, value in vars(module).items() if callable(value) and not name.startswith("_")]
    close = difflib.get_close_matches(entry, names, n=1)
    return " (did you mean %r?)" % close[0] if close else ""


def _call_args(inputs_fn, entry):
    """Build an entry's arguments; a one-parameter inputs function is told which entry."""
    if inputs_fn is None:
        return (), {}
    try:
        takes_entry = len(inspect.signature(inputs_fn).parameters) >= 1
    except (TypeError, ValueError):
        takes_entry = False
    made = inputs_fn(entry) if takes_entry else inputs_fn()
    if isinstance(made, dict):
        return (), made
    if isinstance(made, tuple):
        return made, {}
    return (made,), {}


def _block(jax, tree):
    if hasattr(jax, "block_until_ready"):
        return jax.block_until_ready(tree)
    return jax.tree_util.tree_map(lambda x: x.block_until_ready() if hasattr(x, "block_until_ready") else x, tree)


def _bounds(index, size):
    """A shard's index along one axis (a slice, maybe open-ended) as (start, stop)."""
    start, stop, _ = index.indices(size)
    return start, stop


def _merged(intervals):
    """Sorted disjoint (start, stop) intervals with touching ones joined: [(0, 1), (1, 2)] -> [(0, 2)]."""
    out = []
    for start, stop in intervals:
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], stop)
        else:
            out.append((start, stop))
    return out


def _process_local_block(np, arr):
    """(numpy array, note): what this process holds of a global jax.Array.

    A global array spans devices of other processes, so its value cannot be fetched here (JAX
    raises "Fetching value for jax.Array that spans non-addressable devices"). Each process saves
    the part on its own devices instead, assembled in global order: for an array sharded along
    its leading axis that is exactly the process-local data ``jax.make_array_from_process_local_data``
    takes, so it compares with a pmap-era program's per-process output; a replicated array is
    whole on every process. Collecting other processes' parts (``process_allgather``) would be a
    collective of its own, which hangs when a peer has failed.
    """
    regions = {}
    for shard in arr.addressable_shards:
        key = tuple(_bounds(index, size) for index, size in zip(shard.index, arr.shape))
        regions.setdefault(key, shard)  # replicas of one region: any of them
    if not regions:
        return None, "a global %s%s array with no part on this process" % (arr.dtype, list(arr.shape))
    per_axis = [sorted({key[axis] for key in regions}) for axis in range(arr.ndim)]
    count = 1
    for intervals in per_axis:
        count *= len(intervals)
    disjoint = all(a[1] <= b[0] for intervals in per_axis for a, b in zip(intervals, intervals[1:]))
    if count != len(regions) or not disjoint:
        return None, ("this process holds %d parts of a global %s%s array that do not form a block"
                      % (len(regions), arr.dtype, list(arr.shape)))
    offsets = []
    for intervals in per_axis:
        at, starts = 0, {}
        for start, stop in intervals:
            starts[(start, stop)] = at
            at += stop - start
        offsets.append(starts)
    shape = [sum(stop - start for start, stop in intervals) for intervals in per_axis]
    block = None
    for key, shard in regions.items():
        data = np.asarray(shard.data)
        if block is None:
            block = np.empty(shape, dtype=data.dtype)
        where = tuple(slice(offsets[axis][b], offsets[axis][b] + b[1] - b[0]) for axis, b in enumerate(key))
        block[where] = data
    if shape == list(arr.shape):
        return block, ""
    spans = ", ".join(
        ":" if merged == [(0, size)] else " + ".join("%d:%d" % b for b in merged)
        for merged, size in zip(map(_merged, per_axis), arr.shape))
    return block, "process-local part [%s] of a global %s array" % (spans, list(arr.shape))


def _leaf_to_numpy(jax, np, leaf):
    """(array numpy can save without pickle, dtype name as JAX knows it, note)."""
    dtype = getattr(leaf, "dtype", None)
    value, name, note = leaf, None, ""
    # JAX before typed keys (0.4.13, the oldest that installs on Python 3.11) has no prng_key.
    prng_key = getattr(jax.dtypes, "prng_key", None)
    if dtype is not None and prng_key is not None and jax.dtypes.issubdtype(dtype, prng_key):
        value, name, note = jax.random.key_data(leaf), "key<%s>" % dtype, "typed PRNG key: key data compared"
    if isinstance(value, jax.Array) and not value.is_fully_addressable:
        try:
            array, part = _process_local_block(np, value)
        except Exception as exc:  # a sharding whose shards are not slices of the global array
            array, part = None, "a global array whose local part cannot be assembled (%s: %s)" % (
                type(exc).__name__, exc)
        note = "; ".join(n for n in (note, part) if n)
        if array is None:
            return None, name or str(value.dtype), note
    else:
        try:
            array = np.asarray(value)
        except Exception as exc:  # an opaque leaf: compare its repr only
            return None, type(leaf).__name__, "not an array (%s): %r" % (type(exc).__name__, leaf)
    if name is not None:
        return array, name, note
    name = str(array.dtype)
    if array.dtype.kind == "O" or array.dtype.kind in "US":
        return None, name, repr(leaf)
    if array.dtype.kind == "V":
        # ml_dtypes (bfloat16, float8_*, int4) would need ml_dtypes to load back; every value
        # of theirs is exact in float32 / int64, so save that and keep the real name.
        wide = np.int64 if ("int" in name) else np.float32
        return array.astype(wide), name, note
    return array, name, note


def _save_outputs(jax, np, out, path):
    flat, treedef = jax.tree_util.tree_flatten_with_path(out)
    arrays, leaves = {}, []
    for i, (key_path, leaf) in enumerate(flat):
        array, dtype_name, note = _leaf_to_numpy(jax, np, leaf)
        key = "leaf_%05d" % i
        if array is not None:
            arrays[key] = array
        sharding = getattr(leaf, "sharding", None)
        leaves.append({
            "path": jax.tree_util.keystr(key_path) or "<root>",
            "key": key if array is not None else None,
            "shape": list(array.shape) if array is not None else None,
            "dtype": dtype_name,
            "sharding": " ".join(str(sharding).split()) if sharding is not None else None,
            "note": note,
        })
    np.savez(path, **arrays)
    return {"treedef": str(treedef), "leaves": leaves}


def _user_traceback():
    """The current exception's traceback without this file's frames: the user's code is the story."""
    kind, exc, tb = sys.exc_info()
    if exc is None:
        return ""
    here = os.path.abspath(__file__)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) == here:
        tb = tb.tb_next
    return "".join(traceback.format_exception(kind, exc, tb))


def _fail(result, kind, message, code=EXIT_FAILED):
    result.update(status="failed", failure={"kind": kind, "message": message,
                                            "traceback": _user_traceback()})
    return code


def _set_threefry(jax, mode):
    """Apply --threefry-partitionable; report the value in effect (None: this JAX lacks it)."""
    if not hasattr(jax.config, "jax_threefry_partitionable"):
        return None
    if mode in ("true", "false"):
        jax.config.update("jax_threefry_partitionable", mode == "true")
    return bool(jax.config.jax_threefry_partitionable)


def _version(text):
    parts = []
    for part in text.split(".")[:3]:
        digits = re.match(r"\d+", part)
        parts.append(int(digits.group()) if digits else 0)
    return tuple(parts)


class _CannotConnect(Exception):
    """This JAX cannot run the side as several processes (the message says why)."""


def _connect(jax, req):
    """Join this side's other processes, before anything starts the backend."""
    if req["devices"] > 1 and _version(jax.__version__) <= (0, 4, 30):
        # Measured on jax 0.4.30: gloo's context setup for a psum over 2 processes x 2 devices
        # waits 30 s on a key no process writes (cpu:gloo/0,1,131072,131073/...) and aborts.
        raise _CannotConnect(
            "jax %s runs CPU collectives across processes with one CPU device per process only "
            "(with more, gloo's setup times out and aborts); use --devices 1 for this side, or a "
            "newer JAX" % jax.__version__)
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except Exception:
        try:  # the flag's name before jax 0.4.27
            jax.config.update("jax_cpu_enable_gloo_collectives", True)
        except Exception:
            raise _CannotConnect("jax %s has no CPU collectives across processes (neither "
                                 "jax_cpu_collectives_implementation nor jax_cpu_enable_gloo_collectives)"
                                 % jax.__version__)
    params = inspect.signature(_ORIGINAL_INITIALIZE[0]).parameters
    if "coordinator_bind_address" not in params:
        # Without it the coordinator listens on every interface ([::]:PORT), not on 127.0.0.1 only.
        raise _CannotConnect("jax %s's jax.distributed.initialize has no coordinator_bind_address, so "
                             "its coordinator would listen on every network interface" % jax.__version__)
    kwargs = {"coordinator_address": req["coordinator"], "coordinator_bind_address": req["coordinator"],
              "num_processes": req["processes"], "process_id": req["process_id"],
              "initialization_timeout": req["init_timeout"]}
    if "cluster_detection_method" in params:  # no Slurm / MPI / TPU detection: the harness says it all
        kwargs["cluster_detection_method"] = "deactivate"
    _ORIGINAL_INITIALIZE[0](**kwargs)
    _CONNECTED.append(req["process_id"])


# jax.distributed.initialize as jax defines it, kept before the program's own call is redirected.
_ORIGINAL_INITIALIZE = []


def _redirect_initialize(jax, req, connect):
    """The program's own ``jax.distributed.initialize()`` joins the harness's processes (its
    arguments, which name the user's cluster, are not used); a call after that is skipped, as a
    second call would raise. Called with ``connect`` None, it only says it is skipped."""
    _ORIGINAL_INITIALIZE.append(jax.distributed.initialize)
    process = "process %d of %d" % (req["process_id"], req["processes"])

    def initialize(*args, **kwargs):
        if connect is not None and not _CONNECTED:
            connect()
            return
        sys.stderr.write("jaxmigrate: the program's jax.distributed.initialize() is skipped: the harness "
                         "already connected this process (%s)\n" % process)

    jax.distributed.initialize = initialize


def main(argv):
    with open(argv[1]) as fh:
        req = json.load(fh)
    result = _Result(req["out_dir"])
    result.update(python=sys.executable, python_version=sys.version.split()[0], pid=os.getpid())
    started = time.monotonic()

    flags = os.environ.get("XLA_FLAGS", "")
    if "--xla_force_host_platform_device_count=%d" % req["devices"] not in flags or "jax" in sys.modules:
        return _fail(result, "worker-error", "XLA_FLAGS must be set before jax is imported; got %r" % flags)
    try:
        import numpy as np
        import jax
    except Exception as exc:
        return _fail(result, "no-jax", "%s: %s" % (type(exc).__name__, exc), EXIT_NO_JAX)

    result.update(phase="backend", jax_version=jax.__version__, numpy_version=np.__version__)
    threefry = _set_threefry(jax, req.get("threefry_partitionable", "as-is"))
    processes = req.get("processes", 1)
    # "before-import": the harness joins the processes, then imports the program (which may use jax at
    # import). "after-import": as a launcher does, the program is imported first and joins when it
    # calls jax.distributed.initialize() itself, else right after its import; a program that starts
    # JAX's backend at import then fails as it would under that launcher.
    after_import = processes > 1 and req.get("connect") == "after-import"
    failure = []

    def connect():
        result.update(phase="connect", process_id=req["process_id"])
        try:
            _connect(jax, req)
        except _CannotConnect as exc:
            failure.append(("unsupported", str(exc)))
        except Exception as exc:
            message = "jax.distributed.initialize(coordinator_address=%r, num_processes=%d, process_id=%d) " \
                "raised %s: %s" % (req["coordinator"], processes, req["process_id"], type(exc).__name__, exc)
            if after_import and "before any JAX" in str(exc):
                message += (" (importing %s started JAX's backend before the processes were joined: a launcher "
                            "that imports it and then calls jax.distributed.initialize() fails the same way)"
                            % req["program"])
            failure.append(("connect-error", message))
        if failure:  # raised from the program's own initialize() call, it stops its import too
            raise _CannotConnect(failure[0][1])

    if processes > 1:
        _redirect_initialize(jax, req, connect if after_import else None)
        if not after_import:
            try:
                connect()
            except _CannotConnect:  # outside the except block: this file's own frames are no evidence
                return _fail(result, *failure[0])

    def describe_devices():  # starts the backend
        result.update(device_count=jax.device_count(), local_device_count=jax.local_device_count(),
                      process_index=jax.process_index(), process_count=jax.process_count(),
                      platform=jax.devices()[0].platform, threefry_partitionable=threefry)

    if not after_import:
        describe_devices()
    jax_ready = time.time()

    program = os.path.abspath(req["program"])
    folder = os.path.dirname(program)
    home = req.get("home") or folder  # a program taken from git runs where it lives
    sys.path.insert(0, home)
    sys.path.insert(0, folder)
    os.chdir(home)
    result.update(phase="import")
    try:
        module = _load_module(program, _module_name(program, "jaxmigrate_program"))
    except (Exception, SystemExit) as exc:
        if failure:
            return _fail(result, *failure[0])
        return _fail(result, "import-error", "importing %s raised %s: %s" % (program, type(exc).__name__, exc))
    if after_import and not _CONNECTED:
        try:
            connect()
        except _CannotConnect:
            return _fail(result, *failure[0])
    if after_import:
        describe_devices()

    inputs_fn = None
    if req.get("inputs"):
        inputs_file, inputs_name = req["inputs"]["file"], req["inputs"]["function"]
        try:
            inputs_module = module if os.path.abspath(inputs_file) == program else _load_module(
                inputs_file, _module_name(inputs_file, "jaxmigrate_inputs"))
        except FileNotFoundError as exc:
            return _fail(result, "missing-inputs", "inputs file %s not found (%s)" % (inputs_file, exc))
        except (Exception, SystemExit) as exc:
            return _fail(result, "missing-inputs", "importing inputs file %s raised %s: %s"
                         % (inputs_file, type(exc).__name__, exc))
        inputs_fn = getattr(inputs_module, inputs_name, None)
        if not callable(inputs_fn):
            return _fail(result, "missing-inputs", "inputs function %r not found in %s" % (inputs_name, inputs_file))

    result.update(clock={"jax_ready": jax_ready, "imported": time.time()})
    compilations = _Compilations(jax)
    any_failed, ran = False, []
    for index, entry in enumerate(req["entries"]):
        record = {"index": index, "status": "running"}
        result.data["entries"][entry] = record
        result.update(phase="entry", running=entry)
        fn = getattr(module, entry, None)
        if not callable(fn):
            record.update(status="failed", failure={
                "kind": "missing-entry", "traceback": "",
                "message": "entry %r is not a function defined in %s%s" % (entry, program, _did_you_mean(module, entry))})
            any_failed = True
            if processes > 1:
                break
            continue
        try:
            args, kwargs = _call_args(inputs_fn, entry)
            args, kwargs = _block(jax, (args, kwargs))
        except (Exception, SystemExit) as exc:
            record.update(status="failed", failure=_inputs_failure(req, exc))
            any_failed = True
            if processes > 1:
                break
            continue
        before = _optimized_modules(req["dump_dir"])
        compiled = compilations.record()
        t0 = time.monotonic()
        try:
            out = _block(jax, fn(*args, **kwargs))
        except (Exception, SystemExit) as exc:
            compilations.into = None
            record.update(status="failed", failure={
                "kind": "raised", "traceback": _user_traceback(),
                "message": "%s() raised %s: %s" % (entry, type(exc).__name__, exc)})
            any_failed = True
            if processes > 1:
                break
            continue
        seconds = time.monotonic() - t0
        compilations.into = None
        del args, kwargs
        modules = sorted(_optimized_modules(req["dump_dir"]) - before)
        outputs = _save_outputs(jax, np, out, os.path.join(req["out_dir"], "%d.npz" % index))
        del out
        record.update(status="ok", seconds=seconds, modules=modules, outputs=outputs, compiled=compiled,
                      peak_rss=_peak_rss())
        ran.append((entry, fn, record))
    result.data["clock"]["first_calls_done"] = time.time()

    if req.get("timing") and ran and not (any_failed and processes > 1):
        result.data["waited"] = _await_turn(result, req["turn_file"])
        for entry, fn, record in ran:
            result.update(phase="timing", running=entry)
            if not _time_entry(jax, fn, inputs_fn, entry, req, record, compilations) and processes > 1:
                break  # the others may wait for this process in a collective: time nothing more
        result.data["clock"]["timed_done"] = time.time()
        result.update(phase="timed", running=None)

    result.data["peak_rss"] = _peak_rss()
    if any_failed and processes > 1:
        # The others may be waiting for this process in a collective: nothing more is run here.
        result.update(status="failed", phase="stopped", stopped_at=result.data["running"], running=None,
                      seconds=time.monotonic() - started)
        return EXIT_FAILED
    result.update(status="failed" if any_failed else "ok", phase="done", running=None,
                  seconds=time.monotonic() - started)
    return EXIT_FAILED if any_failed else EXIT_OK


def _inputs_failure(req, exc):
    return {"kind": "inputs-raised", "traceback": _user_traceback(),
            "message": "inputs function %r raised %s: %s" % (req["inputs"]["function"], type(exc).__name__, exc)}


def _await_turn(result, turn_file):
    """Wait until the parent lets this side measure; the seconds waited."""
    result.update(phase="await-timing", running=None)
    t0 = time.monotonic()
    while not os.path.exists(turn_file):
        time.sleep(0.005)
    return time.monotonic() - t0


def _time_entry(jax, fn, inputs_fn, entry, req, record, compilations):
    """Call the entry warm-up + repeat more times, each with fresh arguments (an entry may donate
    them) built outside the timed span, and each synchronised; keep the last ``repeat`` durations
    and every compilation of these calls. False if a call raised."""
    warmup, repeat = req["timing"]["warmup"], req["timing"]["repeat"]
    timed = {"warmup": warmup, "calls": [], "failure": None}
    record["timing"] = timed
    later = compilations.record()
    compilations.into = None
    timed["compiled"] = later
    for call in range(warmup + repeat):
        try:
            args, kwargs = _block(jax, _call_args(inputs_fn, entry))
            compilations.into = later
            t0 = time.perf_counter()
            _block(jax, fn(*args, **kwargs))
            seconds = time.perf_counter() - t0
        except (Exception, SystemExit) as exc:
            timed["failure"] = "call %d of %d (after the first) raised %s: %s" % (
                call + 1, warmup + repeat, type(exc).__name__, exc)
            return False
        finally:
            compilations.into = None
        if call >= warmup:
            timed["calls"].append(seconds)
    return True


if __name__ == "__main__":
    code = main(sys.argv)
    if code != EXIT_OK and _CONNECTED and _CONNECTED[0] != 0:
        # JAX's exit handler waits for every process to reach shutdown; a peer blocked in a
        # collective never does. The parent kills the peers, so leave now, flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
