"""Our Trial/Tensor answers equal smdebug 1.0.34's on every trial the real smdebug wrote.

Every field of every ``golden/*.query.json`` is compared. A difference is accepted only when it
is one of the deliberate fixes of docs/compatibility.md, and then our answer for that case is
checked against an independent computation. Anything else fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evaluator.trial import create_trial
from tests.compat.golden import (
    DATA,
    SCENARIOS,
    load_golden,
    probe_tensor,
    probe_trial,
)
from tests.support.golden_diff import diff, explain, same_within_ulps

# prod/sum of the integer fixtures overflow by design, in smdebug's answers as in ours
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

# docs/compatibility.md section for each deliberate difference, and the scenarios that show it.
FIXES = {
    "int8-stays-int8": {"dtypes"},
    "all-numpy-dtypes-decode": {"dtypes"},
    "shape-does-not-hide-value": {"reductions"},
    "norms-of-flattened-tensor": {"dtypes"},
}


@pytest.fixture(scope="module")
def s3_fixtures(s3_server: Any) -> str:
    """Every fixture trial uploaded once to the moto S3 server; the URI of their parent."""
    bucket = s3_server.new_bucket()
    for name in SCENARIOS:
        s3_server.upload_folder(DATA / name, bucket, f"fixtures/{name}")
    return f"s3://{bucket}/fixtures"


@pytest.fixture(scope="module", params=["local", "s3"])
def location(request: pytest.FixtureRequest) -> str:
    if request.param == "s3":
        return request.getfixturevalue("s3_fixtures")
    return str(DATA)


@pytest.fixture(scope="module", params=SCENARIOS)
def scenario(
    request: pytest.FixtureRequest, location: str
) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """A trial read from a local folder or from S3 (moto server on 127.0.0.1)."""
    trial = create_trial(f"{location}/{request.param}")
    yield request.param, trial, load_golden(request.param)
    trial.close()


def test_trial_answers_match_golden(scenario: tuple[str, Any, dict[str, Any]]) -> None:
    """Trial-level answers (steps, modes, names, workers, states …) equal smdebug's exactly."""
    name, trial, golden = scenario
    ours = probe_trial(trial, golden)
    mismatches = list(diff(golden["trial"], ours))
    assert not mismatches, f"{name}: {mismatches[:10]}"


def test_tensor_answers_match_golden_or_documented_fix(
    scenario: tuple[str, Any, dict[str, Any]],
) -> None:
    """Tensor answers equal smdebug's, except the documented fixes, which are checked instead."""
    name, trial, golden = scenario
    assert sorted(golden["tensors"]) == trial.tensor_names()
    unexplained, fixes_seen = [], set()
    for tname, gt in golden["tensors"].items():
        ours = probe_tensor(trial, tname, gt)
        for path, g, o in diff(gt, ours, ("tensors", tname)):
            if path[2] == "reduction_values" and same_within_ulps(g, o):
                continue
            reason = explain(trial, path, g, o)
            if reason is None:
                unexplained.append((path, g, o))
            else:
                fixes_seen.add(reason)
    assert not unexplained, f"{name}: {len(unexplained)} unexplained differences: {unexplained[:8]}"
    expected_fixes = {fix for fix, scenarios in FIXES.items() if name in scenarios}
    assert fixes_seen == expected_fixes
