"""``rule-evaluator report OUTPUT_DIR``: write the rule report again from what a run left in
its output folder (``rule_evaluation_result.json`` and ``rule_report_data.json``), and print
the report's path. Works on a finished run's folder, a live one's, or one copied from S3; and
on a batch's output folder (a folder of trials evaluated by ``rule-evaluator batch``: its
``batch_summary.json`` names each job's folder), each job's report, one path a line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from container.suggest import SuggestingParser
from evaluator.errors import ExitCode

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    parser = SuggestingParser(
        prog="rule-evaluator report",
        description=(
            "Write rule_report.html in OUTPUT_DIR from the run's rule_evaluation_result.json "
            "and rule_report_data.json, and print its path."
        ),
    )
    parser.add_argument(
        "output_dir", metavar="OUTPUT_DIR", help="a run's output folder, or a batch's"
    )
    args = parser.parse_args(list(argv))
    from evaluator.status.files import RESULT_FILE_NAME

    output = Path(args.output_dir)
    result_file = output / RESULT_FILE_NAME
    if not result_file.exists() and not result_file.is_symlink():
        jobs = _batch_jobs(output)
        if jobs is not None:
            return max((_report(job) for job in jobs), default=0)
        print(
            f"ClientError: no {RESULT_FILE_NAME} in {args.output_dir}: give the output folder "
            "of a run (--output-dir; /opt/ml/processing/output/rule on SageMaker) or of a "
            "batch",
            file=sys.stderr,
        )
        return ExitCode.CLIENT_ERROR
    return _report(output)


def _batch_jobs(output: Path) -> list[Path] | None:
    """Each job's folder that holds a result file, when ``output`` is a batch's output folder
    (its ``batch_summary.json``); None otherwise."""
    import json

    from evaluator.config.output_paths import SUMMARY_JSON, output_path
    from evaluator.errors import ConfigurationError
    from evaluator.fileio import read_capped
    from evaluator.status.files import RESULT_FILE_NAME

    try:
        document = json.loads(read_capped(output / SUMMARY_JSON, 64 * 1024 * 1024))
        names = [str(j["name"]) for j in document["jobs"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    found = []
    for name in names:
        try:
            folder = output_path(output, name)
        except ConfigurationError:
            continue  # not a name a batch gives: never a folder outside the output
        if (folder / RESULT_FILE_NAME).is_file():
            found.append(folder)
    return found


def _report(output: Path) -> int:
    """Write the report of one run's output folder and print its path; the exit code."""
    from evaluator.errors import ClientError
    from evaluator.report import DATA_FILE_NAME, write_report
    from evaluator.status.files import RESULT_FILE_NAME, read_result_file

    result_file = output / RESULT_FILE_NAME
    try:
        read_result_file(output)  # the checks a run makes: type, size, JSON
        path = write_report(result_file)
    except ClientError as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    except (OSError, ValueError) as e:
        print(f"ClientError: cannot write the report in {output}: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    except (TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        # A field of the wrong type in either file: the files are not ones a run wrote.
        print(
            f"ClientError: {result_file} or {DATA_FILE_NAME} beside it holds a field this "
            f"evaluator did not write ({type(e).__name__}: {str(e)[:200]}); rerun the "
            "evaluation, or give the output folder of an unmodified run",
            file=sys.stderr,
        )
        return ExitCode.CLIENT_ERROR
    print(path.absolute())
    return 0
