"""Real legacy training programs, original against migrated, end to end (issue 18's corpus).

    python benchmarks/real_programs.py [--only NAME ...] [--repeat 3] [--no-processes] [--noise] [--reuse]
                                       [--markdown FILE.md] [--programs-json FILE.json]

Each program of ``benchmarks/real_programs/`` is a driver: a ``main()`` that runs one public
training program with its modules whole, only data and configuration chosen (a tiny environment or
model, a few steps, fixed seeds), and returns its metrics and parameters. The programs come from
the legacy corpus (``benchmarks/corpus.py``: brax 0.0.16, evojax 0.2.17, jaxline 0.0.8, PyPI
releases) or, for code that is not on PyPI (the Hugging Face transformers Flax examples), from a
folder of its repository fetched by hand into ``$JAXMIGRATE_REALCODE`` (default
``~/.cache/jaxmigrate/realcode``) as ``<owner>__<name>/<path>/``, each file at the commit named in
``PROJECTS`` (and checked against its SHA-256). Where that folder is missing the script skips its
programs and prints one line: what to fetch, from which repository and commit, and where to put it.
For each project this script

1. copies the package (or the fetched folder) into ``~/.cache/jaxmigrate/real_programs/<project>/``
   twice, as ``old/`` and ``new/`` (never into the checkout);
2. lists the findings of ``jaxmigrate check --output-format json`` on the ORIGINAL tree, then runs
   ``python -m jaxmigrate check --fix --unsafe-fixes`` (this checkout's code) on ``new/`` only;
3. puts each driver beside both trees, as ``driver_<name>.py`` (the driver itself is not migrated);
4. runs ``jaxmigrate verify old/driver_x.py new/driver_x.py --entry main --devices 8 --timing``,
   the old side on the JAX the project ran on (a cached venv), the new side on JAX 0.10.2 (a venv
   with current flax/optax, built here; a project may name venvs of its own for both); a program
   that is multi-host (its modules ask ``jax.process_count``/``process_index`` and do not refuse
   several processes) also as ``--processes 2 --devices 1 --connect after-import`` (jax 0.4.30
   runs CPU collectives across processes with one device per process only);
5. where old and new differ, a noise run: how much does the ORIGINAL differ from itself across the
   two JAX versions? A third copy, ``safe/``, is fixed with the safe fixes only (``check --fix``,
   no ``--unsafe-fixes``: pmap kept, only what JAX 0.10 removed is renamed), run on the new side's
   venv against ``old/`` on the old side's, once, with the same devices or processes. For each leaf
   where new differs from old, the table gives the max abs error of new against old and of safe
   against old; new is "as the original differs from itself across JAX versions" where its error
   is at most ``NOISE_FACTOR`` (2) times the original's own. The noise run is made by default for
   the fetched projects' programs (a minute or two each), and for every program that differs with
   ``--noise`` (brax's ARS, which differs, takes minutes a side: the README explains its
   difference by hand).

It prints and writes (``--markdown``) one row per program: the pmap sites in the modules the
driver imports, how many the fix moved to the global view, to the exact ``jit(shard_map(vmap))``
rewrite, or kept as pmap (with the findings' reasons), whether old and new are equal (and where
they differ, against the original's own difference across JAX versions), and the compilations and
run time of ``main()`` (old / new); below it, the repository and commits of the fetched programs.
``--programs-json`` writes the pairs in the format of ``benchmarks/bench_migrated.py --programs``
(with ``new_python``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from corpus import legacy_corpus  # noqa: E402

DRIVERS = HERE / "real_programs"
WORK = Path(os.environ.get("JAXMIGRATE_REAL_PROGRAMS", "~/.cache/jaxmigrate/real_programs")).expanduser()
REALCODE = Path(os.environ.get("JAXMIGRATE_REALCODE", "~/.cache/jaxmigrate/realcode")).expanduser()
NOISE_FACTOR = 2.0  # new's error against old within this factor of the original's own: the same noise
VENVS = Path.home() / ".cache" / "jaxmigrate" / "venvs"

# The programs' own dependencies that are not JAX (brax's physics imports trimesh, its envs gym).
EXTRAS = ["trimesh", "gym", "dm-env", "ml_collections", "wrapt", "cma", "Pillow"]


@dataclass(frozen=True)
class Venv:
    """An interpreter: a venv made once (``pip install`` of ``requirements``) and cached."""

    name: str
    requirements: tuple[str, ...]
    base_python: str = sys.executable

    @property
    def python(self) -> Path:
        return VENVS / self.name / "bin" / "python"

    def ensure(self) -> Path:
        marker = VENVS / self.name / ".real-programs-ready"
        wanted = "\n".join(self.requirements)
        if marker.is_file() and marker.read_text() == wanted and self.python.exists():
            return self.python
        if not self.python.exists():
            _run([self.base_python, "-m", "venv", str(VENVS / self.name)])
        _run([str(self.python), "-m", "pip", "install", "--quiet", *self.requirements])
        marker.write_text(wanted)
        return self.python


# brax 0.0.16 (Nov 2022) predates every jaxlib this machine can install (the oldest is 0.4.13);
# the oldest runs it, and still has `jax.experimental.maps.Mesh` (its replay buffer imports it).
JAX_0_4_13 = Venv("jax-0.4.13+brax", ("jax==0.4.13", "jaxlib==0.4.13", "flax==0.7.0", "optax==0.1.7",
                                     "chex==0.1.82", "numpy<1.26", "scipy<1.12", "ml_dtypes==0.2.0",
                                     "orbax-checkpoint==0.2.7", "tensorstore<0.1.46", "absl-py", *EXTRAS))
# The venv the test suite uses for legacy code (jaxmigrate.runtime_checks.legacy_env), plus EXTRAS.
JAX_0_4_30 = Venv("jax-0.4.30+flax==0.8.5", ("jax[cpu]==0.4.30", "numpy<2", "ml_dtypes<0.5", "scipy<1.14",
                                             "flax==0.8.5", *EXTRAS))
JAX_0_10_2 = Venv("jax-0.10.2+flax", ("jax==0.10.2", "jaxlib==0.10.2", "flax", "optax", "chex", "absl-py",
                                      *EXTRAS))
# The Hugging Face Flax examples: a transformers that still has the Flax models (4.46; the drivers
# shim the two calls of the scripts and of its T5 that it or JAX 0.10 refuse) and the datasets they
# load text files with. Venvs of their own, so that the ones above keep their markers.
HF = ("transformers==4.46.3", "datasets<3", "huggingface_hub<0.26", "tqdm")
# pyarrow (datasets') of jax 0.4.30's day: later ones refuse NumPy 1 at import.
HF_JAX_0_4_30 = Venv("hf-jax-0.4.30+flax==0.8.5", ("jax[cpu]==0.4.30", "numpy<2", "ml_dtypes<0.5", "scipy<1.14",
                                                   "flax==0.8.5", "pyarrow<18", *HF))
HF_JAX_0_10_2 = Venv("hf-jax-0.10.2+flax", ("jax==0.10.2", "jaxlib==0.10.2", "flax", "optax", *HF))


@dataclass(frozen=True)
class Fetched:
    """A folder of a public repository that is not on PyPI, fetched by hand (never into the
    checkout) as ``$JAXMIGRATE_REALCODE/<owner>__<name>/<path>/``."""

    repo: str  # owner/name on GitHub
    path: str  # the folder in the repository
    files: tuple[tuple[str, str, str], ...]  # (file, commit it was fetched at, SHA-256 of its text)

    @property
    def folder(self) -> Path:
        return REALCODE / self.repo.replace("/", "__") / self.path

    def commits(self) -> str:
        return ", ".join(f"`{file}` at {commit}" for file, commit, _ in self.files)

    def missing(self) -> str:
        """'' where the folder holds every file as fetched; else what to fetch, from where, to where."""
        absent = [file for file, _, _ in self.files if not (self.folder / file).is_file()]
        changed = [file for file, _, digest in self.files if file not in absent and
                   hashlib.sha256((self.folder / file).read_bytes()).hexdigest() != digest]
        if not absent and not changed:
            return ""
        problem = "; ".join([f"{', '.join(absent)} missing"] * bool(absent) +
                            [f"{', '.join(changed)} another version"] * bool(changed))
        return (f"{problem}: fetch {self.commits()} from the GitHub repository {self.repo}, `{self.path}/`, "
                f"into {self.folder}/ (or set JAXMIGRATE_REALCODE)")


@dataclass(frozen=True)
class Project:
    name: str
    old: Venv
    new: Venv = JAX_0_10_2
    glob: str = ""  # the unpacked release in the corpus cache
    package: str = ""  # the package folder inside it ("" for a fetched folder: its files go in whole)
    fetched: Fetched | None = None  # a folder of a repository instead of a release of the corpus

    def source(self) -> Path:
        """The folder copied as old/<package> (and new/, safe/)."""
        if self.fetched:
            return self.fetched.folder
        [release] = sorted(legacy_corpus().glob(self.glob))
        return release / self.package

    def shown(self, module: str) -> str:
        """A module of the tree as the README names it: its path in the repository, if fetched."""
        return f"{self.fetched.path}/{module}" if self.fetched else module


PROJECTS = {
    "brax": Project("brax", JAX_0_4_13, glob="brax-0.0.16-*", package="brax"),
    "evojax": Project("evojax", JAX_0_4_30, glob="evojax-0.2.17-*", package="evojax"),
    "jaxline": Project("jaxline", JAX_0_4_30, glob="jaxline/jaxline-0.0.8", package="jaxline"),
    # Each file at the commit it was read at (the folder was not fetched at one commit).
    "hf_flax_examples": Project("hf_flax_examples", HF_JAX_0_4_30, HF_JAX_0_10_2, fetched=Fetched(
        "huggingface/transformers", "examples/flax/language-modeling", (
            ("run_clm_flax.py", "00e12e7c54598e50e7bef1540db3408f81916de1",
             "d4512f8a6c2afb12bf12135bd06713a0dbfec296403ae9844200cf3c3c4ec4b6"),
            ("run_mlm_flax.py", "00661e38a9e1393472adae9ac71f777b74ccdcde",
             "46843791ff8e7f4c5162bb776ab8868ada1cf79aa87ecb95a38d93cdf4c794a3"),
            ("run_t5_mlm_flax.py", "00661e38a9e1393472adae9ac71f777b74ccdcde",
             "111e339c28f96c1d501b5e39c36c31c8078cfaf47cf2a0395c5c9f2f26014dd6")))),
    # Another folder of the same repository, on the same venvs.
    "hf_flax_text_classification": Project(
        "hf_flax_text_classification", HF_JAX_0_4_30, HF_JAX_0_10_2, fetched=Fetched(
            "huggingface/transformers", "examples/flax/text-classification", (
                ("run_flax_glue.py", "02c067295c47e3021d0a8c3cb3d24c7aaaa8c4b1",
                 "7c1c8f1e557cd862bf2641de78555faaa2c911568247d1a78599e6abca781284"),))),
    "hf_flax_question_answering": Project(
        "hf_flax_question_answering", HF_JAX_0_4_30, HF_JAX_0_10_2, fetched=Fetched(
            "huggingface/transformers", "examples/flax/question-answering", (
                ("run_qa.py", "0055f834470c4662897181543b27d8cf8c50b9d6",
                 "d783c8d7143956c929822b543aadc2906b5699b2d0e97ec645c507544aef86b5"),
                ("utils_qa.py", "15ea02a2add1672acbeee158a9448720d6093de1",
                 "c757961cbc363d4f7f131a1a8844d0eddd96922a0398884ee134678da7352ac3")))),
    "hf_flax_token_classification": Project(
        "hf_flax_token_classification", HF_JAX_0_4_30, HF_JAX_0_10_2, fetched=Fetched(
            "huggingface/transformers", "examples/flax/token-classification", (
                ("run_flax_ner.py", "0055f834470c4662897181543b27d8cf8c50b9d6",
                 "2661c4087d428cae2ed971d136f64e298e5b70c7cbb8ebb22aaf79f94be2adf5"),))),
    # JAX's own pmap example with the `datasets.py` it imports (JAX and NumPy only; the driver
    # shims what JAX removed since, the same on both sides).
    "jax_examples": Project("jax_examples", JAX_0_4_30, JAX_0_10_2, fetched=Fetched(
        "jax-ml/jax", "examples", (
            ("spmd_mnist_classifier_fromscratch.py", "085f5173589959ab088640d5cc461ce7cfe6bf87",
             "039b2ee4dbef63c79c226373a9b2a7915d979aeecb05db42a6de354c25e8cf86"),
            ("datasets.py", "218107864d9abfd8c9ea0be78676082c02988975",
             "00825968593ed90e2bc7bf0b0e5fd61ba45aace7f9d250716ae40da0fdf48d06")))),
}


@dataclass(frozen=True)
class RealProgram:
    name: str  # the driver's module name in benchmarks/real_programs/
    project: str
    program: str  # the module the driver runs (a path in the project's tree)
    multi_host: bool  # the program supports several processes


# brax 0.0.16's PPO, APG and SAC ask jax.process_count() but cannot finish on a process other than
# 0 with any JAX: they bind `metrics` on process 0 only and return it (UnboundLocalError).
PROGRAMS = [
    RealProgram("brax_ppo", "brax", "brax/training/agents/ppo/train.py", False),
    RealProgram("brax_apg", "brax", "brax/training/agents/apg/train.py", False),
    RealProgram("brax_sac", "brax", "brax/training/agents/sac/train.py", False),
    RealProgram("brax_es", "brax", "brax/training/agents/es/train.py", False),  # raises with >1 process
    RealProgram("brax_ars", "brax", "brax/training/agents/ars/train.py", False),  # raises with >1 process
    RealProgram("evojax_cartpole", "evojax", "evojax/trainer.py", False),
    RealProgram("jaxline_regression", "jaxline", "jaxline/train.py", True),
    # The scripts save on process 0 only; the drivers return the process index elsewhere.
    RealProgram("hf_clm", "hf_flax_examples", "run_clm_flax.py", True),
    RealProgram("hf_t5_mlm", "hf_flax_examples", "run_t5_mlm_flax.py", True),
    RealProgram("hf_glue", "hf_flax_text_classification", "run_flax_glue.py", True),
    RealProgram("hf_qa", "hf_flax_question_answering", "run_qa.py", True),
    RealProgram("hf_ner", "hf_flax_token_classification", "run_flax_ner.py", True),
    # A script: the driver runs its `__main__` block with runpy (main() counts it among the modules).
    RealProgram("jax_spmd_mnist", "jax_examples", "spmd_mnist_classifier_fromscratch.py", False),
]


@dataclass
class Row:
    program: RealProgram
    modules: list[str] = field(default_factory=list)
    sites: Counter = field(default_factory=Counter)  # global / exact / kept
    reasons: dict = field(default_factory=dict)  # (path, line) of a pmap site -> its reasons
    runs: dict[str, dict] = field(default_factory=dict)  # "8 devices" / "2 processes" -> summary
    noise: dict[str, dict] = field(default_factory=dict)  # the same -> safe/ (new JAX) against old/


def _run(cmd) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(map(str, cmd[:5]))}` failed: {done.stderr.strip()[-800:]}")


def _jaxmigrate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "jaxmigrate", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)


def prepare(project: Project) -> tuple[Path, list[dict], str]:
    """old/ and new/ for one project; the original tree's findings; the fix's summary line."""
    base = WORK / project.name
    for side in ("old", "new"):
        _copy(project, base / side)
    found = _jaxmigrate("check", str(base / "old" / project.package), "--output-format", "json", "--no-cache",
                        "--exit-zero")
    findings = json.loads(found.stdout)
    fixed = _jaxmigrate("check", "--fix", "--unsafe-fixes", "--no-cache", "--exit-zero",
                        str(base / "new" / project.package))
    return base, findings, _last_lines(fixed)


def prepare_safe(project: Project, base: Path) -> str:
    """safe/: the original with the safe fixes only (pmap kept, what JAX 0.10 removed renamed), the
    program of the noise run; the fix's summary line."""
    _copy(project, base / "safe")
    fixed = _jaxmigrate("check", "--fix", "--no-cache", "--exit-zero", str(base / "safe" / project.package))
    return _last_lines(fixed)


