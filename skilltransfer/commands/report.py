"""``skilltransfer report``: Markdown/HTML/CSV/PNG report of stream runs (Table 2 and Figs. 3-6 of the paper)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from skilltransfer.commands.options import EmbedCache, EmbedCacheOld, NoCacheOld, embedder_option, warn_deprecated
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.util.terminal import Console, echo

if TYPE_CHECKING:  # imported when the command runs: its --help loads no plotting or numeric stack
    from skilltransfer.report.compare import Comparison

_ADVANCED = "Advanced"


def report(
    runs: Annotated[list[Path] | None, typer.Argument(help="Run folders, or folders holding run folders (searched "
                                                      "recursively for config.json + results.jsonl).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: report.md, report.html, *.csv, "
                                      "figures/.")] = Path("report"),
    metric: Annotated[Literal["official", "success", "reward"], typer.Option(
        help="official: each env's benchmark score (success; datasci: KramaBench's mean partial score); success "
             "(0/1 per task) or reward (evaluator score in [0, 1]) for every env.")] = "official",
    embedder: Annotated[str | None, embedder_option("Embedder to score skills with (minilm, hash:DIM, a folder) "
                                                    "instead of each run's own.", panel=_ADVANCED)] = None,
    utility: Annotated[bool, typer.Option(help="Run the skill-utility analyses (Fig. 5).")] = True,
    density_bins: Annotated[int, typer.Option(min=2, help="Stream bins of the transfer density (Fig. 6).",
                                              rich_help_panel=_ADVANCED)] = 50,
    utility_bins: Annotated[int, typer.Option(min=2, help="Equal-size task bins of Fig. 5a/b.",
                                              rich_help_panel=_ADVANCED)] = 10,
    utility_binning: Annotated[Literal["first", "spread"], typer.Option(
        help="Which utility bins take the extra tasks when the count is not a multiple: first (np.array_split) or "
             "spread (rank i in bin floor(i*bins/n)).", rich_help_panel=_ADVANCED)] = "first",
    seed: Annotated[int, typer.Option(help="Seed of this command's random draws: the bootstrap.",
                                      rich_help_panel=_ADVANCED)] = 0,
    embed_cache: EmbedCache = True,
    cache_old: EmbedCacheOld = False,
    no_cache_old: NoCacheOld = False,
    labels: Annotated[Path | None, typer.Option(
        help="A JSON file {\"task id\": [\"skill name or id\", ...]} naming each task's right skills, for the "
             "selection tables (replacing what the runs recorded).", rich_help_panel=_ADVANCED)] = None,
    compare: Annotated[tuple[Path, Path] | None, typer.Option(
        "--compare", metavar="A B", help="Compare two run folders task by task instead: the flip table (solved in A "
        "only / B only / both / neither) with McNemar's exact test, in --out.")] = None,
) -> Any:
    """Write tables with 95 % task-bootstrap CIs and the paper's figures from run logs; or, with --compare A B, which
    tasks flipped between two runs.

    \f
    Returns the `Report` (with --compare: the `Comparison`); typed Any so that --help imports neither.
    """
    if compare is not None:
        if runs:
            raise InputError("--compare A B takes the two run folders; give no other runs")
        return _compare(*compare, out)
    if not runs:
        raise InputError("give run folders (or --compare A B)")
    if cache_old:
        warn_deprecated("report --cache", "nothing: the embedding cache is on by default (--no-embed-cache: off)")
    if no_cache_old:
        warn_deprecated("--no-cache", "--no-embed-cache")
        embed_cache = False
    from skilltransfer.report import make_report

    check_output_path(out, flag="--out")
    result, written = make_report(list(runs), out, metric=metric, embedder=embedder, utility=utility,
                                  density_bins=density_bins, utility_bins=utility_bins, seed=seed, cache=embed_cache,
                                  utility_binning=utility_binning, labels=labels)
    console = Console(stderr=True)
    console.print(f"{len(result.runs)} runs -> {written.markdown}, {written.html}, {len(written.csv)} CSV files, "
                  f"{len(written.figures)} figures in {out / 'figures'}")
    return result


def _compare(path_a: Path, path_b: Path, out: Path) -> Comparison:
    from skilltransfer.report.compare import compare, load_pair, write_comparison

    check_output_path(out, flag="--out")
    comparison = compare(*load_pair(path_a, path_b))
    written = write_comparison(comparison, out)
    row = comparison.summary.rows[0]
    echo(f"A: {row['a']}\nB: {row['b']}\n{row['tasks']} tasks in both: {row['both']} solved in both, "
         f"{row['A only']} in A only, {row['B only']} in B only, {row['neither']} in neither; McNemar's exact "
         f"p = {row['mcnemar_exact_p']:.4g}")
    Console(stderr=True).print(f"-> {', '.join(str(p) for p in written)}", highlight=False, soft_wrap=True)
    return comparison
