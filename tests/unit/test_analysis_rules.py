"""Blazes coordination analysis: the rules on the paper's cases, every example DAG, real runs of the
word-count examples, and ``airflow-epochs analyze`` run for real.

(The server-free tests of system/test_analyze.py.)"""

from __future__ import annotations

import pytest

from airflow_epochs.analysis.labels import (
    ASYNC,
    TAINT,
    PathLabel,
    StreamLabel,
    combine,
    compatible,
    seal,
    transfer,
)
from airflow_epochs.analysis.rules import Component, analyse
from airflow_epochs.coordination.base.errors import InvalidInput


def word_count(source: StreamLabel):
    """The paper's Storm word count: Splitter (CR) -> Count (OW on word and batch) -> Commit (CW)."""
    return analyse(
        [Component("splitter", (PathLabel.of("CR"),)),
         Component("count", (PathLabel.of("OW", ("word", "batch")),)),
         Component("commit", (PathLabel.of("CW"),))],
        [("splitter", "count"), ("count", "commit")],
        source=source, preferred_keys=("batch",),
    )


def test_word_count_with_async_input_reduces_to_taint():
    result = word_count(ASYNC)
    assert [str(c.output) for c in result.components] == ["Async", "Taint", "Taint"]
    assert result.output == TAINT
    [finding] = result.under
    assert finding.component == "count" and finding.missing == "Seal[batch]"
    assert result.report("count").verdict == "seal on batch: MISSING"
    assert not result.over


def test_word_count_sealed_on_batch_reduces_to_deterministic_output():
    result = word_count(seal("batch"))
    assert [str(c.input) for c in result.components] == ["Seal[batch]", "Seal[batch]", "Async"]
    assert [str(c.output) for c in result.components] == ["Seal[batch]", "Async", "Async"]
    assert result.output == ASYNC and result.output.deterministic
    assert result.report("count").verdict == "seal on batch: present"
    assert not result.under and not result.over


def test_a_taint_path_merging_with_an_async_path_gives_taint():
    result = analyse(
        [Component("tainted", (PathLabel.of("OW", ("k",)),)),          # Async into OW: Taint
         Component("clean", (PathLabel.of("CR"),)),                      # Async stays Async
         Component("merge", (PathLabel.of("CW"),))],
        [("tainted", "merge"), ("clean", "merge")],
    )
    assert str(result.report("tainted").output) == "Taint" and str(result.report("clean").output) == "Async"
    assert result.report("merge").input == TAINT and result.output == TAINT
    # the merge rule itself: Taint dominates, Async is the weakest, seals need every contributor
    ndread = StreamLabel("NDRead", gate=frozenset({"k"}))
    assert combine([ASYNC, TAINT]) == TAINT and combine([TAINT, ndread]) == TAINT
    assert combine([ASYNC, ndread]) == ndread
    assert combine([seal("a"), ASYNC]) == ASYNC
    assert combine([seal("a"), seal("b")]) == seal("a", "b")


def test_a_gate_not_covered_by_the_seal_needs_global_order():
    result = analyse([Component("count", (PathLabel.of("OW", ("word",)),))], [], source=seal("batch"))
    report = result.report("count")
    assert report.paths[0].need == "order" and report.verdict == "global order: MISSING"
    assert report.output == TAINT
    [finding] = result.under
    assert finding.missing == "global order" and "Seal[batch] does not cover its gate [word]" in finding.message
    # the same path, ordered, is fine; sealed on a key inside the gate, it needs only the seal
    ordered = analyse([Component("count", (PathLabel.of("OW", ("word",)),), ordered_by="a lock")], [],
                      source=seal("batch"))
    assert ordered.report("count").verdict == "global order: present (a lock)" and not ordered.under
    assert compatible(frozenset({"batch"}), frozenset({"batch", "word"}))
    assert not compatible(frozenset({"batch"}), frozenset({"word"})) and not compatible(frozenset(), None)


def test_transfer_rules_through_each_kind_of_path():
    nd = StreamLabel("NDRead", gate=frozenset({"g"}))
    assert transfer(seal("k"), PathLabel.of("CR")) == seal("k")           # a confluent path forwards a seal
    assert transfer(ASYNC, PathLabel.of("CW")) == ASYNC
    assert transfer(ASYNC, PathLabel.of("OR", ("g",))) == nd
    assert transfer(ASYNC, PathLabel.of("OW", ("g",))) == TAINT
    assert transfer(nd, PathLabel.of("CW")) == TAINT                       # stored nondeterministic reads
    assert transfer(nd, PathLabel.of("CR")) == nd
    assert transfer(ASYNC, PathLabel.of("OW", ("g",)), ordered=True) == ASYNC
    assert transfer(TAINT, PathLabel.of("CR")) == TAINT


def test_an_unlabelled_component_needs_global_order_and_a_lock_over_a_sealed_input_is_over_coordination():
    unlabelled = analyse([Component("mystery", (PathLabel("OW", None),), labelled=False)], [], source=seal("day"))
    assert unlabelled.unlabelled == ("mystery",) and unlabelled.under[0].missing == "global order"
    locked = analyse([Component("load", (PathLabel.of("OW", ("day", "store")),), ordered_by="a global lock",
                                synchronises="lock")], [], source=seal("day"))
    assert not locked.under and "takes a global lock, but its input is already Seal[day]" in locked.over[0].message
    unsealed = analyse([Component("load", (PathLabel.of("OW", ("day", "store")),), ordered_by="a global lock",
                                  synchronises="lock")], [])
    assert not unsealed.under and not unsealed.over  # no seal to rely on: the lock is what makes it right


