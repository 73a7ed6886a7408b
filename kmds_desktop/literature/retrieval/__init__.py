"""Ranking and merging rows: semantic rows, fusion, re-ranking by meaning, and evaluation."""
