"""The ``watch`` subcommand's arguments: its own flags, and the flags every run gets (the rules
and their parameters, as a single run takes them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from evaluator.config.values import check_location
from evaluator.errors import ConfigurationError

__all__ = ["USAGE", "WatchRequest", "parse_request"]

USAGE = """\
usage: rule-evaluator watch ROOT --rule NAME [--param value ...] --output-dir DIR
                            [--poll-interval SECONDS] [--status-address HOST:PORT]
                            [--shard I/N] [--max-live N] [--webhook-url URL]
       rule-evaluator watch --mlflow-experiment NAME_OR_ID [--mlflow-tracking-uri URI]
                            --rule NAME [...] --output-dir DIR [the flags above]

Watch ROOT (a folder or s3://bucket/prefix) for training runs as they appear (TensorBoard runs,
smdebug trials), or an MLflow experiment for its runs, and evaluate each one live, as a single
`rule-evaluator` run in a process of its own: each run's result file and report go to
DIR/<run path under ROOT>/ (DIR/<experiment id>/<run id>/ for an MLflow run);
DIR/watch_status.json and DIR/index.html list every run. A run ends as a single run does
(training_job_end.ts, idle scans, or its MLflow status); a restart on the same DIR skips the
runs that ended and resumes the others.
Every other flag (--rule, --config, rule parameters, --webhook-url, ...) is given to each run.

watch flags:
  --output-dir DIR            where each run's outputs and the status go (required)
  --poll-interval SECONDS     seconds between looks at ROOT, and each run's poll interval
                              (default 1)
  --max-live N                runs evaluated at once (default 32); the others wait, listed
                              as Queued
  --runs-per-worker N         runs whose rules are all built-in share one evaluation process,
                              N runs each (default 50; 0: a process for each run)
  --status-address HOST:PORT  serve /healthz and /metrics (Prometheus) there, e.g.
                              127.0.0.1:9100 (default: no server)
  --webhook-url URL           POST every status change of every run there (as a single run
                              does); given to each run in its environment
  --shard I/N                 watch only the runs whose path hashes to I of N (0 <= I < N): one
                              shard per replica
  --mlflow-experiment NAME_OR_ID
                              watch this MLflow experiment's runs instead of a ROOT (its name,
                              or its id); each run is evaluated as runs:/<run id>
  --mlflow-tracking-uri URI   the experiment's tracking store (default: MLFLOW_TRACKING_URI);
                              given to each run in its environment