def _copy(project: Project, side: Path) -> None:
    shutil.rmtree(side, ignore_errors=True)
    shutil.copytree(project.source(), side / project.package, ignore=shutil.ignore_patterns("__pycache__"))
    for path in side.rglob("*"):  # the corpus is unpacked read-only
        path.chmod(path.stat().st_mode | 0o200)


def _last_lines(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).strip().splitlines()[-2:])


# What several drivers share: modules of benchmarks/real_programs/ named `_*.py`, placed beside
# every driver under their own names (the drivers import them so) and, as the drivers, not counted
# among the program's modules.
SHARED = sorted(path.name for path in DRIVERS.glob("_*.py"))


def place_driver(program: RealProgram, base: Path, sides) -> None:
    for side in sides:
        shutil.copy(DRIVERS / f"{program.name}.py", base / side / f"driver_{program.name}.py")
        for name in SHARED:
            shutil.copy(DRIVERS / name, base / side / name)


def imported_modules(base: Path, program: RealProgram, python: Path) -> list[str]:
    """The files of the project's tree the driver imports (on the old side): the program's modules."""
    code = ("import sys, os; sys.path.insert(0, os.getcwd()); import driver_%s\n"
            "root = os.getcwd() + os.sep\n"
            "print('\\n'.join(sorted(os.path.relpath(m.__file__, root) for m in list(sys.modules.values())\n"
            "      if getattr(m, '__file__', None) and m.__file__.startswith(root) and 'driver_' not in m.__file__\n"
            "      and os.path.relpath(m.__file__, root) not in %r)))"
            % (program.name, SHARED))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=base / "old", env=env)
    if done.returncode != 0:
        return []
    return [line for line in done.stdout.splitlines() if line.endswith(".py")]


