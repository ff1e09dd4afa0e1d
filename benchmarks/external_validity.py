"""Does the library score predict what a library does? Every diagnostic of the plan
(``benchmarks/external_validity_plan.yaml``, fixed before any diagnostic was set beside the outcomes) measured on the
libraries SkillLearnBench released, set beside the pass rates its project page publishes
(``benchmarks/data/skilllearnbench/main_results.csv``); docs/external-validity.md states the definitions and the
result.

A fetched checkout of cxcscmu/SkillLearnBench is read offline: ``skills/<library>/`` (the 24 generated libraries and
``human_authored``; every library is read, the files that cannot be read are named, never the reason to refuse a
library), ``tasks/<task>/<instance>/instruction.md`` (100 instances, each embedded cut at the embedder's window as
``score`` does and whole by chunks) and ``eval_keypoints/`` (the benchmark's key points). Nothing of the checkout is
written anywhere. Embeddings are cached on disk (``$SKILLTRANSFER_CACHE``), so a rerun embeds nothing twice.

Printed: one row per diagnostic with Spearman's rho (and Kendall's tau) over the 24 generated libraries, rho with
the human-authored library added (25), and rho on the 12 libraries Claude models wrote (where the best model-free
diagnostic is chosen) and on the 12 Gemini models wrote (held out, reported once), each with its 95 % bootstrap
interval over libraries (2,000 resamples); then the paired differences against the paper's utility and the
benchmark's LLM coverage, the correlations within method and within model, what could not be read, and the last line

    external validity: best model-free rho R [lo, hi] on held-out H [lo, hi]; paper utility U; benchmark LLM coverage C

R: the chosen diagnostic's rho on the Claude part; H: on the Gemini part; U: ``mean_utility``'s rho on the Gemini
part; C: the page's LLM-judged coverage's rho on the Gemini part.

    python benchmarks/external_validity.py --skilllearnbench /path/to/SkillLearnBench [--out result.json]
        [--figure result.png] [--model JUDGE --api-key ... (adds the LLM rubric)] [--no-run-scripts]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from skilltransfer.commands.validate_run import (
    ValidationRun,
    assemble,
    external_values,
    judge_libraries,
    library_notes,
    make_context,
    match,
    measure_libraries,
    model_free_names,
    read_libraries,
)
from skilltransfer.errors import InputError
from skilltransfer.memory.embedders import make_embedder
from skilltransfer.metrics.diagnostics import BY_NAME, DIAGNOSTICS, task_items
from skilltransfer.metrics.outcomes import load_key_points, read_outcomes
from skilltransfer.metrics.task_texts import load_tasks
from skilltransfer.metrics.validation import ValidationReport, jsonable, validate
from skilltransfer.util.files import atomic_write_text

HERE = Path(__file__).resolve().parent
PLAN = HERE / "external_validity_plan.yaml"
RESULTS = HERE / "data" / "skilllearnbench" / "main_results.csv"
PUBLISHED = {"bench_coverage": "coverage", "bench_executability": "executability", "bench_safety": "safety"}
"""Plan name -> the published column."""
HUMAN = "human_authored"
NO_SKILL = "no_skill"


def check_plan(plan: dict[str, Any]) -> None:
    """The diagnostics this script computes are the plan's, in its order, with its kinds and scopes.

    Raises:
        SystemExit: they are not (the plan and the code have drifted apart).
    """
    planned = [(d["name"], d["class"], d["scope"]) for d in plan["diagnostics"]]
    ours = [(d.name, d.kind, d.scope) for d in DIAGNOSTICS] + [(n, "published", "own") for n in PUBLISHED]
    if planned != ours:
        sys.exit(f"error: the diagnostics differ from {PLAN.name}: plan {planned}, code {ours}")
    settings = plan["settings"]
    if (settings["embedder"], settings["tau"], settings["specificity"]) != ("minilm", 0.1, "pairs"):
        sys.exit(f"error: {PLAN.name} settings changed: {settings}")


def interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def rho_of(report: ValidationReport, part: str, name: str) -> str:
    row = report.correlation(part, name)
    return interval(row.spearman, row.spearman_low, row.spearman_high) if row is not None else "-"


def print_tables(main: ValidationReport, with_human: ValidationReport, run: ValidationRun) -> None:
    width = max(len(name) for name in main.diagnostics) + 2
    print(f"{len(main.units)} generated libraries (+ human_authored: {len(with_human.units)}) against the published "
          f"pass rate; rho: Spearman, tau: Kendall tau-b [95 % bootstrap over libraries, "
          f"{main.settings['resamples']} resamples, seed {main.settings['seed']}]")
    n, n_human = len(main.units), len(with_human.units)
    tune, held = len(main.parts["tune"]), len(main.parts["held_out"])
    header = (f"{'diagnostic':<{width}}{'kind':<12}{f'rho, all {n}':>21}{f'tau, all {n}':>21}"
              f"{f'rho, +human {n_human}':>21}{f'rho, claude {tune}':>21}{f'rho, gemini {held}':>21}")
    print(header)
    for name in main.diagnostics:
        tau = main.correlation("all", name)
        tau_text = interval(tau.kendall, tau.kendall_low, tau.kendall_high) if tau is not None else "-"
        print(f"{name:<{width}}{main.kinds[name]:<12}{rho_of(main, 'all', name):>21}{tau_text:>21}"
              f"{rho_of(with_human, 'all', name):>21}{rho_of(main, 'tune', name):>21}"
              f"{rho_of(main, 'held_out', name):>21}")
    for row in main.correlations["all"]:
        if row.spearman is None:
            print(f"  {row.diagnostic}: no rho ({row.why})")
    print(f"\npaired differences over the same resamples (n = {n}): rho(diagnostic) - rho(other)")
    for pair in main.paired:
        if pair.difference is not None:
            print(f"  {pair.first:<{width}} - {pair.second:<15} {interval(pair.difference, pair.low, pair.high):>21}"
                  f"  first higher in {pair.share_first_better:.0%} of resamples")
    print(f"\nwithin groups (n = {n}): size-weighted mean of each group's rho, libraries resampled within groups")
    for group in main.groups:
        if group.pooled is not None:
            print(f"  {group.diagnostic:<{width}} within {group.grouping:<7}"
                  f"{interval(group.pooled, group.low, group.high):>21}")
    unread = {name: notes["unreadable"] for name, notes in run.libraries.items() if notes.get("unreadable")}
    total = sum(len(v) for v in unread.values())
    lenient = sum(n.get("read_leniently", 0) for n in run.libraries.values())
    print(f"\nread: {len(run.libraries)} libraries, {sum(n['skills'] for n in run.libraries.values())} skills "
          f"({lenient} read leniently: model-written front matter the format refuses); "
          f"{total} SKILL.md files could not be read, in {len(unread)} libraries (named in --out):")
    for name, items in unread.items():
        print(f"  {name}: {len(items)}: {items[0]}" + (" ..." if len(items) > 1 else ""))
    print(f"instructions: {run.tasks['n']}, {run.tasks['over_window']} longer than the embedder's window (read whole "
          "by chunks for the *_whole diagnostics)")


def last_line(main: ValidationReport) -> str:
    best = main.best
    chosen = main.correlation("tune", best) if best else None
    held = main.correlation("held_out", best) if best else None
    utility = main.correlation("held_out", "mean_utility")
    coverage = main.correlation("held_out", "bench_coverage")

    def bare(row: Any) -> str:
        return "-" if row is None or row.spearman is None else f"{row.spearman:.2f}"

    return (f"external validity: best model-free rho "
            f"{interval(chosen.spearman, chosen.spearman_low, chosen.spearman_high) if chosen else '-'} on held-out "
            f"{interval(held.spearman, held.spearman_low, held.spearman_high) if held else '-'}; paper utility "
            f"{bare(utility)}; benchmark LLM coverage {bare(coverage)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skilllearnbench", type=Path, required=True, help="A checkout of cxcscmu/SkillLearnBench.")
    parser.add_argument("--results", type=Path, default=RESULTS, help="The published per-library numbers (CSV).")
    parser.add_argument("--embedder", default="minilm", help="The plan's: minilm.")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-run-scripts", action="store_true", help="Parse shipped scripts only (the plan starts "
                                                                      "them in the sandbox).")
    parser.add_argument("--model", help="A judge for the LLM rubric (any --model string of skilltransfer).")
    parser.add_argument("--api-key")
    parser.add_argument("--out", type=Path, help="Everything as JSON.")
    parser.add_argument("--figure", type=Path, help="The figure (.png).")
    args = parser.parse_args()
    plan = yaml.safe_load(PLAN.read_text())
    check_plan(plan)
    if args.embedder != plan["settings"]["embedder"]:
        print(f"note: --embedder {args.embedder} is not the plan's ({plan['settings']['embedder']})")
    root = args.skilllearnbench
    started = time.perf_counter()

    def say(line: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {line}", file=sys.stderr, flush=True)

    try:
        outcomes = read_outcomes(args.results, outcome="pass_rate")
        outcomes.values.pop(NO_SKILL, None)  # the no-skill row has no library
        names = list(outcomes.values)
        paths = [root / "skills" / name for name in names]
        missing = [str(p) for p in paths if not p.is_dir()]
        if missing:
            raise InputError(f"not a SkillLearnBench checkout: no {', '.join(missing[:3])}")
        tasks = load_tasks(root / "tasks")
        items = task_items([t.id for t in tasks], [t.text for t in tasks])
        key_points = load_key_points(root / "eval_keypoints")
        libraries = read_libraries(paths, say, lenient=plan["reading"]["lenient"])
        matched = match(libraries, outcomes, items)
        starter = None
        if not args.no_run_scripts:
            from skilltransfer.sandbox.script_check import ScriptStarter

            starter = ScriptStarter()
        embedder = make_embedder(args.embedder, cache=True)
        try:
            context, _ = make_context(tasks, embedder, key_points=key_points, run_script=starter,
                                          tau=plan["settings"]["tau"], seed=args.seed, progress=say)
            measured = measure_libraries(context, matched.libraries, say)
            diagnostics = model_free_names(None, key_points=True)
            rubric = None
            if args.model:
                rubric = judge(args, matched, items, measured, key_points, say)
                diagnostics += ["llm_coverage", "llm_executability", "llm_safety"]
        finally:
            if starter is not None:
                starter.close()
        published = external_values(matched.units, outcomes, list(PUBLISHED.values()))
        extra = {plan_name: published[column] for plan_name, column in PUBLISHED.items()}
        values, kinds = assemble(matched, measured, diagnostics, extra)
    except InputError as exc:
        sys.exit(f"error: {exc}")
    units = matched.units
    family = [outcomes.columns["family"][name] for name in units.names]
    generated = [i for i, name in enumerate(units.names) if name != HUMAN]
    sub = units.subset(generated)
    sub_values = {name: v[generated] for name, v in values.items()}
    sub_family = [family[i] for i in generated]
    model_free = [name for name in diagnostics if BY_NAME[name].kind == "model-free"]
    say("statistics")
    main_report = validate(sub, sub_values, kinds,
                           parts={"tune": [i for i, f in enumerate(sub_family) if f == "claude"],
                                  "held_out": [i for i, f in enumerate(sub_family) if f == "gemini"]},
                           candidates=model_free, pairs_with=["mean_utility", "bench_coverage"],
                           groupings={"method": [outcomes.columns["method"][n] for n in sub.names],
                                      "model": [outcomes.columns["model"][n] for n in sub.names]},
                           resamples=args.resamples, seed=args.seed)
    with_human = validate(units, values, kinds, candidates=model_free, resamples=args.resamples, seed=args.seed)
    notes = {lib.name: library_notes(m, lib) for lib, m in zip(matched.libraries, measured, strict=True)}
    run = ValidationRun(main_report, outcomes, notes, [], rubric,
                        tasks={"n": len(items), "groups": len({t.group for t in items}),
                               "over_window": _over_window(context)},
                        settings={"plan": str(PLAN.relative_to(HERE.parent)), "embedder": args.embedder,
                                  "lenient": plan["reading"]["lenient"],
                                  "run_scripts": not args.no_run_scripts})
    print_tables(main_report, with_human, run)
    if args.out is not None:
        import json

        data = {**run.to_dict(), "with_human": with_human.to_dict(), "last_line": last_line(main_report)}
        atomic_write_text(args.out, json.dumps(jsonable(data), indent=1, default=str) + "\n")
        say(f"wrote {args.out}")
    if args.figure is not None:
        from skilltransfer.report.validation_figure import save_validation_figure

        save_validation_figure(main_report, "pass rate (SkillLearnBench)", args.figure)
        say(f"wrote {args.figure}")
    if main_report.best is not None:
        print(f"best model-free diagnostic, chosen on the {len(main_report.parts['tune'])} Claude-written libraries: "
              f"{main_report.best}")
    print(last_line(main_report))


def _over_window(context: Any) -> int:
    """How many of the task instructions are longer than one window of the embedder (read whole by chunks)."""
    whole = context.whole
    return sum(len(whole.chunks(task.text)) > 1 for task in context.tasks)


def judge(args: argparse.Namespace, matched: Any, items: Any, measured: Any, key_points: Any,
          say: Any) -> dict[str, Any]:
    """The LLM rubric of every library through ``--model`` (responses cached), merged into the measured
    diagnostics."""
    from skilltransfer.llm import make_model
    from skilltransfer.llm.config import build_config, parse_model_string
    from skilltransfer.memory.embedders import default_cache_dir

    config = build_config({**parse_model_string(args.model), **({"api_key": args.api_key} if args.api_key else {}),
                           "cache_path": str(default_cache_dir() / "rubric-responses.sqlite")})
    chat = make_model(config)
    try:
        rubric = judge_libraries(chat, matched.libraries, items, measured, key_points,
                                 rubrics=("coverage", "executability", "safety"), max_chars=20_000, retries=1,
                                 progress=say)
    finally:
        close = getattr(chat, "close", None)
        if close is not None:
            close()
    return {"model": args.model, "prompts": rubric.prompts.ids(), "usage": rubric.usage.to_dict()}


if __name__ == "__main__":
    main()
