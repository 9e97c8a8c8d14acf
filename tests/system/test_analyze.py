"""Blazes coordination analysis: the rules on the paper's cases, every example DAG, real runs of the
word-count examples, and ``airflow-epochs analyze`` run for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from airflow_epochs.analysis.labels import (
    ASYNC,
    PathLabel,
    StreamLabel,
)
from airflow_epochs.analysis.rules import Component, analyse

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
CLI = str(Path(sys.executable).parent / "airflow-epochs")
UNDER = DAGS / "example_under_coordinated.py"
# plain producer DAGs of the declared-producers example: unlabelled on purpose (nothing of the provider in them)
PLAIN_PRODUCERS = DAGS / "example_declared_producers.py"
PLAIN_PRODUCER_DAGS = ("example_sales_eu", "example_sales_us", "example_returns")


def word_count(source: StreamLabel):
    """The paper's Storm word count: Splitter (CR) -> Count (OW on word and batch) -> Commit (CW)."""
    return analyse(
        [Component("splitter", (PathLabel.of("CR"),)),
         Component("count", (PathLabel.of("OW", ("word", "batch")),)),
         Component("commit", (PathLabel.of("CW"),))],
        [("splitter", "count"), ("count", "commit")],
        source=source, preferred_keys=("batch",),
    )


# -- the rules, on the paper's cases -------------------------------------------------------------















# -- the DAG walker, on DAGs built here -----------------------------------------------------------







# -- every example DAG ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def examples():
    from airflow_epochs.analysis import analyse_dag, load_dags

    return {dag.dag_id: analyse_dag(dag) for dag in load_dags(str(DAGS))}


def test_every_example_dag_is_analysed_and_only_the_deliberate_one_is_under_coordinated(examples):
    files = {path.name for path in DAGS.glob("*.py")}
    assert {Path(r.fileloc).name for r in examples.values()} == files
    under = {dag_id for dag_id, r in examples.items() if r.analysis.under}
    # ... and the plain producers of the declared-producers example, unlabelled on purpose (nothing of
    # the provider is in them), so the analysis cannot know what order their loads need
    assert under == {"example_under_coordinated", *PLAIN_PRODUCER_DAGS}


def test_example_verdicts_match_what_the_dags_do(examples):
    smoke = examples["example_epoch_smoke"].analysis
    assert smoke.report("open_epoch").verdict.startswith("global order: present (the ledger")
    assert {c.name: c.verdict for c in smoke.components if c.name != "open_epoch"} == dict.fromkeys(
        ["vote_flights", "vote_weather", "close_epoch"], "no coordination")
    assert str(smoke.report("vote_flights").output) == "Seal[epoch]" and not smoke.over

    for dag_id in ("example_epoch_pipeline", "nycflights_daily"):
        pipeline = examples[dag_id].analysis
        # the producers vote (seal) before they arrive: the barrier adds nothing a seal does not give
        assert str(pipeline.report("epoch.barrier").input) == "Seal[epoch]"
        assert [f.component for f in pipeline.over] == ["epoch.barrier"]
    stand_ins = examples["example_epoch_pipeline"].analysis
    assert stand_ins.unlabelled == ("epoch.ingest_flights_work", "epoch.ingest_weather_work")
    assert stand_ins.report("epoch.ingest_flights_work").verdict == "global order: present (epoch order (epoch.open))"

    nyc = examples["nycflights_daily"].analysis
    assert nyc.report("epoch.hourly_weather").verdict == "seal on epoch: present"
    join = {p.path.name: p for p in nyc.report("epoch.join").paths}
    assert join["daily"].text == "seal on epoch: present"
    assert join["totals"].text == "global order: present (ordered submission (epoch e-1 sealed first))"

    for dag_id, task_id in (("downstream_on_sealed_asset", "report"), ("downstream_with_sensor", "report_after_seal"),
                            ("nycflights_report", "report")):
        assert examples[dag_id].analysis.report(task_id).verdict == "seal on epoch: present", dag_id
    assert str(examples["nycflights_report"].source) == "Seal[epoch]"  # scheduled on the sealed partition

    word_count = examples["example_word_count"].analysis
    assert [str(c.output) for c in word_count.components] == ["Seal[epoch]", "Seal[epoch]", "Async", "Async"]
    assert word_count.output == ASYNC
    unsealed = examples["example_under_coordinated"].analysis
    assert [str(c.output) for c in unsealed.components] == ["Async", "NDRead[epoch, word]", "Taint"]
    assert [(f.component, f.missing) for f in unsealed.under] == [("count", "Seal[epoch]")]


