"""The word count of the Blazes paper (its Storm case study) as a consumer of sealed epochs.

    sealed_tweets >> split >> count >> commit

A producer lands each epoch's tweets in a file under the data root's ``tweets`` folder and votes it
as the partition ``tweets`` of pipeline ``tweets`` (the vote's manifest names the file).
``sealed_tweets`` waits for that seal, so ``split`` reads the epoch's tweets complete: its input is
sealed on the epoch, the paper's "sealed on batch".
``count`` is order-sensitive only within a (epoch, word) group, which the seal covers, and ``commit``
replaces one file per epoch: the committed counts are the same in every run and every retry.
Where the counts go is the deployment's choice (``$AIRFLOW_EPOCHS_DATA/word_counts``), never a run
parameter: whoever may trigger a run must not choose a folder this worker writes to. Likewise ``split``
reads only files inside ``$AIRFLOW_EPOCHS_DATA/tweets`` whatever a manifest names.

``airflow-epochs analyze dags/example_word_count.py`` shows the reduction
``Seal[epoch] -> CR -> OR[epoch, word] -> CW = Async``; ``example_under_coordinated`` is the same
count without the seal, which the command rejects.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pendulum
from airflow.sdk import DAG, task

from airflow_epochs.analysis import blazes_label
from airflow_epochs.sensors import SealedPartitionSensor

PIPELINE = "tweets"
EPOCH = "{{ params.epoch }}"


def data_root() -> Path:
    """The deployment's data folder (read when the task runs)."""
    return Path(os.environ.get("AIRFLOW_EPOCHS_DATA", "~/airflow-epochs-data")).expanduser().absolute()


def counts_folder() -> Path:
    """The deployment's folder for committed counts."""
    return data_root() / "word_counts"


def tweets_folder() -> Path:
    """Where the producer lands each epoch's tweets: the only folder ``split`` reads from."""
    return data_root() / "tweets"


with DAG(
    dag_id="example_word_count",
    schedule=None,
    start_date=pendulum.datetime(2013, 1, 1, tz="UTC"),
    catchup=False,
    params={"epoch": 1},
    tags=["airflow-epochs", "example"],
):
    sealed = SealedPartitionSensor(task_id="sealed_tweets", pipeline=PIPELINE, partitions=["tweets"], epoch=EPOCH,
                                   deferrable=True, timeout=3600)

    @task
    def split(epoch: str) -> list[str]:
        """The words of the epoch's tweets, read through the seal's manifests (per tweet: stateless)."""
        from airflow_epochs.hooks.zookeeper import ZooKeeperHook

        with ZooKeeperHook() as hook:
            seal = hook.ledger(PIPELINE).seal(int(epoch), "tweets")
        if seal is None:
            raise ValueError(f"partition 'tweets' of epoch {epoch} is not sealed")
        from airflow_epochs.path_trust import read_inside

        words: list[str] = []
        for manifest in seal.manifests.values():
            # The manifest comes from ZooKeeper: read only a file in the landing folder, never through a
            # link another user could have placed (OutsideRoot names the path otherwise).
            path = manifest.get("path") if isinstance(manifest, dict) else None
            for tweet in read_inside(str(tweets_folder()), path).decode().splitlines():
                words.extend(tweet.lower().split())
        return words

    @task
    def count(words: list[str]) -> dict[str, int]:
        """Occurrences of each word in the epoch: final only once all of the epoch's words are in."""
        return dict(Counter(words))

    @task
    def commit(counts: dict[str, int], epoch: str) -> str:
        """Replace the epoch's counts file whole (a rerun writes the same file)."""
        folder = counts_folder()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"epoch={int(epoch)}.json"
        partial = folder / f".epoch={int(epoch)}.json.tmp"
        partial.write_text(json.dumps(counts, sort_keys=True))
        partial.replace(target)
        return str(target)

    # [START blazes_labels]
    words = blazes_label(split(EPOCH), "CR")
    counts = blazes_label(count(words), "OR", gate=("epoch", "word"))
    blazes_label(commit(counts, EPOCH), "CW")
    # [END blazes_labels]
    sealed >> words