def classify(row: Row, findings: list[dict], base: Path) -> None:
    """Every `jax.pmap` site (JM101) in the program's modules: what the fix does with it, and why."""
    modules = {str(base / "old" / m) for m in row.modules}
    for finding in findings:
        if finding["code"] != "JM101" or finding["path"] not in modules:
            continue
        fix = (finding.get("fix") or {}).get("message", "")
        if fix.startswith("move the module's pmapped steps"):
            row.sites["global"] += 1
        elif fix:
            row.sites["exact"] += 1
        else:
            row.sites["kept"] += 1
        site = (str(Path(finding["path"]).relative_to(base / "old")), finding["line"])
        row.reasons[site] = [_kind(marker, finding["message"].split(marker, 1)[1].split(";")[0])
                             for marker in ("not rewritten: ", "global view not possible: ")
                             if marker in finding["message"]]


def _kind(marker: str, reason: str) -> str:
    """A reason without what names its site (line numbers, the names in backticks), so that the
    same kind of reason counts once over the sites that give it."""
    reason = re.sub(r"^line \d+: ", "", reason)
    reason = re.sub(r"argument (\d+) of `[^`]*` \(`[^`]*`\)", r"argument \1 of the step", reason)
    reason = re.sub(r"\(`(jax\.process_\w+)` at line \d+\)", r"(`\1`)", reason)
    return ("global view: " if marker.startswith("global") else "exact rewrite: ") + reason


