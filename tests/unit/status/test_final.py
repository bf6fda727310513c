"""The supervisor's last word (``evaluator.status.final``, ``container.last_word``): a result
file's verdict is taken only when it is a finished run consistent with its rules; a stop or a
time-out overrides whatever the file says; files are read and written without following links
or blocking on FIFOs."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from container.last_word import conclude
from evaluator.status.files import RESULT_FILE_NAME
from evaluator.status.final import confirm, verified_exit_code


def _document(status: str, code: int, rule_status: str, rule_code: int) -> dict[str, Any]:
    rule = {"rule": "R", "configuration_name": "R", "status": rule_status, "exit_code": rule_code}
    return {"version": 1, "status": status, "exit_code": code, "message": None, "rules": [rule]}


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    output, messages = tmp_path / "output", tmp_path / "messages"
    output.mkdir()
    messages.mkdir()
    (output / ".sagemaker-ignore").mkdir()
    result_fd = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    message_fd = os.open(messages, os.O_RDONLY | os.O_DIRECTORY)
    yield output, result_fd, message_fd
    os.close(result_fd)
    os.close(message_fd)


@pytest.mark.parametrize(
    ("document", "taken"),
    [
        (_document("NoIssuesFound", 0, "NoIssuesFound", 0), 0),
        (_document("IssuesFound", 1, "IssuesFound", 1), 1),
        (_document("Error", 2, "Error", 2), 2),
        (_document("IssuesFound", 1, "NoIssuesFound", 0), None),  # exit code not the rules'
        (_document("NoIssuesFound", 0, "InProgress", None), None),  # not finished
        (_document("Stopped", 143, "Stopped", 143), None),  # a stop the supervisor never got
        (_document("Error", 44, "Error", 44), None),
        ({**_document("NoIssuesFound", 0, "NoIssuesFound", 0), "exit_code": "0"}, None),
        ({**_document("NoIssuesFound", 0, "NoIssuesFound", 0), "exit_code": True}, None),
        ({**_document("NoIssuesFound", 0, "NoIssuesFound", 0), "rules": []}, None),
    ],
)
def test_only_a_consistent_finished_document_is_taken(
    document: dict[str, Any], taken: int | None
) -> None:
    """The exit code is taken when it and the status are the ones the rules give."""
    assert verified_exit_code(document)[0] == taken


def test_a_stop_overrides_a_finished_verdict(folders: tuple[Path, int, int]) -> None:
    """A stop received during the wrap-up, after the evaluation wrote NoIssuesFound: the run
    is Stopped (143), the rule keeps its verdict in the file, the message says Stopped."""
    output, result_fd, message_fd = folders
    path = output / RESULT_FILE_NAME
    path.write_text(json.dumps(_document("NoIssuesFound", 0, "NoIssuesFound", 0)))
    code = conclude(
        stops=[signal.SIGTERM],
        overrun=None,
        untrusted=True,
        verdict=None,
        said_done=True,
        result_fd=result_fd,
        message_fd=message_fd,
        wait_status=0,
    )
    assert code == 143
    document = json.loads(path.read_text())
    assert document["status"] == "Stopped" and document["exit_code"] == 143
    assert document["rules"][0]["status"] == "NoIssuesFound"
    assert (output.parent / "messages" / "message").read_text() == "Stopped"


def test_a_planted_link_as_result_file_is_replaced_not_followed(
    folders: tuple[Path, int, int], tmp_path: Path
) -> None:
    """The result file is a link to a file elsewhere: that file is neither read nor written;
    the run is an internal error and the link is replaced by the supervisor's file."""
    output, result_fd, message_fd = folders
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(_document("NoIssuesFound", 0, "NoIssuesFound", 0)))
    (output / RESULT_FILE_NAME).symlink_to(target)
    assert confirm(result_fd, message_fd)[0] is None
    code = conclude(
        stops=[],
        overrun=None,
        untrusted=True,
        verdict=None,
        said_done=True,
        result_fd=result_fd,
        message_fd=message_fd,
        wait_status=0,
    )
    assert code == 3
    assert json.loads(target.read_text())["status"] == "NoIssuesFound"
    assert not (output / RESULT_FILE_NAME).is_symlink()
    assert json.loads((output / RESULT_FILE_NAME).read_text())["exit_code"] == 3


def test_a_fifo_as_result_file_does_not_block(folders: tuple[Path, int, int]) -> None:
    """A FIFO where the result file goes is refused at once, not read."""
    output, result_fd, message_fd = folders
    os.mkfifo(output / RESULT_FILE_NAME)
    code, why = confirm(result_fd, message_fd)
    assert code is None and "FIFO" in why
