"""``rule-evaluator batch``'s arguments: the trials, the batch's own flags, and the flags every
job gets (the rules and their parameters, as a single run takes them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from evaluator.errors import ConfigurationError

__all__ = ["USAGE", "BatchRequest", "parse_request"]

USAGE = """\
usage: rule-evaluator batch TRIAL [TRIAL ...] --rule NAME [--param value ...] --output-dir DIR
                            [--trials-file FILE] [--jobs N] [--engine pool|ray]
                            [--ray-address ADDRESS] [--retry-errors]

Evaluate rules on many trials in parallel, each as a single `rule-evaluator` run writes it
(DIR/<trial name>/), and write one summary: a table here, DIR/batch_summary.csv,
DIR/batch_summary.json and DIR/index.html (linking each job's rule_report.html).

A TRIAL is a trial (a folder, file:// or s3://bucket/prefix holding smdebug's collections/ or
index/, or a TensorBoard run's event files), or a folder or prefix that holds trials (SageMaker's
<job>/debug-output, a folder of TensorBoard runs): each one job, named by its path there.
Every other flag (--rule, --config, rule parameters, --start-step, ...) is given to each job as
it is to a single run.

batch flags:
  --output-dir DIR       where each job's outputs and the summary go (required)
  --trials-file FILE     more trials, one per line (blank lines and # comments skipped)
  --jobs N               jobs at once (default: the number of CPUs; on Ray, the cluster's)
  --engine pool|ray      run the jobs here in a pool of processes (default), or as tasks of a
                         Ray cluster (pip install 'debugger-rule-evaluator[ray]')
  --ray-address ADDRESS  the Ray cluster (ray://host:10001, host:6379, auto); default: a local
                         one started for the batch
  --retry-errors         run again the jobs that ended in Error (exit 2); jobs that ended with a
                         verdict or a client error are kept, the others always run again

Exit code: the worst outcome of all jobs (stopped, then internal error, then client error,
then issues found, then no issues).
"""

_OWN_VALUES = ("output_dir", "trials_file", "jobs", "engine", "ray_address")
_OWN_SWITCHES = ("retry_errors",)
_FOR_EACH_JOB = ("base_trial", "trial_dir", "s3_path")


@dataclass(frozen=True)
class BatchRequest:
    """What the batch was asked to do."""

    trials: list[str]
    output_dir: str
    job_args: list[str]  # given to every job, after its --trial-dir and --output-dir
    jobs: int | None = None
    engine: str = "pool"
    ray_address: str | None = None
    retry_errors: bool = False
    trials_files: list[str] = field(default_factory=list)


def _flag_name(arg: str) -> str | None:
    """``--output-dir=x`` -> ``output_dir``; None for an argument that is not a flag."""
    if not arg.startswith("--") or arg == "--":
        return None
    return arg[2:].split("=", 1)[0].replace("-", "_")


def parse_request(argv: Sequence[str]) -> BatchRequest:
    """The request; a ``ConfigurationError`` saying what to fix for a bad one."""
    args = list(argv)
    trials: list[str] = []
    own: dict[str, list[str]] = {}
    passed: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name = _flag_name(arg)
        if name is None:
            if passed:  # a value of a job flag
                passed.append(arg)
            else:
                trials.append(arg)
            i += 1
            continue
        if name in _OWN_SWITCHES:
            own.setdefault(name, []).append("true")
            i += 1
            continue
        if name in _OWN_VALUES:
            if "=" in arg:
                value = arg.split("=", 1)[1]
                i += 1
            elif i + 1 < len(args):
                value = args[i + 1]
                i += 2
            else:
                raise ConfigurationError(f"{arg} needs a value")
            own.setdefault(name, []).append(value)
            continue
        if name in _FOR_EACH_JOB:
            raise ConfigurationError(
                f"{arg} is set by the batch for each job: give the trials as arguments "
                "(rule-evaluator batch TRIAL ... --rule NAME --output-dir DIR)"
            )
        passed.append(arg)
        i += 1
    for name, values in own.items():
        if len(values) > 1 and name != "trials_file":
            raise ConfigurationError(f"--{name.replace('_', '-')} is given twice")
    output = own.get("output_dir", [""])[0].strip()
    if not output:
        raise ConfigurationError(
            "--output-dir is required: the folder where each job's outputs (DIR/<trial name>/) "
            "and the batch summary go"
        )
    engine = own.get("engine", ["pool"])[0].strip().lower()
    if engine not in ("pool", "ray"):
        raise ConfigurationError(f"--engine must be pool or ray, got {engine!r}")
    jobs = _jobs(own.get("jobs", [None])[0])
    address = own.get("ray_address", [None])[0]
    if address is not None and engine != "ray":
        raise ConfigurationError("--ray-address is for --engine ray: add --engine ray")
    if not passed or not any(
        _flag_name(a) in ("rule", "rule_name", "rule_to_invoke", "config") for a in passed
    ):
        if not os.environ.get("rule_to_invoke") and not os.environ.get("RULE_TO_INVOKE"):
            raise ConfigurationError(
                "no rule to run: add --rule NAME (a built-in rule such as VanishingGradient, "
                "or A,B for several) or --config FILE"
            )
    return BatchRequest(
        trials=trials,
        output_dir=output,
        job_args=passed,
        jobs=jobs,
        engine=engine,
        ray_address=address.strip() if address else None,
        retry_errors="retry_errors" in own,
        trials_files=own.get("trials_file", []),
    )


def _jobs(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise ConfigurationError(f"--jobs must be a whole number of 1 or more, got {value!r}")
    return jobs
