"""The public legacy corpus: real pmap-era JAX code, fetched once, never committed.

    python benchmarks/corpus.py [--cache DIR]      # fetch (if needed) and print the source folder

The exact releases below, each as its own `pip download --no-deps` archive into ``DIR/dl`` and
unpacked into ``DIR/src`` (a wheel into ``src/<wheel name>/``, an sdist into ``src/<project>/``).
What is already there is reused: nothing is downloaded twice. ``DIR`` defaults to
``$JAXMIGRATE_CORPUS`` or ``~/.cache/jaxmigrate/corpus``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

RELEASES = (
    ("trax", "1.4.1"),
    ("jaxline", "0.0.8"),
    ("paxml", "1.4.0"),
    ("praxis", "1.4.0"),
    ("evojax", "0.2.17"),
    ("flax", "0.6.4"),
    ("brax", "0.0.16"),
)


def default_cache() -> Path:
    return Path(os.environ.get("JAXMIGRATE_CORPUS", "~/.cache/jaxmigrate/corpus")).expanduser()


def legacy_corpus(cache: Path | None = None) -> Path:
    """The folder holding every release unpacked, fetched and unpacked where missing."""
    return fetched(RELEASES, cache or default_cache())


def fetched(releases, cache: Path, *, sources_only: bool = False) -> Path:
    """``cache/src``, holding each release of ``releases`` ((project, version) pairs) unpacked: each
    downloaded into ``cache/dl`` and unpacked where it is not there yet. ``sources_only`` takes the
    source archive (``--no-binary :all:``) where a wheel would otherwise be preferred."""
    downloads, src = cache / "dl", cache / "src"
    for project, version in releases:
        if _unpacked(src, project, version) is None:
            _unpack(_archive(downloads, project, version, sources_only), src, project)
            if _unpacked(src, project, version) is None:
                raise SystemExit(f"{project} {version}: unpacking gave no {project}-{version} folder in {src}")
    return src


def _stems(project: str, version: str) -> tuple[str, ...]:
    """How an archive of the release may be named: wheels spell the project with `_`, older source
    archives as it is (`dm-haiku-0.0.10.tar.gz`)."""
    return tuple(dict.fromkeys((f"{project.replace('-', '_')}-{version}", f"{project}-{version}")))


def _unpacked(src: Path, project: str, version: str) -> Path | None:
    for stem in _stems(project, version):
        for candidate in (*src.glob(f"{stem}-*"), src / project / stem):
            if candidate.is_dir():
                return candidate
    return None


def _archive(downloads: Path, project: str, version: str, sources_only: bool) -> Path:
    def found() -> list[Path]:
        stems = _stems(project, version)
        sdists = [downloads / f"{stem}.tar.gz" for stem in stems]
        wheels = [] if sources_only else [p for stem in stems for p in downloads.glob(f"{stem}-*.whl")]
        return sorted({p for p in (*sdists, *wheels) if p.is_file()})

    if not found():
        downloads.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", *(["--no-binary", ":all:"] * sources_only),
             "--dest", str(downloads), f"{project}=={version}"],
            check=True,
        )
    if not found():
        raise SystemExit(f"pip download gave no archive of {project} {version} in {downloads}")
    wheels = [p for p in found() if p.suffix == ".whl"]
    return (wheels or found())[0]


def _unpack(archive: Path, src: Path, project: str) -> None:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            wheel.extractall(src / archive.name[: -len(".whl")])
    else:
        with tarfile.open(archive) as sdist:
            sdist.extractall(src / project, filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="cache folder [default: ~/.cache/jaxmigrate/corpus]")
    args = parser.parse_args(argv)
    print(legacy_corpus(args.cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
