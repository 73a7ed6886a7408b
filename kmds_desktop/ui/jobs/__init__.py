"""The one Qt runner for background work (:mod:`.runner`): a Qt-free function from ``app/`` taking
``progress`` and ``cancel`` runs on a worker thread (:mod:`.worker`), relayed by a job (:mod:`.job`),
shown in the progress strip (:mod:`.progress_strip`).

Import from the modules themselves: this package re-exports nothing.
"""
