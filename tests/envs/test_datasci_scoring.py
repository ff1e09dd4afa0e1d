"""KramaBench scoring of datasci answers (every answer type, upstream's edge cases) and the success rule on top."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skilltransfer.envs.datasci import DataSciEnv
from skilltransfer.envs.datasci.kramabench import (
    APPROX_RELATIVE,
    METRICS,
    list_f1_approximate,
    max_matching,
    paraphrase,
    str_to_float,
)
from skilltransfer.envs.datasci.scoring import (
    ANSWER_TYPES,
    DEFAULT_THRESHOLDS,
    MAX_ANSWER_CHARS,
    SuccessRule,
    score_answer,
)
from skilltransfer.envs.datasci.textsim import char_bleu, rouge1_f
from skilltransfer.errors import InputError

# (answer, expected, KramaBench score)
CASES: dict[str, list[tuple[Any, Any, float]]] = {
    "numeric_exact": [
        (12, 12, 1.0),
        (12.0, 12, 1.0),
        ("12", 12, 1.0),
        (" 12 ", 12, 1.0),
        (38.42, 38.421, 1.0),  # relative difference 2.6e-5 < 1e-4: a rounded answer
        ("38.42", 38.421, 1.0),
        (38.43, 38.42, 0.0),
        (100001.0, 100000, 1.0),  # a float within 1e-4 of the larger magnitude
        (100001, 100000, 0.0),  # two ints must be equal
        (13, 12, 0.0),
        ("45%", 45, 1.0),  # success drops one trailing %
        ("1,204", 1204, 0.0),  # no thousands separators upstream
        ("twelve", 12, 0.0),
        (5e-7, 0, 1.0),  # an expected 0 takes |answer| < 1e-6
        (2e-6, 0, 0.0),
        (float("nan"), 12, 0.0),
        ("inf", 12, 0.0),
        ([12], 12, 0.0),
        (True, 1, 1.0),  # a bool is a number upstream too
    ],
    "string_exact": [
        ("  Radial Velocity ", "radial velocity", 1.0),
        ("ÄBC", "äbc", 1.0),
        ("'2023-05'", "2023-05", 0.0),  # quotes are not removed
        ("radial  velocity", "radial velocity", 0.0),  # inner spaces are not collapsed
        ("2023-06", "2023-05", 0.0),
        (2023, "2023", 1.0),  # a numeric string is a number
        (5, "abc", 0.0),
        (["PL-00012"], "PL-00012", 0.0),
    ],
    "numeric_approximate": [
        (100, 100, 1.0),
        (110, 100, 1 / 1.1),
        (300.0, 100, 1 / 3),
        (-100, 100, 1 / 3),
        ("1e2", 100, 1.0),
        ("51.9%", 0.519, 1.0),  # a trailing % divides by 100
        ("51.9%", 51.9, 1 / (1 + (51.9 - 0.519) / 51.9)),
        ("51.9 %", 0.519, 1.0),
        (" 51.9% ", 0.519, 0.0),  # not trimmed before the % test: unreadable
        ("1,204", 1204, 0.0),
        (5, 0, 0.0),  # an expected 0 scores 0
        ("abc", 5, 0.0),
        ([5], 5, 0.0),
        (float("nan"), 5, 0.0),
        (float("inf"), 5, 0.0),
    ],
    "list_exact": [
        ([1, 1, 2], [1, 1, 2], 1.0),  # repeated items (upstream: 0.8)
        ([1, 2], [1, 1, 2], 0.8),  # (upstream: 1.0)
        ([1, 1, 2], [1, 2], 0.8),
        (["b", "A"], ["a", "b"], 1.0),  # order and case ignored
        ([" A "], ["a"], 1.0),
        (["a", "c"], ["a", "b"], 0.5),
        (["a", "b", "c"], ["a", "b"], 0.8),
        ("a, b", ["a", "b"], 1.0),  # comma fallback
        ('["a", "b"]', ["a", "b"], 1.0),  # JSON
        ("['a', 'b']", ["a", "b"], 1.0),  # Python literal
        ("a", ["a"], 1.0),
        (["1.0"], [1], 1.0),  # numeric strings match numbers
        (["50%"], [0.5], 1.0),
        ([1.0000001], [1], 1.0),
        ([1.001], [1], 0.0),
        ([2023], ["2023"], 1.0),  # str(item) for string targets
        ([], [], 1.0),
        ([], ["a"], 0.0),
        (["a"], [], 0.0),
        (5, [5], 0.0),  # not a list
        ({"a": 1}, ["a"], 0.0),
        ("a", "A ", 1.0),  # two strings: trimmed, lower-cased equality
    ],
    "list_approximate": [
        ([100.5, 200], [100, 200], 1.0),  # within 1 %
        ([101, 200], [100, 200], 1.0),  # exactly 1 %
        ([102, 200], [100, 200], 0.5),
        ([101, 100], [100, 101.5], 1.0),  # a maximum matching, not the first match
        ("[100, 200]", [100, 200], 1.0),
        ("100, 200", [100, 200], 1.0),  # a Python literal: the tuple (100, 200)
        ("Bronze Age, Roman", ["Bronze Age", "Roman"], 0.0),  # no comma fallback upstream
        (["50%"], [0.5], 1.0),
        (["Bronze Age"], ["bronze age"], 1.0),
        (["bronze-age"], ["Bronze Age"], 1.0),
        (["the Bronze Age"], ["Bronze Age"], 0.0),  # the judge's stand-in never says yes to other words
        ([1, 1, 2], [1, 1, 2], 1.0),
        ([], [], 1.0),
        (7, [7], 0.0),
    ],
    "string_approximate": [
        ("Transit in Lyra", "Transit in Lyra", 1.0),
        ("transit  in LYRA.", "Transit in Lyra", 1.0),
        ("transit, Lyra", "Transit in Lyra", 0.8),  # ROUGE-1 F1, character BLEU > 0.2
        ("Lyra in Transit", "Transit in Lyra", 1.0),  # ROUGE-1 ignores order
        ("zzz-not-an-answer", "Transit in Lyra", 0.0),
        ("T", "Transit in Lyra", 0.0),  # character BLEU <= 0.2
        (42, "42", 1.0),
    ],
}


@pytest.mark.parametrize(("answer_type", "answer", "expected", "score"),
                         [(kind, *case) for kind, cases in CASES.items() for case in cases],
                         ids=lambda v: repr(v)[:30])
def test_kramabench_score_table(answer_type: str, answer: Any, expected: Any, score: float) -> None:
    assert METRICS[answer_type](answer, expected) == pytest.approx(score, abs=1e-12)


def test_every_answer_type_is_in_the_table() -> None:
    assert set(CASES) == set(ANSWER_TYPES) == set(DEFAULT_THRESHOLDS)


def test_str_to_float_follows_upstream() -> None:
    assert str_to_float("51.9%") == pytest.approx(0.519)
    assert str_to_float("%5%") == pytest.approx(0.05)
    assert str_to_float(" 7 ") == 7.0
    with pytest.raises(ValueError, match="could not convert"):
        str_to_float("1,204")


def test_max_matching_finds_augmenting_paths() -> None:
    within = lambda got, want: abs(got - want) <= 1  # noqa: E731
    assert max_matching([1, 2], [2, 3], within) == 2  # 1 takes 2 first; 2 must move it to 3
    assert max_matching([5, 5, 5], [5, 5], within) == 2
    assert max_matching([], [1], within) == 0
    assert max_matching(list(range(300)), list(range(300))[::-1], lambda g, w: g == w) == 300


def test_text_similarity_matches_hand_computed_values() -> None:
    assert char_bleu("abcd", "abcd") == pytest.approx(1.0)
    # p1 = p2 = 1, p3 = p4 = 0 -> smoothed 0.1; brevity penalty exp(1 - 4/2)
    assert char_bleu("ab", "abcd") == pytest.approx(math.exp(-1) * 0.1 ** 0.5)
    assert char_bleu("", "abc") == 0.0
    assert char_bleu("xyz", "abc") == 0.0
    assert rouge1_f("The cat!", "the cat") == 1.0
    assert rouge1_f("São Paulo", "Sao Paulo") == pytest.approx(0.4)  # rouge-score splits on non-ASCII letters
    assert rouge1_f("", "a") == 0.0
    assert paraphrase("Old-Town", "old town")
    assert not paraphrase("town old", "old town")


# ---- the success rule ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("answer", "expected", "answer_type", "success"), [
    (101, 100, "numeric_approximate", True),  # relative error exactly 1 %
    (98.9, 100, "numeric_approximate", False),
    (100.5, 100, "numeric_approximate", True),
    ([1, 1, 2], [1, 1, 2], "list_exact", True),
    ([1, 2], [1, 1, 2], "list_exact", False),
    (["a", "b"], ["b", "a"], "list_exact", True),
    ("transit, Lyra", "Transit in Lyra", "string_approximate", False),
    ("Lyra in Transit", "Transit in Lyra", "string_approximate", True),
    ([101.5, 200], [100, 200], "list_approximate", False),
    (38.42, 38.421, "numeric_exact", True),
])
def test_default_success_rule(answer: Any, expected: Any, answer_type: str, success: bool) -> None:
    score = score_answer(answer, expected, answer_type)
    assert score.success is success
    assert score.reward == METRICS[answer_type](answer, expected)
    assert score.checks[0].passed is success
    assert answer_type in score.checks[0].detail


def test_success_thresholds_are_configurable() -> None:
    lenient = SuccessRule({"list_exact": 0.8, "numeric_approximate": 0.5})
    assert score_answer([1, 2], [1, 1, 2], "list_exact", rule=lenient).success
    assert score_answer(190, 100, "numeric_approximate", rule=lenient).success
    assert lenient.threshold("string_exact") == 1.0
    assert SuccessRule().threshold("numeric_approximate") == pytest.approx(1 / 1.01)


@pytest.mark.parametrize(("thresholds", "message"), [
    ({"fuzzy": 0.5}, "unknown answer type 'fuzzy'"),
    ({"list_exact": 0}, r"success_thresholds.list_exact: 0 is not a number in \(0, 1\]"),
    ({"list_exact": 1.5}, "not a number in"),
    ({"list_exact": "high"}, "not a number in"),
    ({"list_exact": True}, "not a number in"),
])
def test_bad_success_thresholds_are_input_errors(thresholds: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        SuccessRule(thresholds)
    with pytest.raises(InputError, match=message):
        DataSciEnv(success_thresholds=thresholds)


def test_env_applies_its_success_thresholds() -> None:
    env = DataSciEnv(success_thresholds={"numeric_approximate": 0.5})
    task = next(t for t in env.tasks() if t.metadata["answer_type"] == "numeric_approximate")
    key = env.answer_key(task)
    assert key["success_threshold"] == 0.5
    assert env.score(task, key["answer"] * 1.5).success
    assert not DataSciEnv().score(task, key["answer"] * 1.5).success
    with pytest.raises(InputError, match="JSON object"):
        DataSciEnv(success_thresholds=[0.5])  # type: ignore[arg-type]


def test_missing_huge_and_unknown_answers() -> None:
    for kind in ANSWER_TYPES:
        missing = score_answer(None, [1] if kind.startswith("list") else 1, kind)
        assert (missing.reward, missing.success) == (0.0, False)
    huge = score_answer(["x" * 100] * (MAX_ANSWER_CHARS // 100), ["x"], "list_exact")
    assert (huge.reward, huge.success) == (0.0, False)
    assert "1,000,000 characters" in huge.checks[0].requirement
    with pytest.raises(ValueError, match="unknown answer type"):
        score_answer(1, 1, "fuzzy")


@given(answer=st.one_of(st.none(), st.floats(allow_nan=True), st.integers(), st.text(max_size=8),
                        st.lists(st.one_of(st.text(max_size=4), st.floats(), st.integers()), max_size=4)),
       kind=st.sampled_from(ANSWER_TYPES))
def test_scores_are_bounded_and_success_follows_the_threshold(answer: Any, kind: str) -> None:
    expected: Any = {"list_exact": ["x", "y"], "list_approximate": [1.5, 20.0], "string_exact": "abc",
                     "string_approximate": "Old Town"}.get(kind, 42.5)
    score = score_answer(answer, expected, kind)
    assert 0.0 <= score.reward <= 1.0
    assert score.success == (score.reward >= DEFAULT_THRESHOLDS[kind])


def test_list_items_of_every_task_are_pairwise_distinct_to_the_matcher() -> None:
    """No answer item can match two expected items, so upstream's many-to-one matching scores these tasks as the
    one-to-one matching does."""
    env = DataSciEnv()
    checked = 0
    for task in env.tasks():
        key = env.answer_key(task)
        items = key["answer"]
        if key["answer_type"] == "list_exact":
            assert len({str(item).strip().lower() for item in items}) == len(items), task.id
        elif key["answer_type"] == "list_approximate":  # an answer within 1 % of two items needs them within 2 %
            values = sorted(items)
            assert all(b - a > 2 * APPROX_RELATIVE * b for a, b in zip(values, values[1:], strict=False)), task.id
            assert list_f1_approximate([round(v, 2) for v in items], items) == 1.0
        else:
            continue
        checked += 1
    assert checked == 36
