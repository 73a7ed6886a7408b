"""Full texts in: PDFs read page by page in a bounded child process, cleaned (ligatures, hyphenation,
running headers, the reference list), split into passages with page ranges, and kept with their
full-text index and vectors in the app's own SQLite store.

Modules: :mod:`.cleaning` (text repair, pure functions), :mod:`.identify` (DOI and title),
:mod:`.reader` (the child process and its bounds), :mod:`.passages` (splitting), :mod:`.store`
(the SQLite store), :mod:`.importer` (a folder in, incrementally by file hash), :mod:`.zotero` (a
Zotero library's attachments, read-only), :mod:`.records` (each PDF's literature record, and the
user's correction of it).
"""
