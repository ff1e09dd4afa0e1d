"""The scienceworld env: the bundled variation index, sub-procedures from gold paths, episodes over the simulator
(harness side, behind stubs), evaluation, gold paths and do-nothing, and what the agent cannot reach.

Tests that run the simulator skip, with the reason, when Java or the ``scienceworld`` package is missing."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from skilltransfer.envs import registry
from skilltransfer.envs.scienceworld import simulator as simulator_module
from skilltransfer.envs.scienceworld.env import ENDED, ScienceWorldEnv
from skilltransfer.envs.scienceworld.index import SPLITS, load_index, ranked, selection
from skilltransfer.envs.scienceworld.subprocs import head, label, parse, shared_objects, subprocedures
from skilltransfer.errors import InputError
from skilltransfer.sandbox import Limits

FAILING_GOLD = {"freeze/11", "freeze/19"}
"""Bundled variations whose gold path did not complete them when the index was made; the env leaves them out."""
REASON = simulator_module.unavailable_reason()
needs_simulator = pytest.mark.skipif(REASON is not None, reason=f"scienceworld simulator unavailable: {REASON}")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> ScienceWorldEnv:
    if REASON is not None:
        pytest.skip(f"scienceworld simulator unavailable: {REASON}")
    # Tests play whole gold paths (up to ~750 simulator steps) in one action: on a loaded 2-core machine that can
    # take longer than the default 30 s per action.
    env = ScienceWorldEnv(workdir=tmp_path_factory.mktemp("sw"), limits=Limits(wall_s=600, cpu_s=600))
    yield env
    env.close()


def _by_type(env: ScienceWorldEnv, split: str = "dev") -> dict[str, list]:
    found: dict[str, list] = {}
    for task in env.tasks(split):
        found.setdefault(task.template, []).append(task)
    return found


def _play(env: ScienceWorldEnv, task, code: str):
    episode = env.start(task)
    try:
        observation = episode.step(code)
        return observation, episode.evaluate(), episode
    finally:
        episode.close()


# ------------------------------------------------------------------------------------------ index (no Java)
def test_index_holds_the_benchmarks_splits_and_passing_gold_paths() -> None:
    index = load_index()
    assert index.scienceworld_version == simulator_module.PACKAGE_VERSION
    assert len(index.task_types) == 30
    assert sum(t.max_variations for t in index.task_types.values()) == 7207
    for name, info in index.task_types.items():
        together = sorted(v for split in SPLITS for v in info.splits[split])
        assert together == list(range(info.max_variations)) or info.max_variations < 5, name  # a partition
        assert max(info.splits["train"]) < min(info.splits["dev"]) < min(info.splits["test"]), name
    picked: Counter = Counter()
    failing: set[str] = set()
    for v in index.variations:
        info = index.task_types[v.task_type]
        assert v.variation in info.splits[v.split]
        assert v.variation in selection(info.splits, v.task_type, index.per_split)[v.split]
        assert v.description.startswith("Your task is")
        assert v.gold, (v.task_type, v.variation)
        if not (v.gold_score == 100 and v.gold_completed):
            failing.add(f"{v.task_type}/{v.variation}")
        picked[v.task_type, v.split] += 1
    for name, info in index.task_types.items():
        for split in SPLITS:
            assert picked[name, split] == min(index.per_split, len(info.splits[split])), (name, split)
    assert failing == FAILING_GOLD  # the simulator's own gold path stops short of completion (scores 87 and 82)


def test_selection_is_a_seeded_prefix() -> None:
    splits = {"train": list(range(50)), "dev": list(range(50, 75)), "test": list(range(75, 100))}
    small, large = selection(splits, "boil", 3), selection(splits, "boil", 10)
    assert all(set(small[s]) <= set(large[s]) for s in SPLITS)
    assert small["dev"] == sorted(ranked(splits["dev"], "boil", "dev")[:3])
    assert selection(splits, "melt", 3) != small


def test_subprocedures_from_gold_actions() -> None:
    assert head("substance in metal pot") == "substance"
    assert head("cup containing sodium chloride and water") == "cup"
    assert head("thermometer in inventory") == "thermometer"
    assert head("battery anode") == "battery"
    assert head("red wire terminal 1") == "red wire"
    assert parse("look around") is None
    assert parse("open door to kitchen") is None
    assert parse("0") is None
    assert parse("use thermometer in inventory on substance in metal pot") == ("use", ("thermometer", "substance"))
    assert parse("pour cup containing apple juice into metal pot") == ("pour", ("cup", "metal pot"))
    assert parse("pour metal pot in inventory into sink") == ("pour", ("metal pot", "sink"))
    assert parse("wait") == ("wait", ())
    shared = {"kitchen", "workshop", "thermometer", "metal pot", "stove"}
    assert label("use", ("thermometer", "apple juice"), shared) == "use_thermometer_on_object"
    gold = ["open door to kitchen", "go to kitchen", "look around", "pick up thermometer", "focus on apple juice",
            "pour cup containing apple juice into metal pot", "move metal pot to stove", "activate stove",
            "examine apple juice", "use thermometer in inventory on apple juice", "wait1"]
    assert subprocedures(gold, shared) == ["go_to_kitchen", "pick_up_thermometer", "focus_on_object",
                                           "pour_object_into_metal_pot", "move_metal_pot_to_stove",
                                           "activate_stove", "use_thermometer_on_object"]
    moves = ["open door to hallway", "go to hallway", "look around", "open door to kitchen", "go to kitchen",
             "pick up thermometer", "go to hallway", "go to workshop"]
    assert subprocedures(moves, shared) == ["go_to_kitchen", "pick_up_thermometer", "go_to_workshop"]
    assert shared_objects({"a": [["go to kitchen"]], "b": [["go to kitchen", "pick up ant"]],
                           "c": [["go to kitchen"]]}) == {"kitchen"}


def test_subprocedures_recur_across_task_types() -> None:
    index = load_index()
    gold_by_type: dict[str, list] = {}
    for v in index.variations:
        gold_by_type.setdefault(v.task_type, []).append(v.gold)
    shared = shared_objects(gold_by_type)
    assert {"kitchen", "thermometer"} <= shared
    types_of: dict[str, set[str]] = {}
    for v in index.variations:
        for name in subprocedures(v.gold, shared):
            types_of.setdefault(name, set()).add(v.task_type)
    assert len(types_of["go_to_kitchen"]) >= 10
    assert len(types_of["focus_on_object"]) >= 20
    assert sum(len(types) >= 3 for types in types_of.values()) >= 10


# ------------------------------------------------------------------------------------------ availability
def test_without_java_the_env_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulator_module.shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="needs Java: no 'java' on PATH.*default-jre-headless") as caught:
        ScienceWorldEnv()
    assert "\n" not in str(caught.value)
    summary = registry.summarize("scienceworld")
    assert not summary.available
    assert "needs Java" in summary.reason


def test_another_simulator_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulator_module.shutil, "which", lambda name: "/usr/bin/java")
    monkeypatch.setattr("skilltransfer.envs.scienceworld.env.installed_version", lambda: "9.9.9")
    with pytest.raises(InputError, match="installed scienceworld is 9.9.9"):
        ScienceWorldEnv()


# ------------------------------------------------------------------------------------------ tasks (Java)
def test_tasks_splits_difficulty_and_streams(env: ScienceWorldEnv) -> None:
    tasks = env.tasks()
    index = env.index
    assert set(env.excluded) == FAILING_GOLD
    assert len(tasks) == len(index.variations) - len(FAILING_GOLD)
    assert not FAILING_GOLD & {t.id for t in tasks}
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.split for t in tasks} == set(SPLITS)
    assert sum(len(env.tasks(s)) for s in SPLITS) == len(tasks)
    with pytest.raises(InputError, match="unknown split"):
        env.tasks("validation")
    low, high = env.difficulty_cuts
    for task in tasks:
        v = env.variation(task)
        assert task.id == f"{v.task_type}/{v.variation}"
        assert task.template == v.task_type
        assert task.instruction == v.description
        assert task.difficulty == (1 if len(v.gold) <= low else 2 if len(v.gold) <= high else 3)
        assert task.metadata["subprocedures"]
        assert task.metadata["gold_length"] == len(v.gold)
    strata = Counter(t.difficulty for t in tasks)
    assert all(strata[d] >= len(tasks) // 4 for d in (1, 2, 3)), strata  # terciles, up to ties
    dev30 = env.streams["dev30"]
    assert len(dev30) == len({t.split("/")[0] for t in dev30}) == len(_by_type(env))
    assert all(env.variation(env.task(t)).split == "dev" for t in dev30)
    assert all(a.split("/")[0] != b.split("/")[0] for a, b in zip(dev30, dev30[1:], strict=False))
    assert env.streams["dev60"][:len(dev30)] == dev30
    assert all(t.startswith("find-") for t in env.streams["starter"])
    smaller = ScienceWorldEnv(per_split=2, workdir=env.workdir)
    assert all(n <= 2 for n in Counter((t.template, t.split) for t in smaller.tasks()).values())


def test_unknown_task_is_refused(env: ScienceWorldEnv) -> None:
    task = env.tasks()[0]
    with pytest.raises(InputError, match="unknown task id"):
        env.start(type(task)(id="boil/999", instruction="x", difficulty=1, template="boil"))


# ------------------------------------------------------------------------------------------ episodes (Java)
def test_services_return_the_simulators_text_and_score_stays_hidden(env: ScienceWorldEnv) -> None:
    task = env.task(env.streams["dev30"][0])
    code = ("print(type(look()).__name__, look().splitlines()[0])\n"
            "print(inventory())\nprint(task_description())\n"
            "va = valid_actions(); print(len(va) > 10, all(isinstance(a, str) for a in va))\n"
            "print(action_templates()[:3])\nprint(act('open door to kitchen'))\n"
            "print([n for n in dir() if not n.startswith('_')])")
    observation, score, episode = _play(env, task, code)
    out = observation.output
    assert "str This room is called" in out or "str This outside location" in out
    assert "In your inventory, you see" in out
    assert task.instruction in out
    assert "True True" in out
    assert "['activate OBJ', 'close OBJ', 'connect OBJ to OBJ']" in out
    assert "score" not in out.lower()
    assert not observation.done
    assert {"act", "look", "inventory", "valid_actions", "complete_task"} <= set(eval(out.strip().splitlines()[-1]))
    assert not score.success
    assert score.reward == 0
    assert [action for action, _, _ in episode.session.trace] == ["look around", "open door to kitchen"]
    assert "'open door to kitchen': " in score.checks[1].detail


def test_a_wrong_focus_fails_and_ends_the_episode(env: ScienceWorldEnv) -> None:
    task = env.task(env.streams["dev30"][0])
    episode = env.start(task)
    try:
        first = episode.step("print(act('focus on air'))")
        assert first.done
        assert "You focus on the air." in first.output
        second = episode.step("print(act('look around'))")
        assert ENDED in second.output
        score = episode.evaluate()
    finally:
        episode.close()
    assert (score.reward, score.success) == (0.0, False)
    assert "final score -100" in score.checks[0].detail
    assert not score.checks[1].passed
    assert "'focus on air': -100" in score.checks[1].detail
    assert len(episode.session.trace) == 2  # the refused action never reached the simulator


@pytest.mark.slow
def test_bad_actions_are_errors_for_the_agent_not_the_harness(env: ScienceWorldEnv) -> None:
    task = env.task(env.streams["dev30"][1])
    code = ("for bad in [3, 'x' * 600]:\n    try:\n        act(bad)\n    except Exception as e:\n"
            "        print(type(e).__name__, str(e)[:40])\nprint(act(''))")
    observation, score, _ = _play(env, task, code)
    assert "TypeError act() takes the action as a string" in observation.output
    assert "ValueError act(): the action is 600 characters" in observation.output
    assert "No known action matches that input." in observation.output
    assert not score.success


@pytest.mark.slow
def test_one_jvm_per_env_reused_and_a_dead_jvm_is_replaced(env: ScienceWorldEnv) -> None:
    starts = env.simulator.starts
    dev30 = env.streams["dev30"]
    for task_id in dev30[:3]:
        _play(env, env.task(task_id), "print(look())")
    assert env.simulator.starts == starts
    episode = env.start(env.task(dev30[0]))
    try:
        env.simulator.env._gateway.java_process.kill()
        observation = episode.step("print(act('look around'))")
        assert observation.error
        assert "SimulatorError" in observation.output
        assert "stopped answering" in observation.output
        again = episode.step("print(look())")  # no new JVM for a world that is gone
        assert "its world is gone" in again.output
        assert env.simulator.starts == starts
        assert not episode.evaluate().success
    finally:
        episode.close()
    observation, _, _ = _play(env, env.task(dev30[1]), "print(act('look around'))")
    assert "This " in observation.output
    assert env.simulator.starts == starts + 1
    env.simulator.env._gateway.java_process.kill()  # dies between tasks: the next start retries on a new JVM
    observation, _, _ = _play(env, env.task(dev30[2]), "print(act('look around'))")
    assert "This " in observation.output
    assert env.simulator.starts == starts + 2


@pytest.mark.slow
def test_a_new_episode_takes_the_simulator_from_an_open_one(env: ScienceWorldEnv) -> None:
    dev30 = env.streams["dev30"]
    first = env.start(env.task(dev30[0]))
    second = env.start(env.task(dev30[1]))
    try:
        stale = first.step("print(act('look around'))")
        assert stale.error
        assert "no longer available" in stale.output
        assert "This " in second.step("print(look())").output
    finally:
        first.close()
        second.close()


def test_the_agent_cannot_reach_the_simulator(env: ScienceWorldEnv) -> None:
    """The agent's worker has java on PATH but not the benchmark's jar, nor a connection to the harness's JVM."""
    task = env.task(env.streams["dev30"][0])
    import scienceworld

    jar = str(Path(scienceworld.__file__).with_name("scienceworld.jar"))
    episode = env.start(task)
    try:
        port = env.simulator.env._gateway.gateway_parameters.port
        code = (f"import os, socket\nprint('jar', os.path.exists({jar!r}))\n"
                "try:\n    from scienceworld import ScienceWorldEnv\n    print('imported')\n"
                "except Exception as e:\n    print('import', type(e).__name__)\n"
                f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('connected')\n"
                "except Exception as e:\n    print('connect', type(e).__name__)\n")
        output = episode.step(code).output
    finally:
        episode.close()
    assert "jar False" in output or "PermissionError" in output
    assert "imported" not in output
    assert "connected" not in output


