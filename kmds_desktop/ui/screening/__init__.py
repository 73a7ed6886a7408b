"""The screening window, in parts: the window (``window``), opening it on a search's documents
(``opening``), the decided list (``decided``), the Stopping and PRISMA flow pages (``stopping_flow``), the
Scores and Two screeners pages (``scores_agreement``) and the pieces they share (``widgets``). Import from
the module itself; this package re-exports nothing."""
