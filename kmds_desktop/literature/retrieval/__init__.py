"""Running and merging rows: reviewed rows run ID-only (query_run), semantic rows, fusion, re-ranking by
meaning, and evaluation."""
