"""RESULTS.md's rules workloads section: per-rule figures of both sides, their verdicts compared
(the same rules must fire at the same steps), and the total."""

from __future__ import annotations

import json
from typing import Any

import make_trial

from runner.common import IMPLS, RULES_MIXED_WORKLOAD, RULES_WORKLOAD, TARGET_SPEEDUP, rel
from runner.report_figures import fmt_ratio, fmt_s, load_and_cpu, ratio, same_run, side_status
from runner.results import entry_key
from runner.sides import median


def _rules_runs(
    entries: dict[str, Any], storage: str, impl: str, workload: str = RULES_WORKLOAD
) -> list[dict[str, Any]]:
    e = entries.get(entry_key(storage, workload, impl)) or {}
    return [r for r in e.get("runs") or [] if "error" not in r and isinstance(r.get("rules"), dict)]


def _ran(run: dict[str, Any]) -> dict[str, Any]:
    return {n: r for n, r in run["rules"].items() if r.get("status") == "ran"}


def rules_common(
    entries: dict[str, Any], storage: str, workload: str = RULES_WORKLOAD
) -> dict[str, Any]:
    """Rules that ran in every run of both sides, and each side's median of create_trial + those
    rules (None for a side without runs)."""
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    sets = [set(_ran(r)) for i in IMPLS for r in runs[i]]
    common = sorted(set.intersection(*sets)) if sets and all(runs.values()) else []
    out: dict[str, Any] = {"rules": common}
    for i in IMPLS:
        totals = [
            r["phases"]["create_trial"] + sum(_ran(r)[n]["seconds"] for n in common)
            for r in runs[i]
        ]
        out[i] = median(totals) if totals and common else None
    return out


def _fired_sig(rec: dict[str, Any]) -> tuple[Any, ...]:
    return (rec.get("fired_hash"), rec.get("fired_n"), rec.get("evaluated"))


def _rule_agreement(
    entries: dict[str, Any], storage: str, workload: str = RULES_WORKLOAD
) -> dict[str, tuple[str, bool]]:
    """Per rule that ran somewhere: (verdict, is_mismatch)."""
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    names = sorted({n for i in IMPLS for r in runs[i] for n in _ran(r)})
    out: dict[str, tuple[str, bool]] = {}
    for n in names:
        sigs: dict[str, set[tuple[Any, ...]]] = {}
        for i in IMPLS:
            sigs[i] = {_fired_sig(_ran(r)[n]) for r in runs[i] if n in _ran(r)}
        params = {
            json.dumps(_ran(r)[n].get("params"), sort_keys=True)
            for i in IMPLS
            for r in runs[i]
            if n in _ran(r)
        }
        bad_repeat = [i for i in IMPLS if len(sigs[i]) > 1]
        if len(params) > 1:  # rules_plan.py changed between the stored runs
            out[n] = ("n/a: the stored runs used different parameters (run both sides again)", True)
        elif bad_repeat:
            out[n] = (f"MISMATCH: {bad_repeat[0]}'s repeats disagree", True)
        elif not sigs["smdebug"] or not sigs["ours"]:
            out[n] = ("n/a (one side only)", False)
        elif sigs["smdebug"] == sigs["ours"]:
            out[n] = ("yes", False)
        else:
            (a,), (b,) = sigs["smdebug"], sigs["ours"]
            what = "fired steps" if a[0] != b[0] else "steps evaluated"
            out[n] = (f"**NO**: {what} differ", True)
    return out


def rules_compare(
    entries: dict[str, Any], storage: str, workload: str = RULES_WORKLOAD
) -> tuple[str, bool]:
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    if not runs["smdebug"] or not runs["ours"]:
        return "n/a (one side only)", False
    params = {i: (entries[entry_key(storage, workload, i)].get("trial_params")) for i in IMPLS}
    if params["smdebug"] != params["ours"]:
        return "n/a: measured on different trials", True
    agree = _rule_agreement(entries, storage, workload)
    bad = [n for n, (_, b) in agree.items() if b]
    both = [n for n, (v, _) in agree.items() if v == "yes"]
    if bad:
        return f"MISMATCH: fired steps of {', '.join(bad)}", True
    return f"match: fired steps of {len(both)} rules", False


def _params_text(params: dict[str, Any]) -> str:
    if not params:
        return "defaults"
    return ", ".join(f"{k}={v}" for k, v in params.items())


