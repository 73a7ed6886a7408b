"""KB files under fault: special files, what a save would not keep, and saves killed with SIGKILL.

- ``kb show`` on a FIFO or ``/dev/zero`` used to hang or eat memory: now a one-line reason.
- A second definition of an IRI and finding sequences written as text are lost or changed by a
  save: the load says so in its notes (``kb show`` and the window show them).
- A save killed with ``kill -9`` (real processes, a bounded loop) never leaves a truncated KB, and
  the hidden temporary file it may leave is removed by the next save of that KB.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kmds_desktop.kb import KnowledgeBaseError, load_kb, save_kb
from kmds_desktop.kb.safety import read_kb_bytes
from kmds_desktop.kb.save_temp import create_locked_temp, remove_stale_temps, temp_pattern
from kmds_desktop.kb.synthetic import write_synthetic_kb

REPO = Path(__file__).resolve().parent.parent
KILLS = 16
XSD = "http://www.w3.org/2001/XMLSchema#"
OBS3 = '<owl:NamedIndividual rdf:about="#exploratoryobservation3">'
SEQ3 = f'<finding_sequence rdf:datatype="{XSD}integer">3</finding_sequence>'


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # the timeout only guards the test run against a hang (the bug being tested), it measures nothing
    return subprocess.run([sys.executable, "-m", "kmds_desktop", *args], capture_output=True, text=True,
                          env=env, timeout=120)


# --- special files ---------------------------------------------------------------------------------
def test_kb_show_on_a_fifo_says_it_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "kb.xml"
    os.mkfifo(fifo)
    result = _cli("kb", "show", str(fifo))
    assert result.returncode == 1
    assert "is not a regular file (it is a named pipe (FIFO))" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_kb_show_on_a_device_says_it_is_not_a_regular_file(device: str) -> None:
    result = _cli("kb", "show", device)
    assert result.returncode == 1 and "is not a regular file (it is a character device)" in result.stderr


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.xml"
    path.write_bytes(b"<" + b" " * 4096)
    with pytest.raises(KnowledgeBaseError) as info:
        read_kb_bytes(path, limit=1024)
    assert "too large (4,097 bytes; at most 1,024 are read)" in str(info.value)


# --- what a save would not keep ---------------------------------------------------------------------
@pytest.fixture()
def ml_source(kmds_data: Path) -> str:
    text = (kmds_data / "example_ml_kb_exp_workflow.xml").read_text()
    assert OBS3 in text and SEQ3 in text
    return text


def _kb_with(tmp_path: Path, text: str):
    path = tmp_path / "kb.xml"
    path.write_text(text)
    return path, load_kb(path)


def test_a_second_definition_of_an_iri_is_noted(tmp_path: Path, ml_source: str) -> None:
    second = (f'{OBS3}<rdf:type rdf:resource="#ExploratoryObservation"/>'
              f'<finding rdf:datatype="{XSD}string">A second definition</finding></owl:NamedIndividual>\n')
    path, kb = _kb_with(tmp_path, ml_source.replace(OBS3, second + OBS3, 1))
    [note] = [n for n in kb.notes if "defined more than once" in n]
    assert "exploratoryobservation3" in note and "finding" in note and "saving keeps only that one" in note
    shown = _cli("kb", "show", str(path))
    assert shown.returncode == 0 and "defined more than once" in shown.stdout


@pytest.mark.parametrize(
    ("literal", "expected", "seq"),
    [
        (f'<finding_sequence rdf:datatype="{XSD}string">3</finding_sequence>', "written as text", 3),
        ("<finding_sequence>3</finding_sequence>", "written as text", 3),
        ("<finding_sequence>third</finding_sequence>", "are not numbers (exploratoryobservation3: 'third')",
         None),
        # too large for the store: it loaded, then every save (and the recovery copy) raised
        ("<finding_sequence>99999999999999999999</finding_sequence>", "are not numbers", None),
        ("<finding_sequence>1e400</finding_sequence>", "are not numbers", None),
    ],
    ids=["xsd-string", "untyped", "not-a-number", "too-large", "overflowing-float"],
)
def test_finding_sequences_that_are_text_are_noted(tmp_path: Path, ml_source: str, literal: str,
                                                    expected: str, seq: int | None) -> None:
    path, kb = _kb_with(tmp_path, ml_source.replace(SEQ3, literal, 1))
    assert any(expected in n for n in kb.notes), kb.notes
    [obs] = [o for o in kb.observations if o.name == "exploratoryobservation3"]
    assert obs.finding_seq == seq
    assert expected in _cli("kb", "show", str(path)).stdout
    save_kb(kb)  # and the KB saves
    assert [o.finding_seq for o in load_kb(path).observations if o.name == "exploratoryobservation3"] == [seq]


def test_values_no_file_can_hold_are_refused_when_edited_and_odd_names_do_not_stop_new_entries(
        tmp_path: Path, ml_source: str) -> None:
    """A finding number beyond 64 bits is refused at the edit (a save raised OverflowError after it);
    a workflow name with a character XML cannot carry is refused (every save failed after it); an
    observation named with a superscript digit does not stop the next one being added."""
    odd = ml_source.replace('rdf:about="#exploratoryobservation3"',
                            'rdf:about="#exploratoryobservation\u00b2"')
    path, kb = _kb_with(tmp_path, odd)
    obs = kb.observations[0]
    with pytest.raises(KnowledgeBaseError, match="out of range"):
        kb.update_observation(obs.iri, finding_seq=10**19)
    with pytest.raises(KnowledgeBaseError, match="which an IRI cannot hold"):
        kb.add_workflow("cleaning\ufffe")
    added = kb.add_observation("exploratory", "A new finding.")
    save_kb(kb)
    assert added.iri in {o.iri for o in load_kb(path).observations}


@pytest.mark.parametrize("encoding", ["utf-7", "euc-jp"])
def test_an_encoding_the_xml_parser_cannot_read_is_a_clear_error(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "kb.owl"
    path.write_bytes(f'<?xml version="1.0" encoding="{encoding}"?><rdf:RDF '
                     'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>'.encode("ascii"))
    with pytest.raises(KnowledgeBaseError, match="encoding is not supported"):
        load_kb(path)


def test_a_clean_kb_has_no_such_notes(kmds_data: Path) -> None:
    kb = load_kb(kmds_data / "example_ml_kb_exp_workflow.xml")
    assert not [n for n in kb.notes if "more than once" in n or "finding sequence" in n]


# --- temporary files of interrupted saves ------------------------------------------------------------
def _temps(path: Path) -> list[Path]:
    pattern = temp_pattern(path.name)
    return [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)]


def test_a_temp_file_of_a_running_save_is_left_alone(tmp_path: Path) -> None:
    fd, lock_fd, temp = create_locked_temp(tmp_path, "kb.xml")
    os.close(fd)
    abandoned = tmp_path / ".kb.xml.abcd1234.tmp"
    abandoned.write_bytes(b"partial")
    other = tmp_path / ".other.xml.abcd1234.tmp"
    other.write_bytes(b"another KB's")
    try:
        assert remove_stale_temps(tmp_path, "kb.xml") == 1
        assert temp.exists() and not abandoned.exists() and other.exists()
    finally:
        os.close(lock_fd)
    assert remove_stale_temps(tmp_path, "kb.xml") == 1 and not temp.exists()


_SAVER = """
import sys
from kmds_desktop.kb import load_kb, save_kb
kb = load_kb(sys.argv[1])
first = kb.observations[0]
print("ready", flush=True)
n = 0
while True:
    n += 1
    kb.update_observation(first.iri, finding=f"edited {n} times")
    save_kb(kb)
"""


def test_kill_during_save_never_truncates_and_the_next_save_cleans_up(tmp_path: Path) -> None:
    path = write_synthetic_kb(tmp_path / "kb.xml", 1500)
    expected = len(load_kb(path))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(13)
    leaked_at_most = 0
    for _ in range(KILLS):
        saver = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE, env=env,
                                 text=True)
        assert saver.stdout is not None
        assert saver.stdout.readline().strip() == "ready"
        with contextlib.suppress(subprocess.TimeoutExpired):
            saver.wait(timeout=rng.uniform(0.05, 1.5))  # saving in a loop: never exits by itself
        saver.send_signal(signal.SIGKILL)
        saver.wait()
        saver.stdout.close()
        assert saver.returncode == -signal.SIGKILL
        assert len(load_kb(path)) == expected  # the KB is always a whole file, old or new
        leaked_at_most = max(leaked_at_most, len(_temps(path)))
    kb = load_kb(path)
    save_kb(kb)
    assert _temps(path) == []
    assert len(load_kb(path)) == expected
    print(f"{KILLS} kills, up to {leaked_at_most} temporary file(s) left before the next save, 0 after")
