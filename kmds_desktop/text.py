"""Small wording helpers shared by every layer (the window, the CLI, the literature loaders).

It sits at the bottom of the import layers (see ``pyproject.toml``) and imports nothing of the
project, so the Qt-free core and the views word counts the same way: "1 record", never "1 records".
"""

from __future__ import annotations


def plural(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the noun that agrees with it: ``1 record``, ``2 records``, ``1,240 records``.

    ``many`` is for nouns whose plural is not ``one + "s"`` (``query`` / ``queries``).
    """
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
