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
    from evaluator.report import write_report
    from evaluator.status.files import RESULT_FILE_NAME

    result_file = Path(args.output_dir) / RESULT_FILE_NAME
    if not result_file.is_file():
        print(
            f"ClientError: no {RESULT_FILE_NAME} in {args.output_dir}: give the output folder "
            "of a run (--output-dir; /opt/ml/processing/output/rule on SageMaker)",
            file=sys.stderr,
        )
        return ExitCode.CLIENT_ERROR
    try:
        path = write_report(result_file)
    except (OSError, ValueError) as e:
        print(f"ClientError: cannot write the report in {args.output_dir}: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    print(path.absolute())
    return 0
