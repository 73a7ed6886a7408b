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
