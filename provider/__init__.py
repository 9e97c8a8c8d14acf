"""airflow-provider-epochs: epoch-batched PySpark pipelines for Apache Airflow 3, coordinated through ZooKeeper.

Importing this package imports nothing from Airflow: the coordination core
(:mod:`airflow_epochs.coordination`) and the embedded ZooKeeper
(:mod:`airflow_epochs.servers.embedded_zookeeper`) work without it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def get_provider_info() -> dict[str, Any]:
    """Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point."""
    return {
        "package-name": "airflow-provider-epochs",
        "name": "Epochs",
        "description": "Epoch-batched PySpark pipelines coordinated through ZooKeeper: ordered, exactly-once "
        "epochs, sealed partitions that gate downstream DAGs, and retries from the last sealed snapshot.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Epochs",
                "external-doc-url": "https://zookeeper.apache.org/",
                "tags": ["apache"],
            }
        ],
        "hooks": [{"integration-name": "Epochs", "python-modules": ["airflow_epochs.hooks.zookeeper",
                                                                      "airflow_epochs.hooks.spark_epoch",
                                                                      "airflow_epochs.tables.hook"]}],
        "operators": [{"integration-name": "Epochs", "python-modules": [
            f"airflow_epochs.operators.{name}" for name in ("epoch", "changes", "group", "consumer", "spark",
                                                            "publish", "declared", "deadline", "corrections",
                                                            "spark_corrections")]}],
        "sensors": [{"integration-name": "Epochs", "python-modules": [
            f"airflow_epochs.sensors.{name}" for name in ("seals", "frontier", "barrier", "versions")]}],
        "triggers": [{"integration-name": "Epochs", "python-modules": [
            f"airflow_epochs.triggers.{name}" for name in ("seals", "frontier", "barriers", "backpressure",
                                                           "assets", "declared", "deadlines", "versions")]}],
        "task-decorators": [
            {"class-name": "airflow_epochs.decorators.spark_epoch.spark_epoch_task", "name": "spark_epoch"},
            {"class-name": "airflow_epochs.decorators.producer.epoch_producer_task", "name": "epoch_producer"},
        ],
        "plugins": [{"name": "epochs", "plugin-class": "airflow_epochs.ui.plugin.EpochsPlugin"}],
        "connection-types": [
            {
                "connection-type": "iceberg",
                "hook-class-name": "airflow_epochs.tables.hook.IcebergCatalogHook",
                "hook-name": "Iceberg catalog (Epochs)",
                "ui-field-behaviour": {
                    "relabeling": {
                        "host": "PostgreSQL host, or the REST catalog's URL",
                        "schema": "Database (SQL catalog on PostgreSQL)",
                        "password": "Password, or the REST catalog's bearer token",
                    },
                    "placeholders": {
                        "host": "db.internal or https://catalog.example/api",
                        "port": "5432",
                        "extra": '{"catalog": "sql", "warehouse": "s3://bucket/warehouse"}',
                    },
                },
                "conn-fields": {
                    "catalog": {
                        "label": "Catalog kind",
                        "description": "sql (PostgreSQL or SQLite) or rest",
                        "schema": {"type": ["string", "null"], "enum": ["sql", "rest", None], "default": "sql"},
                    },
                    "warehouse": {
                        "label": "Warehouse",
                        "description": "where new table metadata goes (a SQL catalog needs it)",
                        "schema": {"type": ["string", "null"]},
                    },
                    "sqlite": {
                        "label": "SQLite catalog file",
                        "description": "instead of a PostgreSQL host (demos, one machine)",
                        "schema": {"type": ["string", "null"]},
                    },
                    "name": {"label": "Catalog name", "schema": {"type": ["string", "null"], "default": "epochs"}},
                },
            },
            {
                "connection-type": "zookeeper",
                "hook-class-name": "airflow_epochs.hooks.zookeeper.ZooKeeperHook",
                "hook-name": "ZooKeeper",
                "ui-field-behaviour": {
                    "hidden-fields": ["extra"],
                    "relabeling": {
                        "host": "Hosts (host:port, comma-separated)",
                        "schema": "Chroot",
                        "login": "Digest user",
                        "password": "Digest password",
                        "port": "Default port",
                    },
                    "placeholders": {
                        "host": "zk1:2181,zk2:2181,zk3:2181",
                        "schema": "/airflow (optional)",
                        "port": "2181",
                        "login": "optional: digest authentication",
                    },
                },
                "conn-fields": {
                    "session_timeout": {
                        "label": "Session timeout (s)",
                        "description": "ZooKeeper session timeout; leadership moves to a standby after it.",
                        "schema": {"type": ["number", "null"], "default": 10},
                    },
                    "connection_timeout": {
                        "label": "Connect timeout (s)",
                        "schema": {"type": ["number", "null"], "default": 15},
                    },
                    "use_acl": {
                        "label": "Protect created znodes with a digest ACL",
                        "description": "Only the digest user can read or change what this connection creates.",
                        "schema": {"type": ["boolean", "null"], "default": False},
                    },
                    "use_tls": {"label": "Use TLS", "schema": {"type": ["boolean", "null"], "default": False}},
                    "ca": {"label": "TLS CA file", "schema": {"type": ["string", "null"]}},
                    "certfile": {"label": "TLS client certificate file", "schema": {"type": ["string", "null"]}},
                    "keyfile": {"label": "TLS client key file", "schema": {"type": ["string", "null"]}},
                    "keyfile_password": {
                        "label": "TLS key password",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                    "verify_certs": {
                        "label": "Verify server certificate",
                        "schema": {"type": ["boolean", "null"], "default": True},
                    },
                    "check_hostname": {
                        "label": "Check server hostname",
                        "schema": {"type": ["boolean", "null"], "default": True},
                    },
                    "read_only": {
                        "label": "Allow read-only servers",
                        "schema": {"type": ["boolean", "null"], "default": False},
                    },
                },
            }
        ],
    }
