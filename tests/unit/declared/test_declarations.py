"""Declared producers' declarations, without a server: bad input is refused naming the value, and a
declaration round-trips through the stored config and maps keys to epochs."""

from __future__ import annotations

import pytest
from declared_sales import DECLARED

from airflow_epochs.coordination import InvalidConfig, InvalidInput, PipelineConfig
from airflow_epochs.coordination.wire.declared import (
    AssetProducer,
    DeclaredProducers,
    ExplicitKeys,
    Match,
    TaskProducer,
)


def test_declaration_round_trips_and_maps_keys():
    config = DECLARED.pipeline_config()
    assert config.partitions == {"sales": ("eu", "us", "returns")}
    again = PipelineConfig.from_json(config.to_json())
    assert again == config and again.declared == DECLARED
    assert DECLARED.keys.epoch_of("2026-01-03") == 3
    assert DECLARED.keys.epoch_of("2026-01-03T05:00:00+00:00") == 3
    assert ExplicitKeys({"eu-q1": 1, "eu-q2": 2}).epoch_of("eu-q2") == 2
    matches = DECLARED.matches("prod_returns", "anything", [("file:///data/returns", "2026-01-02")])
    assert matches == [Match("sales", "returns", "2026-01-02")]
    assert DECLARED.matches("prod_other", "load", [("file:///data/returns", "2026-01-02")]) == []
    assert DECLARED.matches("prod_eu", "load", [("file:///x", "k")]) == [Match("sales", "eu", "k")]


@pytest.mark.parametrize(("build", "message"), [
    (lambda: TaskProducer("a b", "load"), "dag_id must be a non-empty Airflow id without spaces, not 'a b'"),
    (lambda: AssetProducer("r", "file:///r", ()), "asset producer 'r': name at least one DAG"),
    (lambda: ExplicitKeys({"a": 1, "b": 1}), "keys 'a' and 'b' both map to epoch 1"),
    (lambda: ExplicitKeys({"a": 0}), "epoch of key 'a' 0 is outside"),
    (lambda: DeclaredProducers({"sales": (TaskProducer("d", "t"), TaskProducer("d", "t"))},
                               ExplicitKeys({"k": 1})), "declares producer name(s) ['d.t'] more than once"),
    (lambda: PipelineConfig({"sales": ("eu",)}, declared=DECLARED), "declared producers ['eu', 'returns', 'us'] "
                                                                      "differ from its producers ['eu']"),
    (lambda: PipelineConfig({"other": ("eu",)}, declared=DECLARED), "declared partition 'sales' is not one of"),
])
def test_bad_declarations_are_refused_naming_the_value(build, message):
    with pytest.raises(InvalidConfig) as refused:
        build()
    assert message in str(refused.value)


def test_bad_keys_are_refused_naming_the_key():
    with pytest.raises(InvalidInput, match="partition key 'yesterday' is neither a date nor an ISO datetime"):
        DECLARED.keys.epoch_of("yesterday")
    with pytest.raises(InvalidInput, match="partition key 'q3' is not in the pipeline's key table"):
        ExplicitKeys({"q1": 1}).epoch_of("q3")