def verify(base: Path, program: RealProgram, old: Path, new: Path, processes: int, args, against="new") -> dict:
    """old/ on the old venv against `against` (new/, or safe/ for the noise run) on the new one."""
    driver = f"driver_{program.name}.py"
    out = base / f"{'verify' if against == 'new' else 'noise'}_{program.name}_{processes}p.json"
    cmd = ["verify", str(base / "old" / driver), str(base / against / driver), "--entry", "main",
           "--old-python", str(old), "--new-python", str(new), "--timeout", str(args.timeout), "--json", str(out)]
    if against == "new":
        # The migrated side's replicated values are global arrays, pmap's had a device axis; safe/
        # keeps pmap as old/ does. The noise run is one call a side, untimed.
        cmd += ["--unreplicate", "old", "--timing", "--warmup", "0", "--repeat", str(args.repeat)]
    if processes > 1:
        # jax 0.4.30 runs CPU collectives across processes with one device per process only.
        cmd += ["--processes", str(processes), "--devices", "1", "--connect", "after-import"]
    else:
        cmd += ["--devices", "8"]
    if args.reuse and out.is_file():  # a report of an earlier run, re-tabled
        report = json.loads(out.read_text())
        return {"exit": report["exit_code"], "seconds": 0.0, "report": report, "stderr": "",
                "command": "python -m jaxmigrate " + " ".join(cmd)}
    start = time.monotonic()
    done = _jaxmigrate(*cmd)
    seconds = time.monotonic() - start
    report = json.loads(out.read_text()) if out.is_file() else {}
    return {"exit": done.returncode, "seconds": seconds, "report": report, "stderr": done.stderr[-2000:],
            "command": "python -m jaxmigrate " + " ".join(cmd)}


