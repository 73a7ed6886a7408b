"""The page view of the Evidence view: a cited page rendered by the application layer (pixels and the
cited text's rectangles), the text marked in translucent yellow, with the paper and page above it."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QGraphicsScene, QGraphicsView, QLabel, QVBoxLayout, QWidget

HIGHLIGHT = QColor(255, 214, 0, 110)


class PageView(QWidget):
    """Shows one :class:`~kmds_desktop.app.evidence_pages.PageImage`; ``page_no`` and
    ``highlight_rects`` say what is shown (tests and the status read them)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.page_no = 0
        self.paper_id = 0
        self.highlight_rects: list[QRectF] = []
        self.title = QLabel("Click a passage or an answer's [n] to see its page here.")
        self.title.setObjectName("evidencePageTitle")
        self.title.setWordWrap(True)
        self.scene = QGraphicsScene(self)
        self.view = QGraphicsView(self.scene)
        self.view.setObjectName("evidencePageView")
        self.view.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        self.view.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.view, 1)

    def show_page(self, page: Any) -> None:
        """Draw ``page`` and its highlights, scrolled so the first highlight is in view."""
        image = QImage(page.pixels, page.width, page.height, page.stride, QImage.Format.Format_RGBX8888)
        self.scene.clear()
        self.scene.addPixmap(QPixmap.fromImage(image.copy()))  # copy: the bytes belong to the page
        self.scene.setSceneRect(0, 0, page.width, page.height)
        self.highlight_rects = [QRectF(*rect) for rect in page.highlights]
        for rect in self.highlight_rects:
            self.scene.addRect(rect, QPen(Qt.PenStyle.NoPen), QBrush(HIGHLIGHT))
        self.page_no = page.page_no
        self.paper_id = page.paper_id
        marked = "" if self.highlight_rects else " (the passage could not be located on the page's text)"
        self.title.setText(f"{page.label} \u2014 page {page.page_no} of {page.page_count}{marked}")
        self.title.setToolTip(page.label)
        self.view.resetTransform()
        width = max(1, self.view.viewport().width() - 4)
        if page.width > width:
            self.view.scale(width / page.width, width / page.width)
        if self.highlight_rects:
            self.view.centerOn(self.highlight_rects[0].center())
        else:
            self.view.centerOn(page.width / 2, 0)
