"""The window's reviews: the File menu's review entries, their dialogs, and reopening where the user left
off (:class:`~kmds_desktop.ui.reviews.menu.ReviewMenu`, composed by the main window)."""

from kmds_desktop.ui.reviews.menu import ReviewMenu

__all__ = ["ReviewMenu"]