@pytest.mark.parametrize("bad", [
    lambda: PathLabel.of("XW"),
    lambda: PathLabel.of("CR", ("k",)),
    lambda: PathLabel.of("OW", "carrier"),
    lambda: PathLabel.of("OW", ("bad name",)),
    lambda: analyse([Component("a", (PathLabel.of("CR"),))], [("a", "b")]),
    lambda: analyse([Component("a", (PathLabel.of("CR"),)), Component("b", (PathLabel.of("CR"),))],
                    [("a", "b"), ("b", "a")]),
])
def test_bad_input_is_refused_naming_the_value(bad):
    with pytest.raises(InvalidInput) as caught:
        bad()
    assert any(word in str(caught.value) for word in ("'XW'", "takes no gate", "'carrier'", "'bad name'", "'b'",
                                                      "cycle"))


def test_blazes_label_works_on_classic_operators_and_task_calls_and_refuses_bad_labels():
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, task

    from airflow_epochs.analysis import LABEL_ATTRIBUTE, analyse_dag, blazes_label

    with DAG("labels", schedule=None) as dag:
        @task
        def total(values: list[int]) -> int:
            return sum(values)

        start = EmptyOperator(task_id="start")
        called = total([1, 2])
        assert blazes_label(called, "OW", gate=("day",), path="sum") is called
        blazes_label(called, "OR", gate=(), path="sum")           # the same path again replaces it
        blazes_label(called, "CW", path="log")
        start >> called
        for args, kwargs, needle in (
            (("XW",), {}, "'XW'"),
            (("OW",), {}, "needs a gate"),
            (("CR", ("day",)), {}, "takes no gate"),
            (("CR",), {"coordination": "mutex"}, "'mutex'"),
            (("CR",), {"seals": "day"}, "'day'"),
        ):
            with pytest.raises(InvalidInput, match=needle):
                blazes_label(start, *args, **kwargs)
        with pytest.raises(InvalidInput, match="needs an Airflow task"):
            blazes_label("start", "CR")
    assert getattr(called.operator, LABEL_ATTRIBUTE)["paths"] == [{"kind": "OR", "gate": [], "name": "sum"},
                                                                  {"kind": "CW", "gate": None, "name": "log"}]
    result = analyse_dag(dag).analysis
    assert result.report("start").component.label_text == "CR"  # EmptyOperator comes labelled
    assert result.report("total").component.label_text == "OR[](sum) CW(log)"
    assert result.report("total").verdict == "global order: MISSING" and result.unlabelled == ()


def test_a_quorum_barrier_does_not_seal_and_its_consumer_is_under_coordinated():
    from airflow.sdk import DAG, task

    from airflow_epochs.analysis import analyse_dag, blazes_label
    from airflow_epochs.operators import ArriveAtBarrierOperator, OpenEpochOperator, VotePartitionOperator
    from airflow_epochs.sensors import BarrierSensor

    def build(policy: dict) -> object:
        with DAG(f"barrier_{policy['policy']}", schedule=None) as dag:
            opener = OpenEpochOperator(task_id="open", pipeline="p")
            vote = VotePartitionOperator(task_id="vote", partition="a", producer="a", attempt_task_id="open")
            arrive = ArriveAtBarrierOperator(task_id="arrive", barrier="b", participant="a", wait=False,
                                             attempt_task_id="open", **policy)
            barrier = BarrierSensor(task_id="barrier", barrier="b", attempt_task_id="open")

            @task
            def summary() -> None:
                return None

            summarise = blazes_label(summary(), "OR", gate=("epoch",))
            opener >> vote >> arrive >> barrier >> summarise
        return analyse_dag(dag).analysis

    full = build({"policy": "fail"})
    assert str(full.report("barrier").output) == "Seal[epoch]" and not full.under
    assert [f.component for f in full.over] == ["barrier"]
    quorum = build({"policy": "quorum", "quorum": 1})
    assert str(quorum.report("barrier").output) == "NDRead[]" and not quorum.over
    assert [(f.component, f.missing) for f in quorum.under] == [("barrier", "global order"),
                                                                 ("summary", "Seal[epoch]")]


def test_epoch_order_covers_tasks_before_the_votes_but_not_an_unsealed_external_read():
    from airflow.sdk import DAG, task

    from airflow_epochs.analysis import analyse_dag, blazes_label, epoch_order_regions
    from airflow_epochs.operators import CloseEpochOperator, OpenEpochOperator, SparkEpochOperator

    with DAG("regions", schedule=None) as dag:
        opener = OpenEpochOperator(task_id="open", pipeline="p")

        @task
        def prepare() -> None:
            return None

        @task
        def after_close() -> None:
            return None

        before = prepare()
        job = SparkEpochOperator(task_id="job", application="job.py", partition="a", storage="/tmp/x",
                                 attempt_task_id="open", inputs={"raw": "/raw/{epoch}"})
        blazes_label(job, "OR", gate=("epoch", "k"))
        close = CloseEpochOperator(task_id="close", attempt_task_id="open")
        late = after_close()
        opener >> before >> job >> close >> late
    assert epoch_order_regions(dag) == {"prepare": "open", "job": "open"}
    result = analyse_dag(dag).analysis
    assert result.report("prepare").verdict == "global order: present (epoch order (open))"
    assert result.report("after_close").verdict == "global order: MISSING"  # after the seal: not ordered
    # the raw input lands outside the DAG and nothing says it is complete
    assert [(f.component, f.missing) for f in result.under] == [("job", "Seal[epoch]"), ("after_close", "global order")]
    # each day's raw file lands atomically: each ordered step then reads a complete epoch
    blazes_label(job, "OR", gate=("epoch", "k"), input_seal=("epoch",))
    assert analyse_dag(dag).analysis.report("job").verdict.startswith(
        "global order: present (ordered submission (epoch e-1 sealed first))")