def summarise(run: dict) -> dict:
    """equal / differs / failed, compilations (first call + later calls) and the median time of
    main() (each call a whole training run, its compilations included), old / new."""
    report = run["report"]
    status = {0: "equal", 1: "differs", 2: "failed"}.get(run["exit"], f"exit {run['exit']}")
    entry = (report.get("entries") or [{}])[0]

    def compiles(side):
        t = (entry.get(side) or {}).get("timing")
        return f"{len(t['compilations'])}+{len(t['later_compilations'])}" if t else "-"

    def median(side):
        return ((entry.get(side) or {}).get("timing") or {}).get("median")

    if status == "failed":  # which side, and did the other one run
        ran = {side: (entry.get(side) or {}).get("status") == "ok" for side in ("old", "new")}
        status += " (" + ", ".join(f"{side} {'ran' if ok else 'failed'}" for side, ok in ran.items()) + ")"
    sides = report.get("sides") or {}
    jax = " / ".join((sides.get(side) or {}).get("jax_version") or "?" for side in ("old", "new"))
    return {"status": status, "jax": jax, "compiles": (compiles("old"), compiles("new")),
            "median": (median("old"), median("new")), "more": _compiled_more(entry),
            "failure": _failure_text(report, entry) if status != "equal" else ""}


def _compiled_more(entry: dict) -> str:
    """What the new side compiled more often than the old one, by name (pmap's compilations are
    named after the function on 0.4, `jit(_fun)` on 0.10, so a kept pmap shows as renamed)."""
    counts = {}
    for side, sign in (("new", 1), ("old", -1)):
        timing = (entry.get(side) or {}).get("timing") or {}
        for c in (timing.get("compilations") or []) + (timing.get("later_compilations") or []):
            counts[c["name"]] = counts.get(c["name"], 0) + sign
    more = sorted(((n, name) for name, n in counts.items() if n > 0), reverse=True)
    return ", ".join(f"{name} +{n}" for n, name in more[:6])


