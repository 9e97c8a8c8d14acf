"""The pipeline an EpochGroup's tasks define, collected when the DAG is parsed (no server: the DAG files are
only executed, as Airflow's DAG processor does): the partitions, producers, barriers and reads of the
main example; a name changed in one place and not the other is a parse-time error naming both sides; what
inline stages leave of the DAG; and how a stored configuration differs from the DAG's, in words."""

from __future__ import annotations

import runpy
from pathlib import Path

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_epochs.coordination import PipelineConfig
from airflow_epochs.operators import EpochGroup, VotePartitionOperator
from airflow_epochs.operators.definition import DefinitionMismatch, differences

ROOT = Path(__file__).resolve().parents[2]
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _parse(path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> dict:
    monkeypatch.setenv("AIRFLOW_EPOCHS_DATA", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(path.parent))
    return runpy.run_path(str(path), run_name="parsed_dag")


def _edited(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    """A copy of a DAG file (beside its helpers) with one name changed in one place."""
    text = source.read_text()
    assert text.count(old) == 1, old
    copy = source.parent / f"_edited_{tmp_path.name}.py"  # in dags/: the jobs' folder is found beside it
    copy.write_text(text.replace(old, new))
    return copy


def test_the_main_example_defines_its_pipeline_from_its_tasks(monkeypatch, tmp_path):
    found = _parse(ROOT / "dags" / "nycflights_pipeline.py", monkeypatch, tmp_path)
    assert found["epoch"].pipeline_config.to_json() == {
        "partitions": {"flights": ["clean_flights"], "weather": ["hourly_weather"], "daily": ["join"]},
        "barriers": {"ingested": ["clean_flights", "hourly_weather"]}}
    source = (ROOT / "dags" / "nycflights_pipeline.py").read_text()
    assert "CONFIG" not in source and "REPRODUCE" not in source and len(source.splitlines()) <= 80
    definition = found["epoch"].definition
    assert definition.reads == {"flights": ["epoch.join"], "weather": ["epoch.join"]}
    assert sorted(t.task_id for t in found["dag"].tasks) == sorted(
        ["epoch.open", "epoch.clean_flights", "epoch.hourly_weather", "epoch.clean_flights_arrives",
         "epoch.hourly_weather_arrives", "epoch.barrier", "epoch.join", "epoch.close"])
    assert {a.name for a in found["dag"].get_task("epoch.close").outlets} == {
        f"epochs.nycflights.{p}" for p in ("flights", "weather", "daily")}


def test_a_producer_renamed_in_one_place_is_a_parse_time_error_naming_both_sides(monkeypatch, tmp_path):
    with DAG(dag_id="renamed", schedule=None, start_date=START), pytest.raises(DefinitionMismatch) as raised, \
            EpochGroup("epoch", pipeline="shop", config={"partitions": {"orders": ["orders_eu", "orders_us"]}}):
        VotePartitionOperator(task_id="orders_eu", partition="orders", producer="orders_eu")
        VotePartitionOperator(task_id="orders_us", partition="orders", producer="orders_usa")  # renamed here only
    message = str(raised.value)
    assert "EpochGroup 'epoch' of pipeline 'shop'" in message
    assert "task 'epoch.orders_us' is producer 'orders_usa'" in message
    assert "config partitions['orders'] has ['orders_eu', 'orders_us']" in message


def test_a_partition_renamed_in_the_taskflow_example_is_a_parse_time_error_naming_it(monkeypatch, tmp_path):
    edited = _edited(tmp_path, ROOT / "dags" / "nycflights_taskflow.py", 'partition="flights"', 'partition="flight"')
    try:
        with pytest.raises(DefinitionMismatch) as raised:
            _parse(edited, monkeypatch, tmp_path)
    finally:
        edited.unlink()
    assert ("task 'epoch.join' reads partition 'flights', which no task makes (partitions: ['daily', 'flight', "
            "'weather'])") in str(raised.value)


def test_a_barrier_participant_renamed_in_the_config_is_a_parse_time_error(monkeypatch, tmp_path):
    config = {"partitions": {"a": ["a"], "b": ["b"]}, "barriers": {"both": ["a", "bee"]}}
    with DAG(dag_id="barrier_renamed", schedule=None, start_date=START), pytest.raises(DefinitionMismatch) as raised, \
            EpochGroup("epoch", pipeline="p", config=config) as epoch:
        votes = [VotePartitionOperator(task_id=p, partition=p, producer=p) for p in ("a", "b")]
        epoch.barrier("both", votes) >> VotePartitionOperator(task_id="after", partition="a", producer="c")
    assert "task 'epoch.b_arrives' is participant 'b', config barriers['both'] has ['a', 'bee']" in str(raised.value)
    assert "task 'epoch.after' is producer 'c'" in str(raised.value)


def test_a_config_given_beside_the_tasks_keeps_its_settings_and_names_producers_outside_the_dag():
    config = {"partitions": {"orders": ["orders_eu", "from_elsewhere"]}, "window": 3}
    with DAG(dag_id="extra", schedule=None, start_date=START), \
            EpochGroup("epoch", pipeline="shop", config=config) as epoch:
        VotePartitionOperator(task_id="orders_eu", partition="orders", producer="orders_eu")
    assert epoch.pipeline_config.to_json() == {"partitions": {"orders": ["orders_eu", "from_elsewhere"]}, "window": 3}
    assert epoch.open.config == epoch.pipeline_config.to_json()
    # settings alone: the partitions are the tasks'
    with DAG(dag_id="settings", schedule=None, start_date=START), \
            EpochGroup("epoch", pipeline="shop", config={"window": 3}) as epoch:
        VotePartitionOperator(task_id="orders_eu", partition="orders", producer="orders_eu")
    assert epoch.pipeline_config.to_json() == {"partitions": {"orders": ["orders_eu"]}, "window": 3}


def test_two_tasks_that_vote_as_one_producer_are_refused_naming_both():
    with DAG(dag_id="twice", schedule=None, start_date=START), pytest.raises(DefinitionMismatch) as raised, \
            EpochGroup("epoch", pipeline="shop"):
        VotePartitionOperator(task_id="one", partition="orders", producer="loader")
        VotePartitionOperator(task_id="two", partition="orders", producer="loader")
    assert "tasks 'epoch.one' and 'epoch.two' both declare producer 'loader'" in str(raised.value)


def test_a_templated_name_needs_a_config_to_say_what_it_is():
    with DAG(dag_id="templated", schedule=None, start_date=START), pytest.raises(DefinitionMismatch, match="params"), \
            EpochGroup("epoch", pipeline="shop"):
        VotePartitionOperator(task_id="vote", partition="{{ params.partition }}", producer="loader")


def test_inline_stages_leave_only_the_work_tasks(monkeypatch, tmp_path):
    found = _parse(ROOT / "dags" / "nycflights_pipeline.py", monkeypatch, tmp_path, NYCFLIGHTS_STAGES="inline")
    dag, group = found["dag"], found["epoch"]
    assert sorted(t.task_id for t in dag.tasks) == ["epoch.clean_flights", "epoch.hourly_weather", "epoch.join"]
    flights, weather, join = (dag.get_task(f"epoch.{t}") for t in ("clean_flights", "hourly_weather", "join"))
    for first in (flights, weather):  # each opens (the run's one opening request) and arrives
        assert first.epoch_stage.opening is not None and first.epoch_stage.closes is None
        assert [(a.barrier, a.participant) for a in first.epoch_stage.arrivals] == [("ingested", first.producer)]
    assert join.epoch_stage.opening is None and join.epoch_stage.waits == ["ingested"]
    assert join.epoch_stage.attempt_from == "epoch.clean_flights"
    assert sorted(join.epoch_stage.closes) == ["daily", "flights", "weather"]
    assert {a.name for a in join.outlets} >= {"epochs.nycflights.daily"}
    assert group.pipeline_config.to_json()["barriers"] == {"ingested": ["clean_flights", "hourly_weather"]}


def test_inline_stages_refuse_a_first_task_that_cannot_open():
    from airflow.sdk import task

    with DAG(dag_id="plain_first", schedule=None, start_date=START), pytest.raises(DefinitionMismatch) as raised, \
            EpochGroup("epoch", pipeline="shop", inline_stages=True):

        @task
        def load() -> int:
            return 1

        VotePartitionOperator(task_id="vote", partition="orders", producer="load", manifest={"rows": load()})
    assert "['epoch.load'] is a first task of the group but not an epoch operator" in str(raised.value)


def test_a_stored_configuration_differs_from_the_dags_in_words():
    stored = PipelineConfig.from_json({"partitions": {"orders": ["eu"], "refunds": ["r"]},
                                       "barriers": {"in": ["eu"]}})
    defined = PipelineConfig.from_json({"partitions": {"orders": ["eu", "us"], "returns": ["r"]},
                                        "barriers": {"in": ["eu", "us"]}, "window": 2})
    assert differences(stored, defined) == [
        "partition 'returns' added (with producers ['r'])", "partition 'refunds' removed (had producers ['r'])",
        "partition 'orders': producers ['us'] added", "barrier 'in': participants ['us'] added", "window None -> 2"]
    assert differences(defined, defined) == []
    reordered = PipelineConfig.from_json({"partitions": {"orders": ["us", "eu"], "returns": ["r"]},
                                          "barriers": {"in": ["us", "eu"]}, "window": 2})
    assert differences(defined, reordered) == []
