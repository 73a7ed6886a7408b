"""Asking the knowledge base: the panel (:mod:`.panel`) composed of the question box, the route editor,
the results and the answer's Markdown rendering, and the bar asking about a local LLM server found.

Import from the modules themselves: this package re-exports nothing.
"""
