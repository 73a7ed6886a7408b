"""The literature panel's three parts on screen: the question bar, the review table, the results.

Each is a widget that lays out its controls and keeps its own columns fitted; none decides anything
about the search. The panel (:class:`~kmds_desktop.ui.literature.panel.LiteraturePanel`) connects
their buttons to the session and its jobs, and tells them what to show.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QStyle,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kmds_desktop.ui.literature.documents_model import DocumentsModel
from kmds_desktop.ui.literature.review_model import LiveQueryDelegate, ReviewModel
from kmds_desktop.ui.literature.widgets import DocumentDetail

#: The largest share of the documents table's width the "Found by" column takes after a run.
FOUND_BY_SHARE = 0.3
#: The share of the documents table's width the Title keeps when "Found by" is fitted (a narrow table).
TITLE_SHARE = 0.25
#: The review table's Error column: at least this wide, and as wide as its longest note up to
#: :data:`ERROR_SHARE` of the table (in Wide mode, a duplicate's whole "same as the query of …" note),
#: while the query keeps its room (see :meth:`ReviewSection.fit_columns`).
ERROR_MIN_WIDTH = 180
ERROR_SHARE = 0.34
#: The review table's Model column: as wide as its longest name, up to this share of the table.
MODEL_SHARE = 0.25
#: The least share of the review table's width the Query column keeps when the other columns'
#: texts would take more (the Model and Error columns give way, their texts are in their tooltips).
QUERY_MIN_SHARE = 0.35
#: The least width the Model and Error columns are narrowed to when they give way.
GIVE_WAY_MIN_WIDTH = 56

EMPTY_DATABASE_HINT = (
    "<h3>The literature database is empty</h3>"
    "<p>Fill it with <b>File &gt; Import literature</b>, or drop a MEDLINE/PubMed XML file "
    "(<code>.xml</code>, <code>.xml.gz</code>) or a JSONL file (one record per line) onto this panel. "
    "A folder such as the PubMed baseline: <b>File &gt; Import literature folder</b>, or drop the folder "
    "(a cancelled or interrupted import goes on where it stopped).</p>"
    "<p>Queries can be written and checked meanwhile; they match nothing until documents are imported.</p>"
)
NO_RESULTS_YET = "Run the ticked queries to see documents here."


class QuestionBar(QWidget):
    """The research question, Generate queries (Stop generating meanwhile), New search and Wide."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.question = QLineEdit()
        self.question.setObjectName("literatureQuestion")
        # Short enough to show whole beside the buttons at 1600 px; the example is in the tooltip.
        self.question.setPlaceholderText("Your research question")
        self.question.setToolTip("A research question, e.g. Does azithromycin help CF lung function?")
        self.generate_button = QPushButton("Generate queries")
        self.generate_button.setObjectName("generateQueries")
        self.generate_button.setToolTip("Ask each configured model, one after another, for search queries")
        self.new_search_button = QPushButton("New search")
        self.new_search_button.setObjectName("newSearch")
        self.new_search_button.setToolTip("Clear the question and every row to start another search (each "
                                          "run stays in the search history); asks before discarding "
                                          "edited or hand-written queries that have not run")
        self.wide_button = QToolButton()
        self.wide_button.setObjectName("literatureWide")
        self.wide_button.setText("Wide")
        self.wide_button.setCheckable(True)
        self.wide_button.setToolTip("Give the literature search the whole window width (click again to "
                                    "bring back the KB browser and the question panel)")
        top = QHBoxLayout(self)
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(QLabel("Question:"))
        top.addWidget(self.question, 1)
        top.addWidget(self.generate_button)
        top.addWidget(self.new_search_button)
        top.addWidget(self.wide_button)

    def show_generating(self, generating: bool) -> None:
        self.generate_button.setText("Stop generating" if generating else "Generate queries")


