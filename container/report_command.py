"""``rule-evaluator report OUTPUT_DIR``: write the rule report again from what a run left in
its output folder (``rule_evaluation_result.json`` and ``rule_report_data.json``), and print
the report's path. Works on a finished run's folder, a live one's, or one copied from S3."""

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
    parser.add_argument("output_dir", metavar="OUTPUT_DIR", help="a run's output folder")
    args = parser.parse_args(list(argv))
    from evaluator.errors import ClientError
    from evaluator.report import DATA_FILE_NAME, write_report
    from evaluator.status.files import RESULT_FILE_NAME, read_result_file

    result_file = Path(args.output_dir) / RESULT_FILE_NAME
    if not result_file.exists() and not result_file.is_symlink():
        print(
            f"ClientError: no {RESULT_FILE_NAME} in {args.output_dir}: give the output folder "
            "of a run (--output-dir; /opt/ml/processing/output/rule on SageMaker)",
            file=sys.stderr,
        )
        return ExitCode.CLIENT_ERROR
    try:
        read_result_file(Path(args.output_dir))  # the checks a run makes: type, size, JSON
        path = write_report(result_file)
    except ClientError as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    except (OSError, ValueError) as e:
        print(f"ClientError: cannot write the report in {args.output_dir}: {e}", file=sys.stderr)
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