@pytest.mark.integration
def test_sealed_word_count_runs_after_the_seal_and_counts_the_whole_epoch(dagbag, zk_connection, zk, tmp_path,
                                                                          monkeypatch):
    from airflow_epochs.coordination import EpochLedger, PipelineConfig

    monkeypatch.setenv("AIRFLOW_EPOCHS_DATA", str(tmp_path / "data"))

    tweets = tmp_path / "data" / "tweets" / "tweets-1.txt"
    tweets.parent.mkdir(parents=True)
    tweets.write_text("The cat sat\nthe dog sat\n")
    ledger = EpochLedger(zk, "tweets", owner="producer")
    ledger.create_pipeline(PipelineConfig({"tweets": ("landing",)}))
    sealed_at: list[float] = []

    def seal_later() -> None:
        time.sleep(1.5)
        ledger.vote(ledger.open_epoch(1), "tweets", "landing", {"path": str(tweets)})
        sealed_at.append(time.monotonic())

    helper = threading.Thread(target=seal_later)
    helper.start()
    # A path in the run's parameters is not where anything goes: the deployment's data folder is.
    run = dagbag.get_dag("example_word_count").test(run_conf={"epoch": 1, "counts": str(tmp_path / "chosen")})
    finished = time.monotonic()
    helper.join()
    assert "success" in str(run.state)
    assert sealed_at and finished >= sealed_at[0]
    committed = tmp_path / "data" / "word_counts" / "epoch=1.json"
    assert json.loads(committed.read_text()) == {"the": 2, "cat": 1, "dog": 1, "sat": 2}
    assert not (tmp_path / "chosen").exists()


@pytest.mark.integration
def test_word_count_reads_nothing_outside_its_data_root_whatever_a_manifest_names(dagbag, zk_connection, zk,
                                                                                 tmp_path, monkeypatch):
    """Issue 35, item 9: a sealed manifest naming a root-only file had its words end in a 0644 output.
    Forged seals name such a file directly, by a climb, and through a link another local user planted
    in a shared landing folder: each run fails naming the path, and commits nothing."""
    from intruder import second_user, shared_folder

    from airflow_epochs.coordination import EpochLedger, PipelineConfig

    secret = tmp_path / "root-only.txt"
    secret.write_text("hunter2 swordfish\n")
    secret.chmod(0o600)
    ledger = EpochLedger(zk, "tweets", owner="producer")
    ledger.create_pipeline(PipelineConfig({"tweets": ("landing",)}))
    with second_user() as intruder, shared_folder() as shared:
        data = shared / "data"
        monkeypatch.setenv("AIRFLOW_EPOCHS_DATA", str(data))
        landing = data / "tweets"
        landing.mkdir(parents=True)
        os.chmod(landing, 0o1777)  # a shared landing folder, sticky like /tmp
        intruder.run(["ln", "-s", str(secret), str(landing / "planted.txt")])
        forged = {1: str(secret), 2: f"{landing}/../../root-only.txt", 3: str(landing / "planted.txt")}
        for epoch, path in forged.items():
            ledger.vote(ledger.open_epoch(epoch), "tweets", "landing", {"path": path})
            run = dagbag.get_dag("example_word_count").test(run_conf={"epoch": epoch})
            assert "failed" in str(run.state), (epoch, path)
            states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
            assert "success" in states["sealed_tweets"] and "failed" in states["split"], states
            assert not (data / "word_counts" / f"epoch={epoch}.json").exists()
    assert secret.read_text() == "hunter2 swordfish\n"


@pytest.mark.integration
def test_under_coordinated_word_count_commits_whatever_had_landed(dagbag, tmp_path):
    """What the analysis calls Taint, for real: two runs of the same epoch commit different counts,
    depending only on when they ran."""
    landing = tmp_path / "landing"
    (landing / "epoch=1").mkdir(parents=True)
    (landing / "epoch=1" / "a.txt").write_text("the cat\n")
    dag = dagbag.get_dag("example_under_coordinated")
    conf = {"epoch": 1, "landing": str(landing), "counts": str(tmp_path / "counts")}
    committed = tmp_path / "counts" / "epoch=1.json"
    assert "success" in str(dag.test(run_conf=conf).state)
    early = json.loads(committed.read_text())
    (landing / "epoch=1" / "b.txt").write_text("the dog\n")  # the rest of the epoch lands later
    assert "success" in str(dag.test(run_conf=conf).state)
    assert early == {"the": 1, "cat": 1} and json.loads(committed.read_text()) == {"the": 2, "cat": 1, "dog": 1}


# -- reports ---------------------------------------------------------------------------------------

def test_benchmark_figure_is_read_from_the_file_never_assumed(tmp_path):
    from airflow_epochs.analysis.report import benchmark_sentence, find_bench_file, sealing_figure

    assert sealing_figure(tmp_path / "missing.json") is None
    assert "not measured on this machine" in benchmark_sentence(None)
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert find_bench_file([tmp_path / "a" / "b"]) is None
    bench = tmp_path / ".epochs" / "bench.json"
    bench.parent.mkdir()
    bench.write_text(json.dumps({"machine": {"mode": "full"}, "rows": [
        {"id": "sealing_eps_p8", "ours": 6.8, "peer": 7.6},
        {"id": "sealing_eps_p64", "ours": 0.5, "peer": 0.25},
        {"id": "wake_p50", "ours": 3.6, "peer": 10700},
    ]}))
    assert find_bench_file([tmp_path / "a" / "b"]) == bench  # the nearest one, in a parent folder
    figure = sealing_figure(bench)
    assert figure is not None and (figure.producers, figure.sealing, figure.lock) == (64, 0.5, 0.25)
    assert figure.ratio == 2.0 and "2.00x the lock's throughput" in figure.sentence()
    legacy = tmp_path / "old.json"  # before rows had ids: the measure's name
    legacy.write_text(json.dumps({"rows": [{"measure": "epochs sealed per second, 4 producers", "ours": 3.0,
                                            "peer": 6.0}]}))
    slower = sealing_figure(legacy)
    assert slower is not None and slower.producers == 4 and "sealing is slower" in slower.sentence()


