"""The page view of the Evidence view: a cited page rendered by the application layer (pixels and the
cited text's rectangles), the text marked in translucent yellow, with the paper and page above it."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QGraphicsScene,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

HIGHLIGHT = QColor(255, 214, 0, 110)


class PageView(QWidget):
    """Shows one :class:`~kmds_desktop.app.evidence_pages.PageImage`; ``page_no`` and
    ``highlight_rects`` say what is shown (tests and the status read them). Previous / Next ask for
    the neighbouring page (``page_requested(paper_id, page_no)``): a cited sentence's context is often
    on the page before or after."""

    page_requested = Signal(int, int)

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
        self.page_count = 0
        self.previous_button = QPushButton("◀ Previous page")
        self.previous_button.setObjectName("evidencePreviousPage")
        self.next_button = QPushButton("Next page ▶")
        self.next_button.setObjectName("evidenceNextPage")
        for button, step in ((self.previous_button, -1), (self.next_button, 1)):
            button.setEnabled(False)
            button.clicked.connect(lambda _c=False, s=step: self.page_requested.emit(self.paper_id,
                                                                                      self.page_no + s))
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(self.title, 1)
        header.addWidget(self.previous_button)
        header.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(header)
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
        self.page_count = page.page_count
        self.previous_button.setEnabled(page.page_no > 1)
        self.next_button.setEnabled(page.page_no < page.page_count)
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
