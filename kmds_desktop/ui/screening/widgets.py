"""Pieces of the screening window: the record as highlighted HTML, the PRISMA flow drawing, the order bar.

Why separate from :mod:`kmds_desktop.ui.screening.window`: each piece renders one part of the session's
state and is tested on its own; the window only lays them out and forwards actions.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtSvgWidgets import QSvgWidget
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from kmds_desktop.app.screening import KEYS, REASON_KEYS
from kmds_desktop.app.screening_marks import row_terms

#: The keys the window forwards to :meth:`ScreeningSession.press` (Qt's spelling -> the session's):
#: I, E/X, M decide, U and Ctrl+Z undo, the arrows go back and forward, 1–9 only choose a reason.
SHORTCUTS = {
    **{k.upper(): k for k in KEYS if len(k) == 1},
    **{n: n for n in REASON_KEYS},
    "Ctrl+Z": "ctrl+z",
    "Left": "left",
    "Right": "right",
}
ORDERS = (("Active learning", "active"), ("Search rank", "rank"), ("Random", "random"),
          ("Model score (1–5)", "score"))
MARKS = {"include": "✓", "exclude": "✗", "maybe": "?"}
EXPORTS = (("RIS", "ris", ".ris"), ("BibTeX", "bibtex", ".bib"), ("CSV", "csv", ".csv"))

#: Highlight colours: a row's search terms, the user's include keywords, the user's exclude keywords.
ROW_COLOUR = "#dbe9ff"
INCLUDE_COLOUR = "#c8f0c8"
EXCLUDE_COLOUR = "#f8c8c8"


def terms_of_rows(found_by: Iterable[str]) -> list[str]:
    """The words of the rows that found a record, marked in it: never a filler word such as "the",
    "of", "and" (the rule is :func:`~kmds_desktop.app.screening_marks.row_terms`)."""
    return row_terms(found_by)


def split_keywords(text: str) -> list[str]:
    """The user's keywords as typed ("rat, mice; in vitro") -> ["rat", "mice", "in vitro"]."""
    return [k.strip().lower() for k in re.split(r"[,;\n]", text) if k.strip()]


def highlight(text: str, marks: Sequence[tuple[str, str]]) -> str:
    """``text`` as HTML with each (term, colour) marked; a term matches whole words from its start
    (``fibros`` marks "fibrosis"), the first mark listed wins where two overlap."""
    escaped_spans: list[tuple[int, int, str]] = []
    for term, colour in marks:
        pattern = re.compile(rf"\b{re.escape(term)}\w*", re.IGNORECASE)
        for m in pattern.finditer(text):
            if not any(s < m.end() and m.start() < e for s, e, _ in escaped_spans):
                escaped_spans.append((m.start(), m.end(), colour))
    escaped_spans.sort()
    out, pos = [], 0
    for start, end, colour in escaped_spans:
        out.append(html.escape(text[pos:start]))
        out.append(f'<span style="background-color:{colour}">{html.escape(text[start:end])}</span>')
        pos = end
    out.append(html.escape(text[pos:]))
    return "".join(out)


def record_html(
    record: Any,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    marks_on: bool = True,
) -> str:
    """One record as the screening view shows it: title, authors, year and journal, identifiers, the
    abstract, and the rows that found it. Exclude keywords are marked before include keywords and
    row terms: a red word is the one a reviewer must not miss."""
    marks: list[tuple[str, str]] = []
    if marks_on:
        marks = (
            [(k, EXCLUDE_COLOUR) for k in exclude]
            + [(k, INCLUDE_COLOUR) for k in include]
            + [(t, ROW_COLOUR) for t in terms_of_rows(record.found_by)]
        )
    authors = ", ".join(record.authors[:12]) + (" et al." if len(record.authors) > 12 else "")
    meta = " · ".join(str(x) for x in (record.year, record.journal) if x)
    ids = " · ".join(
        x for x in (f"DOI {record.doi}" if record.doi else "", f"PMID {record.pmid}" if record.pmid else "")
        if x
    )
    rows = "".join(f"<li>{html.escape(r)}</li>" for r in record.found_by)
    abstract = highlight(record.abstract, marks) if record.abstract else "<i>No abstract.</i>"
    return (
        f"<h2>{highlight(record.title or '(no title)', marks)}</h2>"
        f"<p>{html.escape(authors) or '<i>No authors listed.</i>'}</p>"
        f"<p><b>{html.escape(meta)}</b>{'<br>' + html.escape(ids) if ids else ''}</p>"
        f"<p style='line-height:140%'>{abstract}</p>"
        + (f"<p><b>Found by</b></p><ul>{rows}</ul>" if rows else "")
    )


