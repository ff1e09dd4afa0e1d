"""Agreement of the datasci KramaBench scorer with KramaBench's own ``benchmark/metrics.py``.

Loads ``benchmark/metrics.py`` from a KramaBench checkout (the LLM client replaced by a stub that answers the
paraphrase question with the same deterministic stand-in ``kramabench.paraphrase`` uses), then scores the table
cases of ``tests/envs/test_datasci_scoring.py`` plus random answers of every type with both, and prints the agreement
and every case that differs (the documented departures). With nltk and rouge-score installed it also compares
``textsim`` with them on random string pairs. Needs ``pip install nltk rouge-score`` (upstream imports them).

    python benchmarks/kramabench_agreement.py --kramabench PATH/TO/Kramabench [--random 2000]
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import math
import random
import sys
import types
import warnings
from pathlib import Path
from typing import Any

from skilltransfer.envs.datasci.kramabench import METRICS, paraphrase
from skilltransfer.envs.datasci.textsim import char_bleu, rouge1_f

UPSTREAM_METRIC = {"numeric_exact": "success", "string_exact": "success", "numeric_approximate": "rae_score",
                   "list_exact": "f1", "list_approximate": "f1_approximate", "string_approximate": "llm_paraphrase"}
WORDS = ["Great", "Basin", "Area", "the", "Bronze", "Age", "São", "Paulo", "Transit", "in", "Lyra", "2020", "x,"]


class _StandInJudge:
    def __init__(self, model: str | None = None) -> None:
        pass

    def evaluate_paraphrase(self, a: str, b: str) -> tuple[bool, int, int, int]:
        return paraphrase(a, b), 0, 0, 0


def load_upstream(root: Path) -> types.ModuleType:
    """``benchmark/metrics.py`` of the checkout at ``root``, importable without its LLM client."""
    tools = types.ModuleType("benchmark.llm_tools")
    tools.GPTInterface = tools.LLMInterface = tools.OllamaInterface = _StandInJudge  # type: ignore[attr-defined]
    package = types.ModuleType("benchmark")
    package.__path__ = [str(root / "benchmark")]
    sys.modules.update({"benchmark": package, "benchmark.llm_tools": tools})
    path = root / "benchmark" / "metrics.py"
    spec = importlib.util.spec_from_file_location("benchmark.metrics", path)
    if not path.is_file() or spec is None or spec.loader is None:
        raise SystemExit(f"error: {path}: not a KramaBench checkout")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upstream_score(metrics: types.ModuleType, kind: str, answer: Any, expected: Any) -> float:
    """Upstream's score as its evaluator records it (an exception scores 0, NaN counts as 0)."""
    try:
        value = metrics.metric_factory(UPSTREAM_METRIC[kind])(predicted=answer, target=expected)[0]
    except Exception:  # noqa: BLE001 - the evaluator turns any failure into 0
        return 0.0
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def random_case(kind: str, rng: random.Random) -> tuple[Any, Any]:
    number = round(rng.uniform(-500, 500), rng.choice((0, 1, 2, 4)))
    near = number * rng.choice((1, 1, 1 + 1e-5, 1.005, 1.02, 1.5)) if rng.random() < 0.8 else rng.uniform(-9, 9)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
    if kind in ("numeric_exact", "numeric_approximate"):
        answer: Any = rng.choice((near, str(near), f"{near}%", int(near), f" {near} "))
        return answer, rng.choice((number, int(number)))
    if kind.startswith("string"):
        variant = rng.choice((text, text.upper(), f" {text} ", text.replace(" ", ", "), text + " x"))
        return variant, text
    size = rng.randint(0, 5)
    pool = rng.sample(range(1, 60), size)  # items 10 % apart: no answer item can match two (the one departure)
    expected = [rng.choice((f"item {i}", round(1.1 ** i, 3), int(1000 * 1.1 ** i))) for i in pool]
    answer = [e if rng.random() < 0.7 else rng.choice((f"item {rng.randint(1, 60)}", str(e))) for e in expected]
    rng.shuffle(answer)
    return (str(answer) if rng.random() < 0.2 else answer), expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kramabench", type=Path, required=True, help="a KramaBench checkout")
    parser.add_argument("--random", type=int, default=2000, help="random cases per answer type")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    metrics = load_upstream(args.kramabench)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_datasci_scoring import CASES

    rng = random.Random(0)
    table = [(kind, a, e) for kind, cases in CASES.items() for a, e, _ in cases]
    randoms = [(kind, *random_case(kind, rng)) for kind in METRICS for _ in range(args.random)]
    for name, cases in (("table", table), ("random", randoms)):
        differ = [(k, a, e, METRICS[k](a, e), upstream_score(metrics, k, a, e)) for k, a, e in cases]
        differ = [d for d in differ if not math.isclose(d[3], d[4], abs_tol=1e-9)]
        by_kind = {k: sum(d[0] == k for d in differ) for k in METRICS}
        print(f"{name}: {len(cases) - len(differ)} of {len(cases)} agree; differing by type: {by_kind}")
        for kind, answer, expected, ours, theirs in differ[:20]:
            print(f"  {kind:19} {answer!r:30.30} {expected!r:24.24} ours {ours:.4g} upstream {theirs:.4g}")
    try:
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
        from rouge_score import rouge_scorer
    except ImportError:
        return
    scorer, smooth = rouge_scorer.RougeScorer(["rouge1"]), SmoothingFunction().method1
    pairs = [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5))),
              " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))) for _ in range(args.random)]
    bleu = max(abs(char_bleu(a, b) - sentence_bleu([b], a, smoothing_function=smooth)) for a, b in pairs)
    rouge = max(abs(rouge1_f(a, b) - scorer.score(b, a)["rouge1"].fmeasure) for a, b in pairs)
    print(f"textsim vs nltk / rouge-score on {len(pairs)} pairs: max |BLEU diff| {bleu:.2g}, "
          f"max |ROUGE-1 diff| {rouge:.2g}")


if __name__ == "__main__":
    main()
