"""The ``rule-evaluator`` command.

``rule-evaluator summary PATH`` prints what a trial holds (steps per mode, workers, collections,
tensors with their step counts, whether training has ended).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from evaluator.errors import ClientError, SMDebugError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rule-evaluator", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    summary = sub.add_parser("summary", help="print a summary of a trial (local folder or s3://)")
    summary.add_argument("path", help="the training job's debug output: a folder or s3://bucket/prefix")
    summary.add_argument("--json", action="store_true", help="print JSON instead of text")
    summary.add_argument("--collection-wait-timeout", type=float, default=None, metavar="SECONDS",
                         help="how long to wait for collection files (default 600)")
    return parser


def _summary(args: argparse.Namespace) -> int:
    from evaluator.summary import format_summary, summarize
    from evaluator.trial import create_trial

    with create_trial(args.path, collection_wait_timeout=args.collection_wait_timeout) as trial:
        summary = summarize(trial)
    print(json.dumps(summary.to_dict(), indent=2) if args.json else format_summary(summary))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _summary(args)
    except (ClientError, SMDebugError) as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
