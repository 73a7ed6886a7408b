"""The application layer: what a user does with KMDS Desktop, as plain Python both faces drive.

Each job has a *session* that holds its state and offers its operations; the window (``ui/``) renders
that state and forwards clicks, the CLI calls the same operations in sequence. Nothing here imports
Qt. Work that blocks (the database, an LLM) is a plain function taking ``progress=``/``cancel=`` that
the window runs on a worker and the CLI calls directly; the session's own methods are quick and are
called from one thread (the GUI thread or the CLI's main thread).

Modules:

- :mod:`kmds_desktop.app.literature` — a literature search: question, review rows with provenance,
  generation rounds, checks (which rows, when, stale answers), runs through
  :class:`~kmds_desktop.literature.queries.agent.QueryAgent`, merged documents in rank order and
  the search log. The parts it keeps live beside it, one job each: ``literature_rows`` (a review
  row), ``literature_rounds`` (a generation round), ``literature_checks`` (a row's check),
  ``literature_plan`` (a run's plan and record) and ``literature_run`` (the run sequence).
- :mod:`kmds_desktop.app.search_log` — the search log document (reproducible on any database).
- :mod:`kmds_desktop.app.run_facts` — what a run was: each row's kind, the embedding model, vector
  coverage, fusion and re-ranking (log, history, report, window), and whether to warn before a
  semantic row runs on a partly embedded database.
- :mod:`kmds_desktop.app.literature_data` — the literature database and files: importable files,
  open on first need (``DatabaseOnDemand``), status, import, export writers; the database is reached
  through :class:`~kmds_desktop.literature.store.facade.LiteratureStore`, whichever engine answers.
- :mod:`kmds_desktop.app.ask` — asking the open KB: the question, its answer, the history, what a
  change of KB does to the answer; ``answer_question`` (route, search, stream).
- :mod:`kmds_desktop.app.workspace` — the open KB: start-up rule, the demo KB as a copy, save rules,
  the unsaved-changes question, recent files, the recovery copy, dropped files; the semantic index
  opened once (``IndexHolder``) and following the open KB (``IndexFollower``, ``update_index``).
- :mod:`kmds_desktop.app.preferences` — the LLM status and model lists, decided as the ask job does.
- :mod:`kmds_desktop.app.messages` — one-line messages for users from exceptions (no class names).
- :mod:`kmds_desktop.app.strategy` — each run of a literature session recorded in the search history
  (numbered sets for set algebra, known-papers checks and the search report).
"""
