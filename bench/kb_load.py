"""Benchmark: ``load_kb`` on a 10,000-observation KMDS file against a plain rdflib parse of it.

rdflib's ``Graph().parse`` is the standard way to read RDF/XML in Python, so it is the yardstick:
``load_kb`` does more (safety pre-scan, owlready2 parse, typed records, ordering) and must still
take at most half of rdflib's time. Each side runs three times; the best time counts.
Run: ``.venv/bin/python bench/kb_load.py`` (the KB is written under ``bench/.data/``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N_OBSERVATIONS = 10_000
REPEATS = 3
TARGET = 0.5


def best_of(fn, repeats: int = REPEATS) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    import rdflib

    from kmds_desktop.kb import load_kb
    from kmds_desktop.kb.synthetic import write_synthetic_kb

    data_dir = ROOT / "bench" / ".data"
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"synthetic_{N_OBSERVATIONS}.xml"
    start = time.perf_counter()
    write_synthetic_kb(path, N_OBSERVATIONS, n_workflows=2, seed=0)
    print(f"wrote {path.name}: {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - start:.2f} s")

    t_load, kb = best_of(lambda: load_kb(path))
    assert len(kb.observations) == N_OBSERVATIONS, len(kb.observations)

    def rdflib_parse() -> rdflib.Graph:
        graph = rdflib.Graph()
        graph.parse(str(path), format="xml")
        return graph

    t_rdflib, graph = best_of(rdflib_parse)
    shape = f"{len(kb.observations)} observations, {len(kb.workflows)} workflows"
    print(f"load_kb:            {t_load:.3f} s ({shape})")
    print(f"rdflib Graph.parse: {t_rdflib:.3f} s ({len(graph)} triples)")
    ratio = t_load / t_rdflib
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"ratio load_kb/rdflib = {ratio:.3f} ({verdict} target <= {TARGET})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
