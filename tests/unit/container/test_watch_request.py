"""``rule-evaluator watch``'s arguments: its own flags, the flags every run gets, and a clear
ClientError for each thing to fix (container/watch/request.py)."""

from __future__ import annotations

import re

import pytest

from container.watch.request import parse_request
from evaluator.errors import ConfigurationError


def test_own_flags_are_taken_and_the_rest_goes_to_every_run(tmp_path: object) -> None:
    """--output-dir, --poll-interval, --status-address, --shard and --webhook-url are the
    watch's; the rule and its parameters are passed on, with the poll interval."""
    request = parse_request(
        ["./runs", "--rule", "ExplodingTensor", "--only_nan", "true", "--output-dir=out",
         "--poll-interval", "2.5", "--status-address", "127.0.0.1:9100", "--shard", "1/3", "--max-live", "4",
         "--webhook-url", "https://hooks.example.com/T0/B0/secret"]
    )  # fmt: skip
    assert request.root == "./runs" and request.output_dir == "out"
    assert request.run_args == ("--rule", "ExplodingTensor", "--only_nan", "true",
                                "--checkpoint-interval", "2.5", "--poll-interval", "2.5")  # fmt: skip
    assert request.poll_interval == 2.5
    assert request.status_address == ("127.0.0.1", 9100)
    assert request.shard == (1, 3) and request.max_live == 4
    assert request.webhook_url == "https://hooks.example.com/T0/B0/secret"
    assert "secret" not in repr(request)  # the URL's path is its key


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rule", "X", "--output-dir", "o"], "one ROOT"),
        (["a", "b", "--rule", "X", "--output-dir", "o"], "one ROOT"),
        (["./runs", "--rule", "X"], "--output-dir is required"),
        (["./runs", "--output-dir", "o"], "no rule to run"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--trial-dir", "t"], "set by watch"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--shard", "3/3"], "--shard must be I/N"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--shard", "x"], "--shard must be I/N"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--poll-interval", "0"], "--poll-interval"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--status-address", "9100"], "HOST:PORT"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--webhook-url", "ftp://h/x"], "http"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--output-dir", "p"], "given twice"),
        (["./runs", "--rule", "X", "--output-dir", "o", "--max-live", "0"], "--max-live must"),
        (["./runs", "--rule", "X", "--output-dir"], "needs a value"),
        (
            ["./runs", "--rule", "X", "--output-dir", "o", "--runs-per-worker", "-1"],
            "--runs-per-worker must",
        ),
        (
            ["./runs", "--rule", "X", "--output-dir", "o", "--runs-per-worker", "many"],
            "--runs-per-worker must",
        ),
    ],
)
def test_a_bad_request_says_what_to_fix(
    argv: list[str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each mistake is a ConfigurationError naming the flag and what it takes."""
    monkeypatch.delenv("rule_to_invoke", raising=False)
    monkeypatch.delenv("RULE_TO_INVOKE", raising=False)
    with pytest.raises(ConfigurationError, match=said.replace("/", ".")):
        parse_request(argv)


def test_runs_share_a_worker_of_50_unless_told_otherwise() -> None:
    """--runs-per-worker is the watch's own (never given to a run): 50 by default, 0 for a
    process per run."""
    assert parse_request(["./runs", "--rule", "X", "--output-dir", "o"]).runs_per_worker == 50
    request = parse_request(
        ["./runs", "--rule", "X", "--output-dir", "o", "--runs-per-worker", "0"]
    )
    assert request.runs_per_worker == 0 and "--runs-per-worker" not in request.run_args


def test_a_file_uri_root_is_its_folder() -> None:
    """ROOT given as file:///path is watched as the folder /path."""
    request = parse_request(["file:///data/runs", "--rule", "X", "--output-dir", "o"])
    assert request.root == "/data/runs"


def test_help_and_a_bad_request_through_the_command(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    """``watch --help`` prints the usage and exits 0; a bad request exits 2 with one
    ClientError line; a ROOT that is not a folder is one too."""
    import io

    from container.watch import main

    out = io.StringIO()
    assert main(["--help"], out=out) == 0 and "--status-address" in out.getvalue()
    assert main(["./runs", "--output-dir", "o", "--rule", "X", "--shard", "2/2"]) == 2
    assert capsys.readouterr().err.startswith("ClientError: --shard must be I/N")
    assert main([f"{tmp_path}/missing", "--output-dir", f"{tmp_path}/o", "--rule", "X"]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_an_mlflow_experiment_is_watched_instead_of_a_root() -> None:
    """--mlflow-experiment takes the place of ROOT; it and --mlflow-tracking-uri are the
    watch's own (the store never reaches a run's command line), --mlflow-write-back goes on."""
    request = parse_request(
        ["--mlflow-experiment", "team runs", "--mlflow-tracking-uri", "http://u:pw@host:5000",
         "--rule", "Overfit", "--mlflow-write-back", "true", "--output-dir", "out"]
    )  # fmt: skip
    assert request.root is None and request.experiment == "team runs"
    assert request.tracking_uri == "http://u:pw@host:5000" and "pw" not in repr(request)
    assert request.run_args == ("--rule", "Overfit", "--mlflow-write-back", "true",
                                "--checkpoint-interval", "1.0", "--poll-interval", "1.0")  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["./runs", "--mlflow-experiment", "e"], "a ROOT or --mlflow-experiment, not both"),
        (["--mlflow-experiment", " "], "needs the experiment's name or id"),
        (["./runs", "--mlflow-tracking-uri", "sqlite:///m.db"], "add --mlflow-experiment"),
        (["./runs", "--mlflow-write-back", "true"], "--mlflow-write-back writes each verdict"),
    ],
)
def test_a_bad_mlflow_request_says_what_to_fix(argv: list[str], said: str) -> None:
    """A ROOT with an experiment, an empty experiment, a store or write-back without an
    experiment: a ConfigurationError saying which to give."""
    with pytest.raises(ConfigurationError, match=re.escape(said)):
        parse_request([*argv, "--rule", "X", "--output-dir", "o"])


def test_an_experiment_without_a_store_is_a_client_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """--mlflow-experiment with neither --mlflow-tracking-uri nor MLFLOW_TRACKING_URI exits 2
    naming both ways to give the store."""
    from container.watch import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("EVALUATOR_MLFLOW_TRACKING_URI", raising=False)
    code = main(["--mlflow-experiment", "e", "--rule", "X", "--output-dir", f"{tmp_path}/o"])
    assert code == 2
    assert "--mlflow-tracking-uri URI or the MLFLOW_TRACKING_URI" in capsys.readouterr().err


def test_runs_rewrite_their_result_file_as_often_as_the_watch_looks() -> None:
    """Each run's result file (its resume point) is rewritten at most every poll interval
    while steps come (a second at the least), unless --checkpoint-interval is given."""
    request = parse_request(
        ["./runs", "--rule", "Overfit", "--output-dir", "o", "--poll-interval", "10"]
    )
    assert request.run_args[-4:] == ("--checkpoint-interval", "10.0", "--poll-interval", "10.0")
    request = parse_request(
        ["./runs", "--rule", "Overfit", "--output-dir", "o", "--poll-interval", "0.5"]
    )
    assert ("--checkpoint-interval", "1.0") == request.run_args[-4:-2]
    given = ["./runs", "--rule", "Overfit", "--output-dir", "o", "--checkpoint_interval=3"]
    request = parse_request(given)
    assert request.run_args == (
        "--rule",
        "Overfit",
        "--checkpoint_interval=3",
        "--poll-interval",
        "1.0",
    )