class ReviewSection(QWidget):
    """The review table of the session's rows and the buttons under it; keeps the Query column the
    widest, with the room the other columns' texts leave (:meth:`fit_columns`)."""

    #: Delete pressed in the table.
    remove_requested = Signal()

    def __init__(self, review: ReviewModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.review = review
        view = self.review_view = QTableView()
        view.setObjectName("reviewTable")
        view.setModel(review)
        view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        view.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked
            | QAbstractItemView.EditTrigger.EditKeyPressed
            | QAbstractItemView.EditTrigger.AnyKeyPressed
        )
        view.setWordWrap(False)
        view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # The query is checked while it is typed (0.4 s after the last key), not only on commit.
        view.setItemDelegateForColumn(ReviewModel.COL_QUERY, LiveQueryDelegate(view))
        header = view.horizontalHeader()
        # The query is what the user reads and edits: it takes the room that is left. The tick and
        # "#" columns fit their (short, fixed) contents; the others are fitted to their texts by
        # fit_columns when rows change or the table is resized. All fitted to their contents, a long
        # model name ("[hypothetical] qwen2.5-coder:1.5b") and the Error notes took the whole width
        # of the panel beside two others, and the query was squeezed to "Q…".
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for column in (ReviewModel.COL_INCLUDE, ReviewModel.COL_ATTEMPT):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ReviewModel.COL_QUERY, QHeaderView.ResizeMode.Stretch)
        self._column_fit = QTimer(self)
        self._column_fit.setSingleShot(True)
        self._column_fit.setInterval(0)
        self._column_fit.timeout.connect(self.fit_columns)
        for changed in (review.dataChanged, review.rowsInserted, review.rowsRemoved, review.modelReset):
            changed.connect(self._column_fit.start)
        header.setStretchLastSection(False)
        header.setMinimumSectionSize(28)
        view.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        view.viewport().installEventFilter(self)  # resized: the columns are refitted

        self.add_button = QPushButton("Add query")
        self.add_button.setObjectName("addQuery")
        self.add_button.setToolTip("Add a hand-written query and start editing it")
        self.semantic_button = QPushButton("Add semantic row")
        self.semantic_button.setObjectName("addSemantic")
        self.semantic_button.setToolTip("Add a row that searches by meaning: the question (editable) is "
                                        "compared with the document vectors ('literature embed')")
        self.embed_button = QPushButton("Embed documents")
        self.embed_button.setObjectName("embedDocuments")
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Remove the selected queries (Delete)")
        delete = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), view)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        delete.activated.connect(self.remove_requested.emit)
        self.all_button = QPushButton("Tick all")
        self.all_button.clicked.connect(lambda: review.set_all_included(True))
        self.none_button = QPushButton("Tick none")
        self.none_button.clicked.connect(lambda: review.set_all_included(False))
        self.run_button = QPushButton("Run selected")
        self.run_button.setObjectName("runSelected")
        self.run_button.setToolTip("Run exactly the ticked queries as shown")
        buttons = QHBoxLayout()
        for b in (self.add_button, self.semantic_button, self.remove_button, self.all_button,
                  self.none_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.embed_button)
        buttons.addWidget(self.run_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(view, 1)
        layout.addLayout(buttons)

    def selected_positions(self) -> list[int]:
        """The rows selected in the table (the current row when none is), in table order."""
        rows = {i.row() for i in self.review_view.selectionModel().selectedRows()}
        if not rows and self.review_view.currentIndex().isValid():
            rows = {self.review_view.currentIndex().row()}
        return sorted(rows)

    def edit_last_row(self) -> None:
        """Start editing the query of the last row (a hand-written row just added)."""
        index = self.review.index(self.review.rowCount() - 1, ReviewModel.COL_QUERY)
        self.review_view.setCurrentIndex(index)
        self.review_view.edit(index)

    #: The columns fit_columns sets (the tick and "#" columns fit their contents, the query stretches).
    FITTED = (ReviewModel.COL_MODEL, ReviewModel.COL_VALID, ReviewModel.COL_MATCHES,
              ReviewModel.COL_RETURNED, ReviewModel.COL_UNIQUE, ReviewModel.COL_ERROR)
    #: The columns that give way to the query (their whole texts are in their cells' tooltips).
    GIVE_WAY = (ReviewModel.COL_MODEL, ReviewModel.COL_ERROR)

    def column_widths(self) -> dict[int, int]:
        """The widths :meth:`fit_columns` gives the fitted columns at the table's width now.

        Each is as wide as its header and its longest text; the Model column at most
        :data:`MODEL_SHARE` of the table, the Error column its notes within :data:`ERROR_SHARE`
        (at least :data:`ERROR_MIN_WIDTH` when it has a note). Where that would leave the query less
        than :data:`QUERY_MIN_SHARE` of the table, or less than another column, the Model and Error
        columns give way: both are cut to one width, the largest that leaves the query its room, never
        under :data:`GIVE_WAY_MIN_WIDTH`. The widths come from the font's metrics of the few texts
        shown, not from asking the style for every cell.
        """
        view = self.review_view
        header = view.horizontalHeader()
        metrics = view.fontMetrics()
        room = view.viewport().width()
        margin = 2 * (view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1) + 4
        rows = range(self.review.rowCount())
        want: dict[int, int] = {}
        for column in self.FITTED:
            texts = (str(self.review.index(r, column).data() or "") for r in rows)
            need = max((metrics.horizontalAdvance(t) for t in texts if t), default=0)
            fit = max(header.sectionSizeHint(column), need + margin if need else 0)
            if column == ReviewModel.COL_MODEL:
                fit = min(fit, max(header.sectionSizeHint(column), int(room * MODEL_SHARE)))
            elif column == ReviewModel.COL_ERROR and need:
                fit = max(ERROR_MIN_WIDTH, min(fit, int(room * ERROR_SHARE)))
            want[column] = fit
        # The tick and "#" columns as Qt sizes them to their contents (it may not have yet).
        fixed = sum(max(header.sectionSizeHint(c), view.sizeHintForColumn(c))
                    for c in (ReviewModel.COL_INCLUDE, ReviewModel.COL_ATTEMPT))
        fixed += sum(w for c, w in want.items() if c not in self.GIVE_WAY)

        def fits(level: int) -> bool:
            widths = [min(want[c], level) for c in self.GIVE_WAY]
            query = room - fixed - sum(widths)
            others = [w for c, w in want.items() if c not in self.GIVE_WAY] + widths
            return query >= room * QUERY_MIN_SHARE and query > max(others, default=0)

        level = max(want[c] for c in self.GIVE_WAY)
        if not fits(level):
            low, high = GIVE_WAY_MIN_WIDTH, level  # the largest level that fits (or the least)
            while low < high:
                middle = (low + high + 1) // 2
                if fits(middle):
                    low = middle
                else:
                    high = middle - 1
            level = low
        for column in self.GIVE_WAY:
            floor = min(want[column], max(GIVE_WAY_MIN_WIDTH, header.sectionSizeHint(column)))
            want[column] = max(floor, min(want[column], level))
        return want

    def fit_columns(self) -> None:
        """Give the fitted columns :meth:`column_widths`; the Query column stretches into the rest."""
        view = self.review_view
        for column, width in self.column_widths().items():
            if view.columnWidth(column) != width:
                view.setColumnWidth(column, width)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if watched is self.review_view.viewport() and event.type() == QEvent.Type.Resize:
            self._column_fit.start()
        return super().eventFilter(watched, event)


class ResultsSection(QStackedWidget):
    """The run's documents (sortable, best first) with the selected one's detail, the results line
    and its buttons; or, while the database is empty, the first-run hint. Keeps "Found by" within
    :data:`FOUND_BY_SHARE` of the table so the Title is never squeezed to "…"."""

    #: An export was chosen in the Export menu: ``"csv"``, ``"ris"``, ``"bibtex"`` or ``"log"``.
    export_requested = Signal(str)

    def __init__(self, documents: DocumentsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.documents = documents
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(documents)
        self.proxy.setSortRole(DocumentsModel.SortRole)
        view = self.documents_view = QTableView()
        view.setObjectName("documentsTable")
        view.setModel(self.proxy)
        view.setSortingEnabled(True)
        # Best first: the merged rank order, until the user clicks another column's header.
        view.sortByColumn(DocumentsModel.COL_RANK, Qt.SortOrder.AscendingOrder)
        view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        view.setWordWrap(False)
        view.verticalHeader().setVisible(False)
        dh = view.horizontalHeader()
        dh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        dh.setSectionResizeMode(DocumentsModel.COL_RANK, QHeaderView.ResizeMode.ResizeToContents)
        dh.setSectionResizeMode(DocumentsModel.COL_TITLE, QHeaderView.ResizeMode.Stretch)
        view.selectionModel().currentRowChanged.connect(self._show_current_document)
        # "Found by" is sized for the width at the last run; when the table narrows (leaving Wide)
        # it is fitted again, or the stretched Title would be squeezed to "…" behind a scroll bar.
        self._found_by_need = 0
        view.viewport().installEventFilter(self)
        self.detail = DocumentDetail()

        self.results_label = QLabel(NO_RESULTS_YET)
        self.results_label.setWordWrap(True)
        # A push button sizes itself for its menu arrow; an instant-popup tool button drew the arrow
        # over its own text ("Export.").
        self.export_button = QPushButton("Export")
        menu = QMenu(self.export_button)
        menu.addAction("Documents as CSV", lambda: self.export_requested.emit("csv"))
        menu.addAction("Documents as RIS", lambda: self.export_requested.emit("ris"))
        menu.addAction("Documents as BibTeX", lambda: self.export_requested.emit("bibtex"))
        menu.addSeparator()
        menu.addAction("Search log as JSON", lambda: self.export_requested.emit("log"))
        self.export_button.setMenu(menu)
        self.history_button = QPushButton("Search history…")
        self.history_button.setToolTip("Every run is a numbered set: combine sets (#1 AND #2), check known "
                                       "papers, export the search report")
        self.screen_button = QPushButton("Screen these results…")
        self.screen_button.setToolTip("Screen the run's documents one at a time: include, exclude, maybe")
        results_bar = QHBoxLayout()
        results_bar.addWidget(self.results_label, 1)
        results_bar.addWidget(self.history_button)
        results_bar.addWidget(self.screen_button)
        results_bar.addWidget(self.export_button)

        docs_split = QSplitter(Qt.Orientation.Vertical)
        docs_split.addWidget(view)
        docs_split.addWidget(self.detail)
        docs_split.setStretchFactor(0, 3)
        docs_split.setStretchFactor(1, 2)
        self.results_page = QWidget()
        rp = QVBoxLayout(self.results_page)
        rp.setContentsMargins(0, 0, 0, 0)
        rp.addLayout(results_bar)
        rp.addWidget(docs_split, 1)

        self.empty_hint = QLabel(EMPTY_DATABASE_HINT)
        self.empty_hint.setObjectName("emptyDatabaseHint")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.addWidget(self.results_page)
        self.addWidget(self.empty_hint)

    def show_empty_hint(self, empty: bool) -> None:
        """The first-run hint instead of the documents (the database has none)."""
        self.setCurrentWidget(self.empty_hint if empty else self.results_page)

    def clear(self) -> None:
        """No documents, no detail, the results line as before the first run."""
        self.documents.set_documents([])
        self.detail.show_document(None)
        self.results_label.setText(NO_RESULTS_YET)

    def show_documents(self, documents: list[dict[str, Any]], summary: str) -> None:
        """A run's documents, best first, and the line that says where they came from."""
        # A model reset drops the selection without a signal: the detail would keep showing a
        # document of the previous search.
        self.detail.show_document(None)
        self.documents.set_documents(documents)
        self.documents_view.sortByColumn(DocumentsModel.COL_RANK, Qt.SortOrder.AscendingOrder)
        self.documents_view.resizeColumnToContents(DocumentsModel.COL_YEAR)
        self.documents_view.resizeColumnToContents(DocumentsModel.COL_SOURCE)  # "CF" took 100 px from titles
        self.fit_found_by()
        self.results_label.setText(summary)

    def _show_current_document(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            self.detail.show_document(None)
            return
        source = self.proxy.mapToSource(current)
        self.detail.show_document(self.documents.document(source.row()))

    def select_document(self, row: int) -> None:
        """Select the document in (proxy) row ``row`` and show its detail."""
        index = self.proxy.index(row, 0)
        self.documents_view.selectionModel().setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )

    def fit_found_by(self) -> None:
        """Give "Found by" the width its names need, up to :data:`FOUND_BY_SHARE` of the table (the
        title keeps the rest; the full list is in the tooltip and the document's detail)."""
        view = self.documents_view
        column = DocumentsModel.COL_FOUND_BY
        header = view.horizontalHeader()
        self._found_by_need = max(view.sizeHintForColumn(column), header.sectionSizeHint(column))
        self._refit_found_by()

    def _refit_found_by(self) -> None:
        """Keep "Found by" within its share of the table's current width (and the Title stretched)."""
        if not self._found_by_need:
            return
        view = self.documents_view
        header = view.horizontalHeader()
        width = view.viewport().width()
        others = sum(view.columnWidth(c) for c in range(self.documents.columnCount())
                     if c not in (DocumentsModel.COL_TITLE, DocumentsModel.COL_FOUND_BY))
        share = min(self._found_by_need, int(width * FOUND_BY_SHARE),
                    width - others - int(width * TITLE_SHARE))
        view.setColumnWidth(DocumentsModel.COL_FOUND_BY, max(header.minimumSectionSize(), share))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if watched is self.documents_view.viewport() and event.type() == QEvent.Type.Resize:
            self._refit_found_by()
        return super().eventFilter(watched, event)