Exit code: 143 / 130 once stopped by SIGTERM / SIGINT; 2 for a bad request.
See docs/watch.md.
"""

_OWN_VALUES = (
    "output_dir", "poll_interval", "status_address", "shard", "webhook_url", "max_live",
    "mlflow_experiment", "mlflow_tracking_uri", "runs_per_worker",
)  # fmt: skip
DEFAULT_MAX_LIVE = 32  # 0.5 GB in processes of their own, 50 MB shared: docs/watch.md
DEFAULT_RUNS_PER_WORKER = 50  # runs of built-in rules sharing one evaluation process
_FOR_EACH_RUN = ("base_trial", "trial_dir", "s3_path")
_RULE_FLAGS = ("rule", "rule_name", "rule_to_invoke", "config")


@dataclass(frozen=True)
class WatchRequest:
    """What the watch was asked to do."""

    root: str | None  # None for an MLflow experiment
    output_dir: str
    run_args: tuple[str, ...]  # given to every run, after its --trial-dir and --output-dir
    poll_interval: float = 1.0
    status_address: tuple[str, int] | None = None
    shard: tuple[int, int] = (0, 1)
    max_live: int = DEFAULT_MAX_LIVE
    # given to each run in its environment (WEBHOOK_URL), never on its command line: a secret
    webhook_url: str | None = field(default=None, repr=False)
    experiment: str | None = None  # --mlflow-experiment: its name or id
    # the experiment's store, when given as a flag (else MLFLOW_TRACKING_URI): may hold a password
    tracking_uri: str | None = field(default=None, repr=False)
    runs_per_worker: int = DEFAULT_RUNS_PER_WORKER  # 0: every run in a process of its own


def _flag_name(arg: str) -> str | None:
    """``--output-dir=x`` -> ``output_dir``; None for an argument that is not a flag."""
    if not arg.startswith("--") or arg == "--":
        return None
    return arg[2:].split("=", 1)[0].replace("-", "_")


def _split(argv: Sequence[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """(positional arguments, the watch's own flags, the flags for every run)."""
    args = list(argv)
    positional: list[str] = []
    own: dict[str, str] = {}
    passed: list[str] = []
    i = 0
    while i < len(args):
        arg, name = args[i], _flag_name(args[i])
        i += 1
        if name is None:
            (passed if passed else positional).append(arg)
        elif name in _OWN_VALUES:
            if "=" in arg:
                value = arg.split("=", 1)[1]
            elif i < len(args):
                value, i = args[i], i + 1
            else:
                raise ConfigurationError(f"{arg} needs a value")
            if name in own:
                raise ConfigurationError(f"--{name.replace('_', '-')} is given twice")
            own[name] = value
        elif name in _FOR_EACH_RUN:
            raise ConfigurationError(
                f"{arg} is set by watch for each run: give the folder that holds the runs "
                "(rule-evaluator watch ROOT --rule NAME --output-dir DIR)"
            )
        else:
            passed.append(arg)
    return positional, own, passed


def parse_request(argv: Sequence[str]) -> WatchRequest:
    """The request; a ``ConfigurationError`` saying what to fix for a bad one."""
    positional, own, passed = _split(argv)
    experiment = _experiment(own, positional, passed)
    if experiment is None and len(positional) != 1:
        raise ConfigurationError(
            f"watch takes one ROOT (a folder or s3://bucket/prefix holding runs), got "
            f"{len(positional)}: rule-evaluator watch ROOT --rule NAME --output-dir DIR "
            "(or --mlflow-experiment NAME_OR_ID instead of ROOT)"
        )
    output = own.get("output_dir", "").strip()
    if not output:
        raise ConfigurationError(
            "--output-dir is required: the folder where each run's outputs "
            "(DIR/<run path>/) and watch_status.json go"
        )
    if not any(_flag_name(a) in _RULE_FLAGS for a in passed) and not (
        os.environ.get("rule_to_invoke") or os.environ.get("RULE_TO_INVOKE")
    ):
        raise ConfigurationError(
            "no rule to run: add --rule NAME (a built-in rule such as ExplodingTensor, "
            "or A,B for several) or --config FILE"
        )
    interval = _seconds(own.get("poll_interval"))
    if not any(_flag_name(a) == "checkpoint_interval" for a in passed):
        # Each run's result file is its resume point, rewritten (and synced) at most every
        # checkpoint_interval while steps come: once a second per run costs hundreds of
        # writes a second over a root of live runs. As often as the watch looks is enough.
        passed += ["--checkpoint-interval", repr(max(1.0, interval))]
    return WatchRequest(
        root=None if experiment is not None else _root(positional[0]),
        output_dir=output,
        run_args=(*passed, "--poll-interval", repr(interval)),
        poll_interval=interval,
        status_address=_address(own.get("status_address")),
        shard=_shard(own.get("shard")),
        webhook_url=_webhook(own.get("webhook_url")),
        max_live=_max_live(own.get("max_live")),
        experiment=experiment,
        tracking_uri=(own.get("mlflow_tracking_uri") or "").strip() or None,
        runs_per_worker=_runs_per_worker(own.get("runs_per_worker")),
    )


def _root(value: str) -> str:
    root = check_location("ROOT", value.strip())
    return root[len("file://") :] if root.startswith("file://") else root


def _experiment(own: dict[str, str], positional: list[str], passed: list[str]) -> str | None:
    """--mlflow-experiment's value; None without it (then a ROOT is watched)."""
    wanted = own.get("mlflow_experiment")
    if wanted is None:
        if "mlflow_tracking_uri" in own:
            raise ConfigurationError(
                "--mlflow-tracking-uri names the store of --mlflow-experiment: add "
                "--mlflow-experiment NAME_OR_ID, or leave it out to watch a ROOT"
            )
        if any(_flag_name(a) == "mlflow_write_back" for a in passed):
            raise ConfigurationError(
                "--mlflow-write-back writes each verdict to its MLflow run: it needs "
                "--mlflow-experiment NAME_OR_ID (the runs under a ROOT are no MLflow runs)"
            )
        return None
    if positional:
        raise ConfigurationError(
            f"watch takes a ROOT or --mlflow-experiment, not both (got ROOT {positional[0]!r} "
            f"and --mlflow-experiment {wanted!r}): give one"
        )
    if not wanted.strip():
        raise ConfigurationError(
            "--mlflow-experiment needs the experiment's name or id (MLflow's UI shows both)"
        )
    return wanted.strip()


def _seconds(value: str | None) -> float:
    if value is None:
        return 1.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0.05 <= seconds <= 3600:
        raise ConfigurationError(
            f"--poll-interval must be a number of seconds from 0.05 to 3600, got {value!r}"
        )
    return seconds


def _address(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, sep, port = value.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigurationError(
            f"--status-address must be HOST:PORT (127.0.0.1:9100, or 0.0.0.0:9100 to serve "
            f"other machines), got {value!r}"
        )
    return host, int(port)


def _shard(value: str | None) -> tuple[int, int]:
    if value is None:
        return 0, 1
    index, sep, count = value.strip().partition("/")
    if sep and index.isdigit() and count.isdigit() and int(index) < int(count):
        return int(index), int(count)
    raise ConfigurationError(
        f"--shard must be I/N with 0 <= I < N (0/3, 1/3 and 2/3 split the runs in three), "
        f"got {value!r}"
    )


def _max_live(value: str | None) -> int:
    if value is None:
        return DEFAULT_MAX_LIVE
    if not value.strip().isdigit() or int(value) < 1:
        raise ConfigurationError(
            f"--max-live must be a whole number of 1 or more (runs evaluated at once), "
            f"got {value!r}"
        )
    return int(value)


def _runs_per_worker(value: str | None) -> int:
    if value is None:
        return DEFAULT_RUNS_PER_WORKER
    if not value.strip().isdigit():
        raise ConfigurationError(
            f"--runs-per-worker must be a whole number (runs sharing one evaluation process; "
            f"0: a process for each run), got {value!r}"
        )
    return int(value)


def _webhook(value: str | None) -> str | None:
    from evaluator.sinks.webhook import check_webhook_url

    return None if value is None else check_webhook_url(value)
