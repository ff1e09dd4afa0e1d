"""The two text-overlap measures KramaBench's string scorer uses, re-implemented without nltk or rouge-score.

- ``char_bleu``: what ``nltk.translate.bleu_score.sentence_bleu([target], predicted,
  smoothing_function=SmoothingFunction().method1)`` returns when, as in KramaBench, both arguments are plain strings:
  BLEU-4 over **characters** (a string is a sequence of characters), clipped n-gram precisions, method-1 smoothing
  (a zero precision becomes 0.1 / its denominator), brevity penalty, and 0 when no character matches.
- ``rouge1_f``: ``rouge_score.rouge_scorer.RougeScorer(["rouge1"]).score(target, predicted)["rouge1"].fmeasure``:
  unigram F1 over tokens that are runs of ``[a-z0-9]`` after lower-casing (no stemming), counts clipped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

BLEU_ORDER = 4
SMOOTHING_EPSILON = 0.1


def _ngrams(items: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(items[i:i + n]) for i in range(len(items) - n + 1))


def char_bleu(predicted: str, target: str) -> float:
    """Sentence BLEU-4 of ``predicted`` against the single reference ``target``, over characters."""
    hyp, ref = list(predicted), list(target)
    numerators, denominators = [], []
    for n in range(1, BLEU_ORDER + 1):
        counts, ref_counts = _ngrams(hyp, n), _ngrams(ref, n)
        numerators.append(sum(min(c, ref_counts[g]) for g, c in counts.items()))
        denominators.append(max(1, sum(counts.values())))
    if numerators[0] == 0:
        return 0.0
    log_sum = sum(math.log((num if num else SMOOTHING_EPSILON) / den) for num, den in zip(numerators, denominators,
                                                                                          strict=True))
    brevity = 1.0 if len(hyp) > len(ref) else math.exp(1 - len(ref) / len(hyp))
    return brevity * math.exp(log_sum / BLEU_ORDER)


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's default tokens: lower-case, split on anything but ``[a-z0-9]`` (so accents split words)."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def rouge1_f(predicted: str, target: str) -> float:
    """ROUGE-1 F-measure of ``predicted`` against ``target``."""
    pred, ref = Counter(rouge_tokens(predicted)), Counter(rouge_tokens(target))
    overlap = sum((pred & ref).values())
    precision = overlap / max(sum(pred.values()), 1)
    recall = overlap / max(sum(ref.values()), 1)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0
