"""bench/mainjob_rows.py: the main-job rows from a side's timeline (pure arithmetic; the figures themselves
come from ``bash scripts/bench.sh --only mainjob``)."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def mainjob_rows(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import common
    import mainjob_rows

    monkeypatch.setattr(common, "ROWS", [])
    return mainjob_rows, common


def test_an_interval_splits_into_spark_the_rest_of_its_tasks_and_the_gaps(mainjob_rows):
    rows, _ = mainjob_rows
    # day complete at 100; open deferred until 103, then two producers overlap (104-110 with a 4 s job,
    # 105-112 with a 3 s job), an arrival 112.5-113, the join 114-120 with a 5 s job
    spans = [(90.0, 103.0, "deferred"), *rows.spark_task(104.0, 110.0, 4.0), *rows.spark_task(105.0, 112.0, 3.0),
             (112.5, 113.0, "task"), *rows.spark_task(114.0, 120.0, 5.0)]
    split = rows.split_interval(100.0, 121.0, spans)
    # Spark 106-112 (the two jobs overlap from 109 to 110) and 115-120; the tasks' own work 104-106,
    # 112.5-113 and 114-115; the rest is orchestration
    assert split == {"spark": 6.0 + 5.0, "coordination": 2.0 + 0.5 + 1.0,
                     "orchestration": 3.0 + 1.0 + 0.5 + 1.0 + 1.0}
    assert sum(split.values()) == pytest.approx(21.0)


def test_a_job_longer_than_its_task_is_cut_to_the_task(mainjob_rows):
    rows, _ = mainjob_rows
    assert rows.spark_task(2.0, 4.0, 7.0) == [(2.0, 2.0, "task"), (2.0, 4.0, "spark")]
    split = rows.split_interval(0.0, 10.0, rows.spark_task(2.0, 4.0, 7.0))
    assert split == {"spark": 2.0, "coordination": 0.0, "orchestration": 8.0}


def test_a_side_counts_duplicates_and_missing_days_and_its_intervals(mainjob_rows):
    rows, _ = mainjob_rows
    side = rows.Side("airflow", 3, completions={1: 10.0, 2: 25.0, 3: 45.0}, downstream={1: 12.0, 3: 50.0},
                     outputs={1: 1, 2: 2}, reports={1: 1, 3: 1})
    assert side.intervals() == {2: 15.0, 3: 20.0}
    assert side.seal_to_downstream() == [2.0, 5.0]
    assert side.duplicates() == 1
    assert side.missing() == [2, 3]  # day 2 has no report, day 3 no output


def test_rows_compare_ours_with_each_peer_that_ran(mainjob_rows):
    rows, common = mainjob_rows
    day = {e: rows.spark_task(10.0 * e - 8, 10.0 * e - 1, 5.0) for e in (1, 2, 3)}
    ours = rows.Side("ours", 3, completions={1: 10.0, 2: 20.0, 3: 30.0}, downstream={1: 11.0, 2: 21.0, 3: 31.0},
                     spans=day, outputs={1: 1, 2: 1, 3: 1},
                     reports={1: 1, 2: 1, 3: 1}, zk_requests=300, peak_mb=900.0, cpu_s=60.0,
                     exact={1: True, 2: True, 3: True})
    peer = rows.Side("airflow", 3, completions={1: 10.0, 2: 40.0, 3: 70.0}, downstream={1: 15.0, 2: 45.0, 3: 75.0},
                     outputs={1: 1, 2: 1, 3: 1}, reports={1: 1, 2: 1, 3: 1}, peak_mb=800.0,
                     cpu_s=90.0, exact={1: True, 2: True, 3: False})
    rows.rows({"ours": ours, "airflow": peer}, "load average 1.0 to 2.0")
    found = {row.id: row for row in common.ROWS}
    assert found["mainjob_catchup_epoch_s[airflow]"].ours == 10.0
    assert found["mainjob_catchup_epoch_s[airflow]"].peer == 30.0
    assert found["mainjob_seal_to_downstream_s[airflow]"].advantage == 5.0
    assert found["mainjob_path_spark_s[airflow]"].ours == 5.0
    assert found["mainjob_days_exact[airflow]"].ours == pytest.approx(2 / 3)
    assert found["mainjob_zk_requests_per_epoch"].ours == 100.0
    cpu = found["mainjob_cpu_s_per_epoch[airflow]"]
    assert (cpu.ours, cpu.peer) == (20.0, 30.0)
    assert not any(key.endswith("[dagster]") for key in found)


def test_the_kill_scenario_rows_show_each_sides_own_failures(mainjob_rows):
    rows, common = mainjob_rows
    ours = rows.Side("ours", 2, outputs={1: 1, 2: 1}, reports={1: 1, 2: 1}, exact={1: True, 2: True},
                     writes={1: 1, 2: 1}, fault="killed the task process of day 2's join (pid 7) mid-job")
    # the peer's killed job went on writing beside its retry: day 2's folder holds two writes' files
    airflow = rows.Side("airflow", 2, outputs={1: 1, 2: 1}, reports={1: 1, 2: 1}, exact={1: True, 2: False},
                        writes={1: 1, 2: 2})
    dagster = rows.Side("dagster", 2, outputs={1: 1}, reports={1: 1}, exact={1: True}, writes={1: 1},
                        fault="backfill ended COMPLETED_FAILED")
    rows.fault_rows({"ours": ours, "airflow": airflow, "dagster": dagster}, {}, "load average 1.0 to 2.0")
    found = {row.id: row for row in common.ROWS}
    assert [found[f"mainjob_kill_days_exact[{s}]"].ours for s in ("ours", "airflow", "dagster")] == [1.0, 0.5, 0.5]
    assert [found[f"mainjob_kill_duplicate_outputs[{s}]"].ours for s in ("ours", "airflow", "dagster")] == [0, 1, 0]
    assert [found[f"mainjob_kill_missing_days[{s}]"].ours for s in ("ours", "airflow", "dagster")] == [0, 0, 1]
    assert "COMPLETED_FAILED" in found["mainjob_kill_days_exact[dagster]"].note


def test_a_failed_side_still_gets_its_kill_row(mainjob_rows):
    rows, common = mainjob_rows
    rows.fault_rows({}, {"airflow": "RuntimeError: failed runs"}, "load")
    [row] = common.ROWS
    assert row.id == "mainjob_kill_days_exact[airflow]" and row.ours == 0.0 and "failed runs" in row.note


def test_output_writes_counts_the_spark_jobs_whose_files_are_there(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCH))
    from mainjob_faults import output_writes

    one, two = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4"
    data = tmp_path / "data"
    data.mkdir()
    assert output_writes(str(tmp_path / "missing")) == 0
    for name in (f"part-00000-{one}-c000.snappy.parquet", f"part-00001-{one}-c000.snappy.parquet", "_SUCCESS"):
        (data / name).write_bytes(b"x")
    assert output_writes(str(data)) == 1
    (data / f"part-00000-{two}-c000.snappy.parquet").write_bytes(b"x")
    assert output_writes(str(data)) == 2


def test_the_two_deployments_rows_count_a_day_produced_twice(mainjob_rows):
    rows, common = mainjob_rows
    ours = rows.Side("ours", 2, outputs={1: 1, 2: 1}, reports={1: 1, 2: 1}, exact={1: True, 2: True})
    airflow = rows.Side("airflow", 2, outputs={1: 2, 2: 2}, reports={1: 2, 2: 2}, exact={1: True, 2: True})
    rows.fault_rows({"ours": ours, "airflow": airflow}, {}, "load", scenario="two")
    found = {row.id: row for row in common.ROWS}
    assert found["mainjob_two_duplicate_outputs[ours]"].ours == 0
    assert found["mainjob_two_duplicate_outputs[airflow]"].ours == 4  # each day's figures and report twice
    assert "two deployments at once" in found["mainjob_two_days_exact[airflow]"].measure


def test_a_run_in_another_order_gets_rows_of_its_own(mainjob_rows):
    rows, common = mainjob_rows
    assert rows.order_tag(("ours", "airflow", "dagster")) == ""
    assert rows.order_tag(("dagster", "airflow", "ours")) == "@ours-last"
    assert rows.order_tag(("airflow", "ours")) == "@ours-last"
    assert rows.order_tag(("dagster", "ours", "airflow")) == "@ours-second"
    side = {e: rows.spark_task(10.0 * e - 8, 10.0 * e - 1, 5.0) for e in (1, 2)}
    ours = rows.Side("ours", 2, completions={1: 10.0, 2: 20.0}, downstream={1: 11.0, 2: 21.0}, spans=side, cpu_s=10.0)
    peer = rows.Side("airflow", 2, completions={1: 10.0, 2: 30.0}, downstream={1: 12.0, 2: 32.0}, cpu_s=12.0)
    rows.rows({"ours": ours, "airflow": peer}, "load", ("airflow", "ours"))
    found = {row.id for row in common.ROWS}
    assert "mainjob_catchup_epoch_s[airflow@ours-last]" in found and "mainjob_catchup_epoch_s[airflow]" not in found
    common.ROWS.clear()
    rows.rows({"ours": ours, "airflow": peer}, "load", ("ours", "airflow"), stages="inline")
    found = {row.id for row in common.ROWS}  # ours' inline stages: rows beside the default form's, not over them
    assert "mainjob_catchup_epoch_s[airflow@inline]" in found and "mainjob_catchup_epoch_s[airflow]" not in found


def test_the_tasks_cpu_row_needs_both_sides_split(mainjob_rows):
    rows, common = mainjob_rows
    side = {e: rows.spark_task(10.0 * e - 8, 10.0 * e - 1, 5.0) for e in (1, 2)}
    ours = rows.Side("ours", 2, completions={1: 10.0, 2: 20.0}, downstream={1: 11.0, 2: 21.0}, spans=side,
                     cpu_s=30.0, cpu_parts={"tasks": 8.0, "scheduler": 4.0})
    peer = rows.Side("airflow", 2, completions={1: 10.0, 2: 30.0}, downstream={1: 12.0, 2: 32.0}, cpu_s=20.0,
                     cpu_parts={"tasks": 6.0})
    rows.rows({"ours": ours, "airflow": peer}, "load")
    found = {row.id: row for row in common.ROWS}
    assert (found["mainjob_task_cpu_s_per_epoch[airflow]"].ours, found["mainjob_task_cpu_s_per_epoch[airflow]"].peer) \
        == (4.0, 3.0)
