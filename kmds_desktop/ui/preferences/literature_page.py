"""Preferences' Literature database page: the embedded database or an external PostgreSQL server."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QComboBox, QLineEdit, QWidget

from kmds_desktop.app.presentation import Settings
from kmds_desktop.ui.preferences.form import PreferencesPage


class LiteraturePage(PreferencesPage):
    """The ``literature`` section of the settings, and a connection string that can fill it.

    The connection string is not a setting (its password belongs in the OS keyring): the dialog
    reads it with :meth:`connection_string` for the app's save, which splits it, and shows the fields
    it filled with :meth:`show_conninfo`.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lit_mode = QComboBox()
        self.lit_mode.addItem("Embedded (a private PostgreSQL in the data folder)", "embedded")
        self.lit_mode.addItem("External PostgreSQL server", "external")
        self.add_row("literature.mode", "Database", self.lit_mode)
        self.lit_host = QLineEdit()
        self.add_row("literature.host", "Host", self.lit_host)
        self.lit_port = QLineEdit()
        self.add_row("literature.port", "Port", self.lit_port)
        self.lit_dbname = QLineEdit()
        self.add_row("literature.dbname", "Database name", self.lit_dbname)
        self.lit_user = QLineEdit()
        self.add_row("literature.user", "User", self.lit_user,
                     "The password is read from PGPASSWORD or the OS keyring.")
        self.lit_timeout = QLineEdit()
        self.add_row("literature.statement_timeout_ms", "Statement timeout (ms)", self.lit_timeout,
                     "0 = no limit")
        self.lit_max_rows = QLineEdit()
        self.add_row("literature.max_rows", "Documents per query", self.lit_max_rows,
                     "The best-ranked documents each query keeps (1–100,000); a query that matches more "
                     "says so.")
        self.lit_dsn = QLineEdit()
        self.lit_dsn.setPlaceholderText("postgresql://user@host:5432/dbname  or  host=… dbname=… user=…")
        self.add_row("literature.dsn", "Connection string", self.lit_dsn,
                     "Optional: fills host, port, database and user. A password in it goes to the OS "
                     "keyring.")
        self.lit_mode.currentIndexChanged.connect(self._update_enabled)

    def load(self, settings: Settings) -> None:
        lit = settings.literature
        self.lit_mode.setCurrentIndex(max(0, self.lit_mode.findData(lit.mode)))
        self.lit_host.setText(lit.host)
        self.lit_port.setText(str(lit.port))
        self.lit_dbname.setText(lit.dbname)
        self.lit_user.setText(lit.user)
        self.lit_timeout.setText(str(lit.statement_timeout_ms))
        self.lit_max_rows.setText(str(lit.max_rows))
        self._update_enabled()

    def apply(self, data: dict[str, Any]) -> None:
        data["literature"].update(
            {
                "mode": self.lit_mode.currentData(),
                "host": self.lit_host.text().strip(),
                "port": self.lit_port.text().strip(),
                "dbname": self.lit_dbname.text().strip(),
                "user": self.lit_user.text().strip(),
                "statement_timeout_ms": self.lit_timeout.text().strip(),
                "max_rows": self.lit_max_rows.text().strip(),
            }
        )

    def connection_string(self) -> str:
        """The connection string typed (empty: none); the app splits it when saving."""
        return self.lit_dsn.text()

    def show_conninfo(self, fields: dict[str, str]) -> None:
        """Show the external-server fields a connection string filled (the app split it)."""
        if not fields:
            return
        self.lit_mode.setCurrentIndex(self.lit_mode.findData("external"))
        for key, field in (
            ("host", self.lit_host),
            ("port", self.lit_port),
            ("dbname", self.lit_dbname),
            ("user", self.lit_user),
        ):
            if key in fields:
                field.setText(fields[key])

    def _update_enabled(self) -> None:
        external = self.lit_mode.currentData() == "external"
        for widget in (self.lit_host, self.lit_port, self.lit_dbname, self.lit_user, self.lit_dsn):
            widget.setEnabled(external)