def _failure_text(report: dict, entry: dict) -> str:
    for where in ("old", "new"):
        failure = ((report.get("sides") or {}).get(where) or {}).get("failure") or \
            (entry.get(where) or {}).get("failure")
        if failure:
            return f"{where} side: {failure.get('kind')}: {_first_line(failure.get('message', ''))}"
    leaves = [leaf for leaf in entry.get("leaves") or [] if not leaf.get("equal")]
    if leaves:
        return "differs at " + ", ".join(f"{leaf['path']} ({leaf.get('reason') or 'max rel %.3g' % leaf['max_rel']})"
                                         for leaf in leaves[:4])
    return entry.get("status", "")


def _leaves(report: dict) -> list[dict]:
    """The compared leaves of main() on every process."""
    entry = (report.get("entries") or [{}])[0]
    return [leaf for process in entry.get("processes") or [entry] for leaf in process.get("leaves") or []]


def _max_abs(report: dict) -> dict[str, float]:
    """Each leaf's max abs error, the largest over the processes."""
    errors: dict[str, float] = {}
    for leaf in _leaves(report):
        if leaf.get("max_abs") is not None:
            errors[leaf["path"]] = max(errors.get(leaf["path"], 0.0), leaf["max_abs"])
    return errors


def against_noise(run: dict, noise: dict) -> dict:
    """For each leaf where new differs from old: new's max abs error against old and the original's
    own across the two JAX versions (safe/ against old/); within: every one at most NOISE_FACTOR
    times the original's own."""
    differing = sorted({leaf["path"] for leaf in _leaves(run["report"]) if not leaf.get("equal")})
    new, own = _max_abs(run["report"]), _max_abs(noise["report"])
    leaves = [(path, new.get(path), own.get(path)) for path in differing]
    ran = noise["exit"] in (0, 1)
    within = ran and bool(leaves) and all(n is not None and o and n <= NOISE_FACTOR * o for _, n, o in leaves)
    compared = len(((run["report"].get("entries") or [{}])[0]).get("leaves") or [])
    return {"leaves": leaves, "within": within, "ran": ran, "compared": compared,
            "failure": "" if ran else summarise(noise)["failure"]}


