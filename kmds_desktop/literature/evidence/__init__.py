"""Evidence from full texts: a question's best passages (hybrid search), extractive answers whose every
quote is checked against the cited page, and their Markdown export.

Modules: :mod:`.search` (hybrid passage search), :mod:`.quotes` (the one quote verifier every answer
path uses), :mod:`.answer` (offline extractive answers and Markdown).
"""
