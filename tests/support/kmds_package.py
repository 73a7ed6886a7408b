"""The real ``kmds`` package (0.4.2, PyPI), installed in isolation, to read KB files the way KMDS does.

Why isolated: kmds 0.4.2 declares Python >= 3.12 and chromadb < 0.7, which conflict with the app's
environment, so it cannot be a dependency. The modules that load a KB (``kmds.utils.load_utils`` and
``kmds.ontology.kmds_ontology``) need only owlready2 (in the venv), importlib_resources and pandas,
so the wheel is installed with ``--no-deps --ignore-requires-python`` into a folder of its own beside
pandas (and pytz) for this interpreter, and run in a subprocess with ``PYTHONPATH`` set to it. Nothing
is stubbed: kmds's own ``load_kb`` and ``load_observations`` read the file.

The wheels are cached under ``~/.cache/kmds-desktop-test-models`` (as ``scripts/real_model.sh``
caches models); a missing cache is filled with ``pip download``, and a failure to fetch fails the test
loudly with the command to run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CACHE = Path.home() / ".cache" / "kmds-desktop-test-models" / "kmds-0.4.2"
WHEELS = CACHE / "wheels"
TARGET = CACHE / f"site-py{sys.version_info.major}{sys.version_info.minor}"
PANDAS = "pandas==2.2.3"

_READER = r"""
import json, sys
from kmds.utils.load_utils import load_kb, load_observations
onto = load_kb(sys.argv[1])
if onto is None:
    raise SystemExit("kmds could not load " + sys.argv[1])
frame = load_observations(onto)
rows = [{"obs_type": str(r["obs_type"]), "finding": str(r["finding"]),
         "finding_seq": None if r["finding_seq"] != r["finding_seq"] else int(r["finding_seq"])}
        for r in frame.to_dict("records")]
print(json.dumps(rows))
"""


def _pip(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(
            f"could not fetch the kmds 0.4.2 test dependency (pip {' '.join(args[:2])} failed):\n"
            f"{result.stderr[-1500:]}\nFetch it once with network access: {sys.executable} -m pip download "
            f"kmds==0.4.2 --no-deps --python-version 3.12 --only-binary=:all: -d {WHEELS}")


def ensure_kmds_package() -> Path:
    """The folder to put on ``PYTHONPATH`` to import kmds 0.4.2 (fetched and installed once)."""
    if (TARGET / "kmds" / "utils" / "load_utils.py").is_file() and (TARGET / "pandas").is_dir():
        return TARGET
    WHEELS.mkdir(parents=True, exist_ok=True)
    if not list(WHEELS.glob("kmds-0.4.2-*.whl")):
        _pip("download", "kmds==0.4.2", "--no-deps", "--python-version", "3.12", "--only-binary=:all:",
             "-d", str(WHEELS))
    if not list(WHEELS.glob("pandas-2.2.3-*.whl")) or not list(WHEELS.glob("pytz-*.whl")):
        _pip("download", PANDAS, "pytz", "--no-deps", "--only-binary=:all:", "-d", str(WHEELS))
    staging = TARGET.with_name(TARGET.name + ".partial")
    _pip("install", "--no-deps", "--ignore-requires-python", "--no-index", "--target", str(staging),
         *[str(w) for w in sorted(WHEELS.glob("*.whl"))])
    if TARGET.exists():
        import shutil

        shutil.rmtree(TARGET)
    staging.rename(TARGET)
    return TARGET


def read_with_kmds(kb_file: Path, site: Path, work: Path) -> list[dict]:
    """Every observation kmds 0.4.2 reads from ``kb_file``: ``obs_type``, ``finding``, ``finding_seq``.

    A fresh process per file: kmds keeps the loaded ontology in owlready2's default world. It logs to
    ``../../kmds.log`` relative to the working folder, so it runs two folders deep inside ``work``.
    """
    cwd = work / "kmds-run" / "a" / "b"
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", _READER, str(kb_file)], capture_output=True, text=True,
                            cwd=cwd, env=env, timeout=300)
    assert result.returncode == 0, f"kmds 0.4.2 could not read {kb_file}:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])