# ------------------------------------------------------------------------------------------ gold and nothing
def test_gold_paths_score_one_through_the_stubs(env: ScienceWorldEnv) -> None:
    for task_id in env.streams["starter"][:2]:
        task = env.task(task_id)
        observation, score, _ = _play(env, task, env.reference_solution(task))
        assert (observation.done, score.reward, score.success) == (True, 1.0, True), (task.id, score.checks)


@pytest.mark.slow
def test_every_dev30_gold_path_scores_one(env: ScienceWorldEnv) -> None:
    for task_id in env.streams["dev30"]:
        task = env.task(task_id)
        observation, score, _ = _play(env, task, env.reference_solution(task))
        assert (observation.done, score.reward, score.success) == (True, 1.0, True), (task.id, score.checks)


@pytest.mark.slow
def test_live_gold_paths_score_one(env: ScienceWorldEnv) -> None:
    """Gold paths generated now by the simulator (not the bundled ones) succeed through the stubs too."""
    short = sorted(env.tasks("test"), key=lambda t: t.metadata["gold_length"])
    picked = {}
    for task in short:
        picked.setdefault(task.metadata["task_id"].split("-")[0], task)  # the shortest of each task group
    for task in picked.values():
        v = env.variation(task)
        env.simulator.load(v.task_type, v.variation, gold=True)
        gold = env.simulator.gold_actions()
        observation, score, _ = _play(env, task, f"for a in {gold!r}:\n    print(act(a))")
        assert (score.reward, score.success) == (1.0, True), (task.id, score.checks)


@pytest.mark.slow
def test_doing_nothing_fails_every_task_type_whose_gold_path_succeeds(env: ScienceWorldEnv) -> None:
    by_type = _by_type(env, "test")
    assert len(by_type) == 30
    for tasks in by_type.values():
        observation, score, _ = _play(env, tasks[0], "complete_task()")
        assert (observation.done, score.success) == (True, False), tasks[0].id
        assert score.reward < 1, tasks[0].id
        observation, score, _ = _play(env, tasks[0], env.reference_solution(tasks[0]))
        assert (observation.done, score.reward, score.success) == (True, 1.0, True), (tasks[0].id, score.checks)


def test_doing_nothing_fails(env: ScienceWorldEnv) -> None:
    task = env.task(env.streams["dev30"][0])
    observation, score, _ = _play(env, task, "complete_task()")
    assert observation.done
    assert (score.reward, score.success) == (0.0, False)
    assert "submitted with complete_task" in score.checks[0].detail


def test_registry_lists_the_env(env: ScienceWorldEnv) -> None:
    summary = registry.summarize("scienceworld")
    assert summary.available
    assert summary.total == len(env.tasks())
    assert summary.streams["dev30"] == len(env.streams["dev30"])
    assert shutil.which("java") is not None