def test_dot_and_png_drawings(examples, tmp_path):
    from airflow_epochs.analysis.report import render_dot, render_png

    word_count = examples["example_word_count"]
    dot = render_dot([word_count])
    assert dot.startswith("digraph blazes {") and dot.rstrip().endswith("}")
    assert '"split" -> "count" [label="Seal[epoch]"];' in dot
    assert '"count" -> "commit" [label="Async"];' in dot
    assert '"(input)" -> "sealed_tweets" [label="Async"];' in dot
    assert 'label="count\\nOR[epoch, word]\\nseal on epoch: present"' in dot
    both = render_dot([word_count, examples["example_under_coordinated"]])
    assert both.count("subgraph") == 2 and '"example_under_coordinated/count"' in both
    picture = tmp_path / "wc.png"
    render_png([word_count, examples["nycflights_daily"]], picture)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000


# -- the command, run for real ---------------------------------------------------------------------

def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "analyze", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_passes_every_example_and_cites_the_measured_ratio(examples, tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"machine": {"mode": "full"}, "rows": [
        {"id": "sealing_eps_p64", "ours": 0.34, "peer": 0.92}]}))
    files = sorted(str(p) for p in DAGS.glob("*.py") if p not in (UNDER, PLAIN_PRODUCERS))
    result = _cli(*files, "--bench", str(bench))
    assert result.returncode == 0, result.stderr[-2000:]
    for dag_id in set(examples) - {"example_under_coordinated", *PLAIN_PRODUCER_DAGS}:
        assert f"DAG {dag_id} (" in result.stdout
    warned, dag = [], None  # the DAG each warning is said under (the lines after its "DAG ..." line)
    warnings = []
    for line in result.stdout.splitlines():
        if line.startswith("DAG "):
            dag = line.split()[1]
        elif line.startswith("over-coordination epoch.barrier"):
            warned.append(dag)
            warnings.append(line)
    # the main example's barrier after sealed inputs, in both its forms, and the epoch pipeline's
    assert warned == ["example_epoch_pipeline", "nycflights_daily", "nycflights_taskflow"]
    assert all("sealing 0.34 epochs/s against 0.92 epochs/s under one global ZooKeeper lock with 64 producers, "
               "0.37x" in line for line in warnings)


def test_cli_exits_1_on_the_under_coordinated_example_naming_task_and_seal():
    result = _cli(str(UNDER))
    assert result.returncode == 1
    assert "under-coordination: task 'count': missing Seal[epoch]" in result.stderr
    assert "seal on epoch: MISSING" in result.stdout and "dataflow output: Taint" in result.stdout


def test_cli_looks_a_dag_id_up_and_writes_json(tmp_path):
    out = tmp_path / "report.json"
    result = _cli("example_word_count", "--dags-folder", str(DAGS), "--format", "json", "--out", str(out),
                  "--bench", str(tmp_path / "none.json"))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    [dag] = report["dags"]
    assert dag["dag_id"] == "example_word_count" and dag["output"] == "Async" and not report["under_coordinated"]
    assert {(e["from"], e["to"], e["label"]) for e in dag["edges"]} == {
        ("sealed_tweets", "split", "Seal[epoch]"), ("split", "count", "Seal[epoch]"), ("count", "commit", "Async")}
    assert report["benchmark"] is None and "not measured on this machine" in report["over_coordination_reason"]
    assert "json written to" in result.stdout


@pytest.mark.parametrize("make, needles", [
    (lambda tmp: ["no_such_file.py"], ["no DAG file 'no_such_file.py'"]),
    (lambda tmp: [str(_bad_dag(tmp))], ["cannot load", "path label must be one of CR, CW, OR, OW, not 'XW'"]),
    # a DAG id looked up in a folder whose only file fails to import
    (lambda tmp: [_bad_dag(tmp).stem and "no_such_dag_id"], ["no DAG 'no_such_dag_id' in the DAGs folder",
                                                             "1 DAG file(s) failed to import", "'XW'"]),
    (lambda tmp: [str(DAGS / "example_epoch_smoke.py"), "--out", str(tmp / "missing" / "report.txt")],
     ["cannot write", "No such file or directory"]),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, make, needles):
    result = _cli(*make(tmp_path), "--dags-folder", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and all(n in result.stderr for n in needles), result.stderr


def _bad_dag(folder: Path) -> Path:
    path = folder / "bad_label.py"
    path.write_text(
        "from airflow.sdk import DAG\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "from airflow_epochs.analysis import blazes_label\n"
        "with DAG('bad_label', schedule=None):\n"
        "    blazes_label(EmptyOperator(task_id='e'), 'XW')\n"
    )
    return path