class OrderBar(QWidget):
    """Where the order is chosen: the order, and whether the model scores (LLM 1–5, or the embedding
    similarity) feed the active-learning model. Both go straight to the session; a score orders the
    queue, it never decides a record."""

    SCORES_TIP = ("Each record's model score (Scores tab) becomes one more feature of the active-learning "
                  "model: it moves records up or down the queue, it never decides one")

    def __init__(self) -> None:
        super().__init__()
        self.session: Any = None
        self.combo = QComboBox()
        for text, value in ORDERS:
            self.combo.addItem(text, value)
        self.combo.setToolTip("Active learning: the model trained on your decisions picks the next "
                              "record; search rank: the search's order; random: unbiased; model score: "
                              "the records' 1–5 scores, best first")
        self.combo.activated.connect(self._order_chosen)
        self.scores_check = QCheckBox("Model scores in active learning")
        self.scores_check.toggled.connect(self._scores_toggled)
        #: Back to the check deciding, once the user ticked or unticked the box (else hidden).
        self.automatic_button = QPushButton("Let the check decide")
        self.automatic_button.setToolTip("Model scores feed the order only where they separate your "
                                         "includes from your excludes (the check under the order)")
        self.automatic_button.clicked.connect(self._automatic)
        #: Whether the scores mean something: a scorer left out because its scores do not separate the
        #: user's includes from excludes is named here, in one line (empty while no check can tell). The
        #: window places it on a line of its own under the order: a sentence squeezed beside the order
        #: wraps into a column.
        self.check_label = QLabel()
        self.check_label.setWordWrap(True)
        self.check_label.setVisible(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Order:"))
        layout.addWidget(self.combo)
        layout.addWidget(self.scores_check)
        layout.addWidget(self.automatic_button)

    def set_session(self, session: Any) -> None:
        self.session = session
        self.combo.setCurrentIndex(max(0, self.combo.findData(str(session.order.value))))
        self.render()

    def render(self) -> None:
        """The check box as the session has it, and what it does now (how many records are scored)."""
        session = self.session
        if session is None:
            return
        self.scores_check.blockSignals(True)
        self.scores_check.setChecked(session.scores_in_model)
        self.scores_check.blockSignals(False)
        self.scores_check.setEnabled(session.order.value == "active")  # it only moves that order
        self.scores_check.setToolTip(f"{self.SCORES_TIP}. Now: {session.scores_in_model_line()}.")
        self.automatic_button.setVisible(session.scores_choice is not None)
        line = session.score_check_line()
        self.check_label.setText(line)
        self.check_label.setVisible(bool(line))

    def _order_chosen(self, _index: int) -> None:
        if self.session is not None:
            self.session.set_order(str(self.combo.currentData()))
            self.render()

    def _scores_toggled(self, on: bool) -> None:
        if self.session is not None:
            self.session.set_scores_in_model(on)
            self.render()

    def _automatic(self) -> None:
        if self.session is not None:
            self.session.set_scores_in_model(None)
            self.render()


class FlowView(QSvgWidget):
    """The PRISMA 2020 flow diagram, drawn from the session's SVG with its proportions kept."""

    def __init__(self) -> None:
        super().__init__()
        self.svg = ""
        self.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setStyleSheet("background: white")

    def set_svg(self, svg: str) -> None:
        self.svg = svg
        self.load(QByteArray(svg.encode("utf-8")))
        self.renderer().setAspectRatioMode(Qt.AspectRatioMode.KeepAspectRatio)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(700, 700)

    def save_svg(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.svg, encoding="utf-8")
        return path

    def save_png(self, path: str | Path, scale: float = 2.0) -> Path:
        """The drawing at ``scale`` × its own size on white (a slide or a manuscript wants pixels)."""
        renderer = QSvgRenderer(QByteArray(self.svg.encode("utf-8")))
        size = renderer.defaultSize()
        image = QImage(
            max(1, round(size.width() * scale)),
            max(1, round(size.height() * scale)),
            QImage.Format.Format_ARGB32,
        )
        image.fill(QColor("white"))
        painter = QPainter(image)
        renderer.render(painter, QRectF(0, 0, image.width(), image.height()))
        painter.end()
        path = Path(path)
        if not image.save(str(path), "PNG"):
            raise OSError(f"cannot write {path}")
        return path
