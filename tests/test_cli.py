"""The top-level command line: subcommands, the optional KB file, and the data folder option."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kmds_desktop import cli


def test_kb_file_versus_command_names() -> None:
    parser = cli.build_parser()
    assert cli._split_kb_file(parser, ["kb", "show", "x.xml"]) == (["kb", "show", "x.xml"], None)
    assert cli._split_kb_file(parser, ["my.xml"]) == ([], "my.xml")
    assert cli._split_kb_file(parser, ["--data-dir", "kb", "my.xml"]) == (["--data-dir", "kb"], "my.xml")
    argv = ["-v", "literature", "status"]
    assert cli._split_kb_file(parser, argv) == (argv, None)


def test_help_lists_every_area() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kmds_desktop", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    for command in ("kb", "index", "ask", "literature", "--data-dir", "--self-test"):
        assert command in out.stdout


def test_data_dir_option_redirects_writes(tmp_path: Path, kmds_data: Path) -> None:
    home = tmp_path / "elsewhere"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kmds_desktop",
            "--data-dir",
            str(home),
            "kb",
            "show",
            str(kmds_data / "generated_by_kmds" / "noseq.xml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "wf_noseq" in out.stdout
    assert (home / "logs" / "kmds-desktop.log").exists()


def test_every_command_ends_its_errors_the_same_way(capsys) -> None:
    """commands/common.py: one line on stderr (below a progress line), exit 1 for the work, 2 for
    invalid options or settings, 130 for Ctrl+C; an unexpected error is not hidden."""
    import argparse

    import pytest

    from kmds_desktop.commands.common import guarded, progress_line
    from kmds_desktop.config import SettingsError
    from kmds_desktop.literature.errors import LiteratureError

    def raising(exc: BaseException):
        @guarded(interrupted="stopped; run it again to resume")
        def handler(args: argparse.Namespace) -> int:
            progress_line()(1, 2, "working")
            raise exc

        return handler(argparse.Namespace())

    assert raising(LiteratureError("the server is down")) == 1
    assert capsys.readouterr().err == "\rworking" + " " * 71 + "\nerror: the server is down\n"
    assert raising(SettingsError("query_generation.models: at least one model is required")) == 2
    assert capsys.readouterr().err.splitlines()[-1] == \
        "error: query_generation.models: at least one model is required"
    assert raising(KeyboardInterrupt()) == 130
    assert capsys.readouterr().err.endswith("\nstopped; run it again to resume\n")
    with pytest.raises(ZeroDivisionError):
        raising(ZeroDivisionError("a bug"))
