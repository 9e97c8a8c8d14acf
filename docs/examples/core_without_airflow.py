"""The coordination core without Airflow: runs as is (it starts its own ZooKeeper).

Included by docs/guides/core_without_airflow.rst and run by tests/integration/test_docs_examples.py.
"""

# [START core_without_airflow]
from kazoo.client import KazooClient

from airflow_epochs.coordination import AttemptSuperseded, EpochLedger, PipelineConfig
from airflow_epochs.servers.embedded_zookeeper import EmbeddedZooKeeper

with EmbeddedZooKeeper() as server:
    zk = KazooClient(hosts=server.hosts)
    zk.start()
    ledger = EpochLedger(zk, "sales", owner="deploy-a")
    ledger.create_pipeline(PipelineConfig({"orders": ("ingest_eu", "ingest_us")}))

    attempt = ledger.open_epoch(1)                      # epoch 1 of pipeline "sales"
    ledger.vote(attempt, "orders", "ingest_eu", {"rows": 120, "path": "s3://b/orders/1/eu"})
    result = ledger.vote(attempt, "orders", "ingest_us", {"rows": 80}, snapshot="s3://b/totals/1")
    assert result.partition_sealed and result.epoch_sealed and ledger.frontier() == 1

    standby = EpochLedger(zk, "sales", owner="deploy-b")
    attempt2 = ledger.open_epoch(2)
    takeover = standby.open_epoch(2, takeover=True)      # a standby supersedes a stuck attempt
    try:
        ledger.vote(attempt2, "orders", "ingest_eu", {"rows": 1})
    except AttemptSuperseded as refused:                 # the zombie is fenced off, nothing written
        print("refused:", refused)
    print(ledger.last_sealed_snapshot("orders", before_epoch=2))  # what a retry of epoch 2 starts from
    for event in ledger.history():
        print(event.zxid, event.event, event.record.epoch)  # one typed record per kind of event
    zk.stop()
# [END core_without_airflow]
