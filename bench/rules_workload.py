"""The ``rules`` workload: every built-in rule over the whole trial, through each side's rule framework.

    bench/.work/venv-smdebug/bin/python bench/rules_workload.py --impl smdebug --trial T
    .venv/bin/python                    bench/rules_workload.py --impl ours    --trial T

Both sides run THE SAME RULE CLASSES, the modules of ``rules_builtin/`` in this checkout:

``--impl ours``
    imports ``evaluator`` from this checkout; opens the trial once with
    ``evaluator.trial.create_trial``; builds each rule with ``evaluator.rules.loader.build_rule``
    and runs ``evaluator.rules.invoker.invoke_rule(rule, raise_eval_cond=False,
    continue_after_fire=True)`` over all steps.

``--impl smdebug``
    before ``rules_builtin`` is imported, puts stand-in modules into ``sys.modules`` so that
    the rule modules' imports resolve to smdebug 1.0.34: ``evaluator.rules.rule.Rule`` is
    ``smdebug.rules.Rule``, ``evaluator.errors`` holds ``smdebug.exceptions``' classes (plus a
    ``ConfigurationError``), ``evaluator.modes.ModeKeys`` is smdebug's, and
    ``evaluator.rules.actions.Actions`` is smdebug's; our pure-Python parsers, rule kit, loss
    diagnosis and report page are loaded from their files (``bench/smdebug_standins.py``).
    Nothing else of ``evaluator`` is importable there (a rule module that needs more fails to
    import and is reported). The
    trial is ``smdebug.trials.create_trial``; each rule is built as ``cls(trial, **params)``
    (``other_trials=[...]`` for a rule that compares runs), which binds the same keyword
    arguments as build_rule; ``smdebug.rules.invoke_rule(rule, start_step=0, end_step=None,
    raise_eval_cond=False)`` runs it, and the ``NoMoreData`` it ends with is the normal end.

Which rules and which parameters: bench/rules_plan.py, the plan of the trial's kind (``--plan``;
by default the ``kind`` in make_trial.py's manifest beside the trial: ``big`` for the
performance trial, ``mixed`` for the rules trial of ``make_trial.py --kind mixed``). Every rule
class found in ``rules_builtin`` (imported module by module, so a module still being written
does not stop the others) runs, except those the plan's ``SKIP`` names; rules not in the plan
run with their defaults.

smdebug's ``invoke_rule`` has no end-of-data judgement: on the smdebug side a rule that defines
``invoke_at_end`` (ours; Confusion, Overfit, FeatureImportanceOverweight) has it called once
after smdebug's ``invoke_rule`` ends, as our ``invoke_rule`` does, and a step it returns counts
as fired, so that both sides run the same rule code.

Output: ONE JSON line (the last line on stdout) with, per rule, build and run seconds, the
steps evaluated / skipped, the fired steps (count, hash, first ones), the RSS after the rule and
the process's peak RSS so far; overall the create_trial seconds, the total (create_trial + every
rule), the peak RSS of the process, and a checksum over the fired steps of every rule.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import inspect
import json
import os
import pkgutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import rules_plan  # noqa: E402  (stdlib only)
from process_info import env_info, peak_rss_mib, rss_mib  # noqa: E402  (stdlib only)
from rules_sides import Ours, Side, Smdebug  # noqa: E402  (stdlib only at import time)

FIRED_HEAD = 12  # fired steps kept verbatim per rule (the hash covers all of them)


def _now() -> float:
    return time.perf_counter()


def fired_hash(steps) -> str:
    return hashlib.sha256(json.dumps([int(s) for s in steps]).encode()).hexdigest()[:16]


def find_rules(rule_base: type) -> tuple[dict[str, type], dict[str, str]]:
    """Rule classes defined in rules_builtin's modules (name -> class), and modules that failed
    to import (module -> error). Imported one by one, as the registry would, so one broken
    module does not hide the rest."""
    if REPO_ROOT not in sys.path:
        sys.path.insert(0, REPO_ROOT)
    import rules_builtin

    found: dict[str, type] = {}
    failed: dict[str, str] = {}
    for m in sorted(pkgutil.iter_modules(rules_builtin.__path__), key=lambda m: m.name):
        if m.name == "registry" or m.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"rules_builtin.{m.name}")
        except Exception as e:  # noqa: BLE001 - reported, the other rules still run
            failed[m.name] = f"{type(e).__name__}: {e}"
            continue
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and obj.__module__ == module.__name__
                and issubclass(obj, rule_base)
                and obj is not rule_base
                and not inspect.isabstract(obj)
            ):
                found[obj.__name__] = obj
    return dict(sorted(found.items())), failed


# --------------------------------------------------------------------------------------------


def trial_kind(trial_path: str) -> str:
    """The trial's kind from make_trial.py's manifest beside it ("big" without one)."""
    try:
        with open(trial_path.rstrip("/") + ".manifest.json") as f:
            kind = json.load(f).get("kind", "big")
    except (OSError, ValueError, AttributeError):
        return "big"
    return kind if kind in rules_plan.PLANS else "big"


def _expand(params: dict) -> dict:
    """``{work}`` in a parameter value -> bench/.work (the same text on both sides)."""
    work = os.path.join(HERE, ".work")
    return {k: (v.replace("{work}", work) if isinstance(v, str) else v) for k, v in params.items()}


def run(
    impl: str,
    trial_path: str,
    end_step: int | None = None,
    only: list[str] | None = None,
    kind: str = "big",
) -> dict:
    phases: dict[str, float] = {}
    t = _now()
    side: Side = Smdebug() if impl == "smdebug" else Ours()
    classes, failed_imports = find_rules(side.rule_base)
    phases["import"] = _now() - t
    rss_after_import = rss_mib()
    out: dict = {
        "impl": impl,
        "workload": "rules" if kind == "big" else f"rules_{kind}",
        "plan": kind,
        "trial": trial_path,
        "storage": "local",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "found": sorted(classes),
        "import_failures": failed_imports,
    }
    if end_step is not None:
        out["end_step"] = end_step

    t = _now()
    trial = side.create_trial(trial_path)
    phases["create_trial"] = _now() - t

    results: dict[str, dict] = {}
    for name, cls in classes.items():
        if only and name not in only:
            continue
        skip = rules_plan.skip_for(name, kind)
        if skip is not None:
            results[name] = {"status": "skipped", "why": skip}
            continue
        plan = rules_plan.plan_for(name, kind)
        rec: dict = {
            "status": "ran",
            "params": plan["params"],
            "planned": plan["planned"],
            "why": plan["why"],
            "other_trial": plan["other_trial"],
        }
        rule = others = None
        c0 = time.process_time()
        t0 = _now()
        try:
            others = [side.create_trial(trial_path)] if plan["other_trial"] else []
            rule = side.build(cls, trial, _expand(plan["params"]), others)
            t1 = _now()
            r = side.run(rule, end_step)
            t2 = _now()
        except Exception as e:  # noqa: BLE001 - one rule's failure is reported, the others run
            rec.update(
                status="error",
                error=f"{type(e).__name__}: {e}"[:500],
                seconds=round(_now() - t0, 4),
            )
            results[name] = rec
            print(f"rules: {name} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            rule = others = None
            gc.collect()
            continue
        fired = r["fired"]
        rec.update(
            build_s=round(t1 - t0, 4),
            run_s=round(t2 - t1, 4),
            seconds=round(t2 - t0, 4),
            cpu_s=round(time.process_time() - c0, 4),  # process CPU: steadier on a busy machine
            evaluated=r["evaluated"],
            skipped=r["skipped"],
            ended_by=r["ended_by"],
            fired_n=len(fired),
            fired_hash=fired_hash(fired),
            fired_head=fired[:FIRED_HEAD],
            fired_last=fired[-1] if fired else None,
        )
        rule = others = None  # free the rule's state before measuring the RSS
        gc.collect()
        rec["rss_after_mib"] = rss_mib()
        rec["peak_rss_so_far_mib"] = peak_rss_mib()
        results[name] = rec
        phases[f"rule:{name}"] = t2 - t0
        print(
            f"rules: {name} {rec['seconds']:.2f} s, {rec['evaluated']} evaluated, "
            f"{rec['fired_n']} fired",
            file=sys.stderr,
            flush=True,
        )

    ran = {n: r for n, r in results.items() if r["status"] == "ran"}
    out["rules"] = results
    out["phases"] = {k: round(v, 4) for k, v in phases.items()}
    out["seconds"] = round(sum(v for k, v in phases.items() if k.startswith("rule:")), 4)
    out["total_s"] = round(phases["create_trial"] + out["seconds"], 4)
    # checksum: the fired steps of every rule that ran; meta: which rules ran
    out["checksum"] = hashlib.sha256(
        json.dumps(sorted((n, r["fired_hash"], r["evaluated"]) for n, r in ran.items())).encode()
    ).hexdigest()[:16]
    out["meta_checksum"] = hashlib.sha256(json.dumps(sorted(ran)).encode()).hexdigest()[:16]
    out["peak_rss_mib"] = peak_rss_mib()
    out["rss_after_import_mib"] = rss_after_import
    out["env"] = dict(env_info(), impl=impl, **side.info, executable=sys.executable)
    return out


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTEST_CURRENT_TEST"):
        print(
            "bench/rules_workload.py is a benchmark; it is never run or timed inside the test suite",
            file=sys.stderr,
        )
        return 2
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--impl", required=True, choices=("smdebug", "ours"))
    p.add_argument("--trial", required=True, help="local trial directory")
    p.add_argument(
        "--end-step",
        type=int,
        default=None,
        help="development aid: stop every rule before this step (bench/run.py never sets it)",
    )
    p.add_argument("--only", default=None, help="development aid: comma list of rule names")
    p.add_argument(
        "--plan",
        default="auto",
        choices=("auto", *rules_plan.PLANS),
        help="which plan of bench/rules_plan.py (default: the kind in the trial's manifest, "
        "big without one)",
    )
    args = p.parse_args(argv)
    trial = os.path.abspath(args.trial)
    if not os.path.isdir(trial):
        raise SystemExit(f"no trial directory {trial}")
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    kind = trial_kind(trial) if args.plan == "auto" else args.plan
    result = run(args.impl, trial, args.end_step, only, kind)
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
