"""Deliberately under-coordinated: the word count of ``example_word_count`` without the seal.

    split >> count >> commit

``split`` reads whatever tweet files of the epoch have landed so far in the landing folder; nothing
says the epoch is complete, so a run that starts while files are still landing counts part of the
epoch, and a retry may count more. ``count`` is order-sensitive within (epoch, word) but its input is
unsealed: its result depends on timing, and ``commit`` stores it for good (the paper's reduction of
an ``Async`` input to ``Taint``). ``airflow-epochs analyze dags/example_under_coordinated.py`` exits
with status 1 and names ``count`` and the missing ``Seal[epoch]``. The fix is ``example_word_count``:
wait for the producer's seal before reading.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.analysis import blazes_label

DATA = Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser()
EPOCH = "{{ params.epoch }}"

with DAG(
    dag_id="example_under_coordinated",
    schedule=None,
    start_date=pendulum.datetime(2013, 1, 1, tz="UTC"),
    catchup=False,
    params={"epoch": 1, "landing": str(DATA / "landing" / "tweets"), "counts": str(DATA / "word_counts_unsealed")},
    tags=["airflow-epochs", "example"],
):

    @task
    def split(epoch: str, params: dict | None = None) -> list[str]:
        """The words of the epoch's tweet files that have landed so far (no seal is awaited)."""
        folder = Path((params or {})["landing"]) / f"epoch={int(epoch)}"
        words: list[str] = []
        for path in sorted(folder.glob("*.txt")):
            for tweet in path.read_text().splitlines():
                words.extend(tweet.lower().split())
        return words

    @task
    def count(words: list[str]) -> dict[str, int]:
        """Occurrences of each word among the words read."""
        return dict(Counter(words))

    @task
    def commit(counts: dict[str, int], epoch: str, params: dict | None = None) -> str:
        """Replace the epoch's counts file whole."""
        folder = Path((params or {})["counts"])
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"epoch={int(epoch)}.json"
        target.write_text(json.dumps(counts, sort_keys=True))
        return str(target)

    counts = blazes_label(count(blazes_label(split(EPOCH), "CR")), "OR", gate=("epoch", "word"))
    blazes_label(commit(counts, EPOCH), "CW")
