"""Title/abstract screening: decisions and reasons, the active-learning order, stopping rules, the
PRISMA flow. The step after the search; the session that drives it is :mod:`kmds_desktop.app.screening`."""
