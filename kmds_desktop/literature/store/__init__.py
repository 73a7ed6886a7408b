"""The literature store: the embedded server, the (BMLibrarian-compatible) schema, import, vectors,
fetch, and the ranked full-text row with the term statistics it needs (PostgreSQL judges every query)."""
