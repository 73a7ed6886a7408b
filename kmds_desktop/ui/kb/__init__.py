"""The knowledge base's views: the browser (:mod:`.browser`) with its tree model and observation editor,
and the window's KB part (:mod:`.kb_part`: open, save, the unsaved-changes question, the index).

Import from the modules themselves: this package re-exports nothing.
"""