def _status(run: dict, noise: dict | None) -> str:
    """equal / differs / failed; where it differs and the noise run was made, against the original's
    own difference across JAX versions."""
    status = summarise(run)["status"]
    if status != "differs" or noise is None:
        return status
    c = against_noise(run, noise)
    if not c["ran"]:
        return f"{status} (noise run failed)"
    counted = f"{status} ({len(c['leaves'])} of {c['compared']} leaves)"
    if c["within"]:
        return f"{counted}, as the original differs from itself across JAX versions"
    return f"{counted}, beyond the original's own difference across JAX versions"


def _noise_lines(row: Row) -> list[str]:
    lines = []
    for where, noise in row.noise.items():
        c = against_noise(row.runs[where], noise)
        if not c["ran"]:
            lines.append(f"- {row.program.name} ({where}): the noise run failed: {c['failure']}")
            continue
        errors = "; ".join(f"`{path}` {_error(n)} / {_error(o)}" for path, n, o in c["leaves"])
        verdict = "within" if c["within"] else "NOT within"
        lines.append(f"- {row.program.name} ({where}), new vs old / original vs itself: {errors} "
                     f"({verdict} {NOISE_FACTOR:g}x)")
    return lines


def _error(value) -> str:
    return "-" if value is None else f"{value:.2g}"


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0][:400] if message.strip() else ""


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.2f} s"


