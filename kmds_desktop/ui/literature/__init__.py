"""The literature view: the search panel and its parts (question bar, review table, results), the
search history window, and the Qt models over the literature session (import each from its module)."""
