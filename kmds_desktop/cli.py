"""Command-line entry point: ``kmds-desktop`` starts the app; subcommands run the same jobs headless.

Each area registers its own subcommands (``kb``, ``index``, ``ask``, ``literature``) from a small
``cli`` module that imports nothing heavy at import time, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

from kmds_desktop import __version__, paths
from kmds_desktop.commands.ask import register as register_ask
from kmds_desktop.commands.doctor import register as register_doctor
from kmds_desktop.commands.kb_evidence import register_kb_evidence
from kmds_desktop.commands.literature import register as register_literature
from kmds_desktop.commands.literature_fulltext import register_fulltext
from kmds_desktop.commands.literature_search import register_search
from kmds_desktop.commands.literature_verdict import register_verdicts
from kmds_desktop.index.cli import register as register_index
from kmds_desktop.kb.cli import register as register_kb


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kmds-desktop",
        description=(
            "KMDS Desktop: browse a KMDS knowledge base, ask it questions, and search a local "
            "literature database with queries proposed by several LLMs. With no command, the "
            "desktop application starts."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kmds-desktop {__version__}")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder for everything the app writes (default: $KMDS_DESKTOP_HOME or the user data dir)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="run an offscreen end-to-end check (demo KB, index, offline answer, database) and exit",
    )
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        description=(
            "With no command, the app starts; `kmds-desktop FILE` starts it with that knowledge base open."
        ),
    )

    register_kb_evidence(register_kb(sub))
    register_index(sub)
    register_ask(sub)
    literature_commands = register_literature(sub)
    register_search(literature_commands)
    register_fulltext(literature_commands)
    register_verdicts(literature_commands)
    register_doctor(sub)
    return parser


def _setup_logging(verbose: bool) -> None:
    """Log to a file in the data folder; to stderr only with --verbose (the GUI shows errors itself)."""
    handlers: list[logging.Handler] = []
    with contextlib.suppress(OSError):
        handlers.append(logging.FileHandler(paths.logs_dir() / "kmds-desktop.log", encoding="utf-8"))
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers or [logging.NullHandler()],
    )
    if not verbose:
        # httpx logs every request at INFO: each index write and LLM call would be a log line.
        logging.getLogger("httpx").setLevel(logging.WARNING)


def _split_kb_file(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], str | None]:
    """Pull an optional KB file (``kmds-desktop FILE``) out of ``argv`` when no command is given.

    argparse cannot mix an optional positional with subcommands (it would take ``kb`` in
    ``kmds-desktop kb show`` for the file), so the first bare word decides: a command name goes to
    the subparsers, anything else is the knowledge base to open.
    """
    commands: set[str] = set()
    for action in parser._actions:  # noqa: SLF001 - the documented way to list subcommands
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            commands.update(action.choices)
    takes_value = {"--data-dir"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            break
        if arg.startswith("-"):
            i += 2 if arg in takes_value else 1
            continue
        if arg in commands:
            return argv, None
        return argv[:i] + argv[i + 1 :], arg
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the app or one command; a reader that stops reading (``… | head``) ends it quietly.

    Why here, once: every command prints through ``sys.stdout``, and a pipe closed by its reader
    makes the next write (or the flush at exit) raise :class:`BrokenPipeError`; handled per command it
    would be missed by the next one. The output the reader wanted has been delivered, so the command
    exits 0 with no traceback and no "Exception ignored" line from the interpreter's last flush.
    """
    try:
        code = _main(argv)
        _flush_stdout()
    except BrokenPipeError:
        return _reader_gone()
    except SystemExit:  # argparse's --help / --version / usage errors exit; their output is flushed too
        try:
            _flush_stdout()
        except BrokenPipeError:
            _reader_gone()
        raise
    return code


def _flush_stdout() -> None:
    if sys.stdout is not None:  # None in a windowed build without a console
        sys.stdout.flush()


def _reader_gone() -> int:
    """Point stdout at the null device so nothing more (the interpreter's final flush included) can
    fail on the closed pipe; the command's work is done, so it exits 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor: nothing left to flush into
        pass
    return 0


def _main(argv: Sequence[str] | None) -> int:
    argv_list = list(sys.argv[1:] if argv is None else argv)
    paths.restrict_umask()  # files 0600, folders 0700: the data folder holds the user's work
    # why: start-up time: the window imports this module at start, that one only when needed
    from kmds_desktop.index.index_process import COMMAND

    if argv_list[:1] == [COMMAND]:  # internal: the app's index process (not in --help)
        # why: start-up time: the window imports this module at start, that one only when needed
        from kmds_desktop.index.index_process import serve

        return serve(argv_list[1:])
    # why: start-up time: the CLI imports this module at start, that one only when needed
    from kmds_desktop.literature.fulltext.reader import COMMAND as PDF_READER

    if argv_list[:1] == [PDF_READER]:  # internal: the bounded PDF reader of a frozen build
        # why: start-up time: the CLI imports this module at start, that one only when needed
        from kmds_desktop.literature.fulltext.reader import serve as serve_reader

        return serve_reader(argv_list[1:])
    parser = build_parser()
    argv_list, kb_file = _split_kb_file(parser, argv_list)
    args = parser.parse_args(argv_list)
    if args.data_dir:
        paths.set_data_dir(args.data_dir)
    if args.self_test:
        # Before logging is set up: the self-test logs into its own temporary data folder and must
        # not create anything in the user's real one.
        from kmds_desktop.selftest import run_self_test

        return run_self_test()
    _setup_logging(args.verbose)
    if args.command is None:
        from kmds_desktop.ui.shell.app import run_app  # why: Qt loads only with the window

        return run_app(kb_file=kb_file)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