def markdown(rows: list[Row]) -> str:
    lines = ["| program | runs | pmap sites (modules it imports) | global view / exact / kept pmap | JAX old / new | "
             "8 devices: old vs new | compilations old / new | main() old / new | 2 processes x 1 device |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        single = row.runs.get("8 devices")
        multi = row.runs.get("2 processes")
        s = summarise(single) if single else None
        m = summarise(multi) if multi else None
        sites = sum(row.sites.values())
        project = PROJECTS[row.program.project]
        lines.append("| {} | `{}` | {} | {} / {} / {} | {} | {} | {} | {} | {} |".format(
            row.program.name, project.shown(row.program.program), sites, row.sites["global"], row.sites["exact"],
            row.sites["kept"], s["jax"] if s else "", _status(single, row.noise.get("8 devices")) if s else "not run",
            " / ".join(s["compiles"]) if s else "", " / ".join(_seconds(v) for v in s["median"]) if s else "",
            _status(multi, row.noise.get("2 processes")) if m else "not run (one process only)"))
    fetched = {PROJECTS[row.program.project] for row in rows if PROJECTS[row.program.project].fetched}
    for project in sorted(fetched, key=lambda p: p.name):
        names = ", ".join(row.program.name for row in rows if row.program.project == project.name)
        lines += ["", f"{names}: not on PyPI, fetched from the GitHub repository {project.fetched.repo}, "
                  f"`{project.fetched.path}/`: {project.fetched.commits()}."]
    # The sites the fix moved to the global view give no reason; the others, why not.
    sites = {site: reasons for row in rows for site, reasons in row.reasons.items() if reasons}
    if sites:
        kinds = Counter(kind for reasons in sites.values() for kind in reasons)
        lines += ["", f"Why the {len(sites)} distinct pmap sites (some modules serve several programs) were not "
                  "rewritten, from the findings on the original trees (a site gives one reason for each path it "
                  "could take):", ""]
        lines += [f"- {n} x {kind}" for kind, n in kinds.most_common()]
    failures = [(row.program.name, where, summarise(run)["failure"]) for row in rows
                for where, run in row.runs.items() if summarise(run)["status"] != "equal"]
    if failures:
        lines += ["", "Failures and differences:", ""]
        lines += [f"- {name} ({where}): {text}" for name, where, text in failures]
    noise = [line for row in rows for line in _noise_lines(row)]
    if noise:
        lines += ["", "Where old and new differ, the original against itself across the two JAX versions (`safe/`: "
                  "the original with the safe fixes only, pmap kept, on the new side's JAX, against the original on "
                  "the old side's): max abs error of each leaf that differs:", ""]
        lines += noise
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="driver names (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls of main() per side")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-processes", action="store_true", help="skip the 2-process runs")
    parser.add_argument("--noise", action="store_true",
                        help="a noise run for every program that differs (default: the fetched programs' only)")
    parser.add_argument("--reuse", action="store_true",
                        help="table the verify reports of the last run instead of running them again")
    parser.add_argument("--markdown", type=Path, default=WORK / "real_programs.md")
    parser.add_argument("--programs-json", type=Path)
    args = parser.parse_args(argv)

    programs = runnable([p for p in PROGRAMS if not args.only or p.name in args.only])
    prepared: dict[str, tuple[Path, list[dict], str]] = {}
    safe: set[str] = set()  # the projects whose safe/ is made
    rows = []
    for program in programs:
        project = PROJECTS[program.project]
        old_python, new_python = project.old.ensure(), project.new.ensure()
        if project.name not in prepared:
            prepared[project.name] = prepare(project)
            print(f"{project.name}: fix: {prepared[project.name][2]}", flush=True)
        base, findings, _ = prepared[project.name]
        place_driver(program, base, ("old", "new"))
        # A script the driver runs rather than imports (runpy) is among the program's modules too.
        row = Row(program, sorted(set(imported_modules(base, program, old_python)) | {program.program}))
        classify(row, findings, base)
        runs = {"8 devices": 1}
        if program.multi_host and not args.no_processes:
            runs["2 processes"] = 2
        for where, processes in runs.items():
            row.runs[where] = verify(base, program, old_python, new_python, processes, args)
            if summarise(row.runs[where])["status"] == "differs" and (args.noise or project.fetched):
                if project.name not in safe:
                    print(f"{project.name}: safe fixes only (the noise run): {prepare_safe(project, base)}", flush=True)
                    safe.add(project.name)
                place_driver(program, base, ("safe",))
                row.noise[where] = verify(base, program, old_python, new_python, processes, args, against="safe")
        rows.append(row)
        for where, run in row.runs.items():
            s = summarise(run)
            print(f"{program.name} [{where}]: {_status(run, row.noise.get(where))} in {run['seconds']:.0f} s; "
                  f"compilations {s['compiles']}; main() {tuple(_seconds(v) for v in s['median'])} {s['failure']}",
                  flush=True)
        for line in _noise_lines(row):
            print(line, flush=True)
    table = markdown(rows)
    print(table)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(table)
    if args.programs_json:
        args.programs_json.write_text(json.dumps([
            {"name": f"real/{row.program.name}", "old": str(WORK / row.program.project / "old" /
                                                         f"driver_{row.program.name}.py"),
             "new": str(WORK / row.program.project / "new" / f"driver_{row.program.name}.py"),
             "old_python": str(PROJECTS[row.program.project].old.python),
             "new_python": str(PROJECTS[row.program.project].new.python)}
            for row in rows], indent=1))
    return 0


def runnable(programs: list[RealProgram]) -> list[RealProgram]:
    """The programs whose code is here: a fetched project whose folder is missing (or holds other
    versions of its files) is skipped, with one line saying what to fetch, from where, to where."""
    skipped: dict[str, list[str]] = {}
    for program in programs:
        fetched = PROJECTS[program.project].fetched
        if fetched and fetched.missing():
            skipped.setdefault(program.project, []).append(program.name)
    for project, names in skipped.items():
        print(f"skipped {', '.join(names)}: {PROJECTS[project].fetched.missing()}", flush=True)
    return [program for program in programs if program.project not in skipped]


if __name__ == "__main__":
    sys.exit(main())