def report_rules(
    L: list[str],
    data: dict[str, Any],
    storage: str,
    problems: list[str],
    workload: str = RULES_WORKLOAD,
) -> None:
    entries = data["entries"]
    es = {i: entries.get(entry_key(storage, workload, i)) for i in IMPLS}
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    L.append(f"## {storage}: {workload}")
    L.append("")
    _intro(L, data, workload)
    if not runs["smdebug"] and not runs["ours"]:
        for i in IMPLS:
            L.append(f"- {i}: {side_status(es[i])}")
        L.append("")
        return
    med = {i: (es[i] or {}).get("summary", {}).get("phases", {}) for i in IMPLS}
    agree = _rule_agreement(entries, storage, workload)
    sample: dict[str, Any] = {i: (runs[i][0] if runs[i] else None) for i in IMPLS}  # a run, or None
    names = sorted({n for i in IMPLS if sample[i] for n in sample[i]["rules"]})
    L.append(
        "| rule | parameters | smdebug s | ours s | smdebug / ours | fired: smdebug | fired: ours "
        "| fired steps agree |"
    )
    L.append("|---|---|---:|---:|---:|---:|---:|:-:|")
    excluded: list[str] = []
    skipped: list[tuple[str, str]] = []
    for n in names:
        recs: dict[str, Any] = {
            i: (sample[i]["rules"].get(n) if sample[i] else None) for i in IMPLS
        }
        any_rec = recs["ours"] or recs["smdebug"]
        if any_rec.get("status") == "skipped":
            skipped.append((n, any_rec.get("why", "")))
            continue
        secs = {i: med[i].get(f"rule:{n}") for i in IMPLS}
        fired = {}
        for i in IMPLS:
            r = recs[i]
            if r is None:
                fired[i] = "–"
            elif r.get("status") == "ran":
                fired[i] = str(r.get("fired_n"))
            else:
                fired[i] = r.get("status", "?")
                if r.get("status") == "error":
                    excluded.append(f"{n} on {i}: {r.get('error')}")
        verdict = agree.get(n, ("–", False))[0]
        params = _params_text(any_rec.get("params") or {})
        if not any_rec.get("planned", True):
            params += " (not in the plan)"
        L.append(
            f"| {n} | {params} | {fmt_s(secs['smdebug'])} | {fmt_s(secs['ours'])} | "
            f"{fmt_ratio(ratio(secs['smdebug'], secs['ours']))} | {fired['smdebug']} | {fired['ours']} | "
            f"{verdict} |"
        )
    common = rules_common(entries, storage, workload)
    ct = {i: med[i].get("create_trial") for i in IMPLS}
    L.append(
        f"| create_trial (once) | | {fmt_s(ct['smdebug'])} | {fmt_s(ct['ours'])} | "
        f"{fmt_ratio(ratio(ct['smdebug'], ct['ours']))} | | | |"
    )
    sp = ratio(common["smdebug"], common["ours"])
    target = "–" if sp is None else ("yes" if sp >= TARGET_SPEEDUP else "NO")
    L.append(
        f"| **total** (create_trial + the {len(common['rules'])} rules both ran) | | "
        f"**{fmt_s(common['smdebug'])}** | **{fmt_s(common['ours'])}** | **{fmt_ratio(sp)}** | | | "
        f"≥{TARGET_SPEEDUP:.0f}x: **{target}** |"
    )
    peaks = {i: (es[i] or {}).get("summary", {}).get("peak_rss_mib") for i in IMPLS}
    mr = ratio(peaks["smdebug"], peaks["ours"])
    L.append(
        f"| peak RSS of the process, MiB | | {fmt_s(peaks['smdebug'])} | {fmt_s(peaks['ours'])} | "
        f"{fmt_ratio(mr)} | | | lower: {'–' if mr is None else ('yes' if mr > 1 else 'NO')} |"
    )
    L.append("")
    if workload == RULES_WORKLOAD:
        L.append(
            'Reference (shared/bench/README.md): smdebug 1.0.34 ran "9 rules over all 2000 steps '
            'through `invoke_rule`" in 109 s, 565 MiB on this kind of machine; which rules and '
            "parameters it used is not recorded, so compare the ratio measured here, not the "
            "absolute seconds."
        )
        L.append("")
    only = {
        i: sorted(
            n for n in (set(_ran(sample[i])) if sample[i] else set()) if n not in common["rules"]
        )
        for i in IMPLS
    }
    if excluded or any(only.values()):
        L.append("Not in the total (run by one side only):")
        L.append("")
        for x in excluded:
            L.append(f"- {x}")
        for i in IMPLS:
            if only[i]:
                L.append(f"- ran on {i} only: {', '.join(only[i])}")
        L.append("")
    for n, (v, bad) in agree.items():
        if bad:
            problems.append(f"{storage}/{workload}: {n}: {v.replace('*', '')}")
    if skipped:
        which = "SKIP_MIXED" if workload == RULES_MIXED_WORKLOAD else "SKIP"
        L.append(f"Built-in rules not run on this trial (`{which}` in bench/rules_plan.py):")
        L.append("")
        for n, why in skipped:
            L.append(f"- **{n}**: {why}")
        L.append("")
    fails = {
        m: err
        for i in IMPLS
        if sample[i]
        for m, err in (sample[i].get("import_failures") or {}).items()
    }
    if fails:
        L.append("Rule modules that did not import (their rules did not run):")
        L.append("")
        for i in IMPLS:
            for m, err in sorted(((sample[i] or {}).get("import_failures") or {}).items()):
                L.append(f"- {i}: `rules_builtin.{m}`: {err}")
        L.append("")
    _sides(L, es, runs, sample, names)


