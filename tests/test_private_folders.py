"""The app makes its own folders private (0700) and never tightens a folder it did not make: a store
placed in a shared folder such as /tmp must not take that folder away from the other users."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kmds_desktop.literature.fulltext.store import FulltextStore
from kmds_desktop.literature.screening.decisions import DecisionStore


@pytest.mark.parametrize("open_store", [FulltextStore, DecisionStore], ids=["fulltext", "screening"])
def test_a_store_in_a_shared_folder_leaves_the_folder_as_it_was(tmp_path: Path, open_store) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    store = open_store(shared / "store.sqlite3")
    store.close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


@pytest.mark.parametrize("open_store", [FulltextStore, DecisionStore], ids=["fulltext", "screening"])
def test_a_folder_the_store_makes_is_private(tmp_path: Path, open_store) -> None:
    made = tmp_path / "new" / "folder"
    store = open_store(made / "store.sqlite3")
    store.close()
    assert stat.S_IMODE(made.stat().st_mode) & 0o077 == 0 or os.name == "nt"
