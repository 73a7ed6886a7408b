"""``kmds-desktop doctor [--json] [--no-repair]``: diagnose the data folder, repair what is safe.

The same :func:`~kmds_desktop.app.doctor.diagnose_data_folder` as Help > Diagnose data folder in the
window: the embedded PostgreSQL (brought back when it is stuck and no app uses it), the indexes,
SQLite writes a kill or a full disk interrupted, free space, and where the logs are. Exit 0 when no
problem is left, 1 when one is (each is a line saying what to do), 2 for invalid settings.
"""

from __future__ import annotations

import argparse

from kmds_desktop.commands.common import end_progress, guarded, print_json, progress_line


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``doctor`` to the main parser."""
    p = sub.add_parser(
        "doctor",
        help="diagnose the data folder (database server, indexes, interrupted writes, free space)",
        description=(
            "Diagnose the data folder: whether the embedded PostgreSQL runs and answers (one left "
            "shutting down, recovering or with a stale pid file by an earlier session is brought back "
            "when no running KMDS Desktop uses it), the fast search and semantic indexes, SQLite "
            "journals a kill or a full disk left behind (finished by SQLite), free space, and where "
            "the logs are. Exit 0 when nothing is left to fix, 1 when something is."
        ),
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-repair", dest="repair", action="store_false",
                   help="only diagnose: leave the server and journals as they are")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=_doctor)


@guarded(interrupted="diagnosis interrupted")
def _doctor(args: argparse.Namespace) -> int:
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.app.doctor import diagnose_data_folder

    result = diagnose_data_folder(repair=args.repair, progress=progress_line(args.quiet or args.json))
    end_progress()
    if args.json:
        print_json(result.to_dict())
    else:
        print(result.to_text())
    return 0 if result.healthy else 1