def _intro(L: list[str], data: dict[str, Any], workload: str) -> None:
    """What the section measures: the rules trial (rules_mixed) and how each side runs the
    rules."""
    mixed = (data.get("trials") or {}).get("mixed") or {}
    if workload == RULES_MIXED_WORKLOAD:
        L.append(
            f"On the rules trial `{mixed.get('path', rel(make_trial.MIXED_OUT))}` "
            f"({mixed.get('steps', '?')} global steps, every {mixed.get('eval_every', '?')}th "
            f"an EVAL step, {mixed.get('files', '?')} files, "
            f"{(mixed.get('bytes') or 0) / 2**20:.0f} MiB, written by smdebug "
            f"{mixed.get('smdebug_version', '?')}'s own FileWriter, seed {mixed.get('seed', '?')}): "
            "a scalar loss, labels and predictions, ReLU/tanh/sigmoid layer inputs and outputs, "
            "weights and gradients, XGBoost-style feature importances, tree node ids, metrics and "
            "hyperparameters (bench/mixed_trial.py), with the plan `PLAN_MIXED`. A rule with an "
            "end-of-data judgement (`invoke_at_end`: Confusion, Overfit, "
            "FeatureImportanceOverweight) gets it on smdebug's side too, called once by the "
            "workload after smdebug's `invoke_rule` ends."
        )
        L.append("")
    L.append(
        "`bench/rules_workload.py`: **the same rule classes** (`rules_builtin/` of this checkout) on "
        "both sides, each rule over all steps of the trial, one after the other on one trial "
        "opened once. **ours**: `evaluator.trial.create_trial`, `build_rule`, "
        "`invoke_rule(rule, raise_eval_cond=False, continue_after_fire=True)`. **smdebug**: "
        "stand-in `evaluator.*` modules make the rule modules subclass `smdebug.rules.Rule` and "
        "raise/catch smdebug's exceptions; `smdebug.trials.create_trial`, `cls(trial, **params)`, "
        "`smdebug.rules.invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=False)` "
        "until its `NoMoreData`. Parameters: `bench/rules_plan.py` (chosen so that each rule reads "
        "the trial's tensors at every step and, where its logic allows, fires at some steps). "
        "A rule's seconds = build (and, for SimilarAcrossRuns, opening the other trial) + the "
        "whole invoke_rule walk. **Fired steps agree** = same steps evaluated and the same list "
        "of fired steps (hash)."
    )
    L.append("")


def _sides(
    L: list[str],
    es: dict[str, Any],
    runs: dict[str, list[dict[str, Any]]],
    sample: dict[str, Any],
    names: list[str],
) -> None:
    """What each rule does here, then each side's status, totals, load and memory."""
    whys = {n: (sample["ours"] or sample["smdebug"])["rules"][n] for n in names}
    L.append("What each rule does here:")
    L.append("")
    for n, r in whys.items():
        if r.get("status") != "skipped" and r.get("why"):
            L.append(f"- **{n}**: {r['why']}")
    L.append("")
    for i in IMPLS:
        e = es[i]
        line = f"- {i}: {side_status(e)}"
        if e and e.get("summary"):
            ok = [r for r in e["runs"] if "error" not in r]
            line += (
                "; total of everything it ran per run: "
                + ", ".join(fmt_s(r.get("total_s")) for r in ok)
                + " s"
            )
            line += load_and_cpu(ok)
            rss = [
                r.get("rss_after_import_mib")
                for r in ok
                if r.get("rss_after_import_mib") is not None
            ]
            if rss:
                line += f"; RSS after the imports {fmt_s(rss[0])} MiB"
            if i == "ours" and (e.get("git") or {}).get("commit"):
                line += (
                    f"; commit {e['git']['commit']}{' (dirty)' if e['git'].get('dirty') else ''}"
                )
        L.append(line)
    if es["smdebug"] and es["ours"] and runs["smdebug"] and runs["ours"]:
        L.append(
            "- both sides measured in the same run (alternating)"
            if same_run(es["smdebug"], es["ours"])
            else "- the two sides were measured in **separate runs**: the machine's load may differ"
        )
    L.append("")
