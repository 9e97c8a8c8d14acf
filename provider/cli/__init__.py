"""``airflow-epochs``: manage the embedded ZooKeeper and look at pipelines.

::

    airflow-epochs zookeeper start [--port N]   # detached server, data kept in the state dir
    airflow-epochs zookeeper status
    airflow-epochs zookeeper stop
    airflow-epochs spark-connect start [--port N] [--master local[2]]   # warm Spark Connect server
    airflow-epochs spark-connect status
    airflow-epochs spark-connect stop
    airflow-epochs history PIPELINE --hosts 127.0.0.1:2181 [--since SEQ] [--limit N]
    airflow-epochs compact PIPELINE [--max-epochs N]            # apply retain_epochs now
    airflow-epochs retire-scope PIPELINE SCOPE                  # drop a delivery scope nobody delivers
    airflow-epochs status PIPELINE                              # tables: frontier, leader, votes, barriers
    airflow-epochs list                                         # the pipelines: frontier, the epoch in flight
    airflow-epochs abort PIPELINE --reason TEXT [--epoch N]     # abort a stray running attempt
    airflow-epochs delete PIPELINE [--yes]                      # delete a (test) pipeline, after confirming
    airflow-epochs timeline PIPELINE --out t.png --out t.html   # each epoch's stages on a time axis
    airflow-epochs analyze DAG_FILE_OR_ID [--format table|json|dot|png] [--out FILE]   # Blazes analysis
    airflow-epochs acl check|repair PIPELINE --conn-id zookeeper_default   # verify / repair the subtree's ACLs
    airflow-epochs reseal PIPELINE EPOCH PARTITION --reason TEXT   # a corrected partition as a new version
    airflow-epochs corrections PIPELINE [--resume]              # corrections and what each waits for
    airflow-epochs table read NS.TABLE --as-of-epoch N --conn-id iceberg_default   # a published table at epoch N

Pipeline commands connect like the ZooKeeperHook, from an Airflow connection (``--conn-id``) or from
``--hosts`` plus ``--digest-user`` (password in ``$AIRFLOW_EPOCHS_ZK_PASSWORD``, never on the command
line) and ``--tls``/``--ca``/``--certfile``/``--keyfile``; given neither, they find the deployment
(:mod:`airflow_epochs.cli.deployment`: the embedded server of ``$AIRFLOW_EPOCHS_HOME``, else the Airflow
connection ``zookeeper_default``). Every error is one line and exit status 2.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from airflow_epochs.cli.parser import build_parser
from airflow_epochs.cli.pipelines import PASSWORD_ENV
from airflow_epochs.cli.state import CliError

__all__ = ["CliError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    from kazoo.exceptions import KazooException, NoAuthError

    from airflow_epochs.connection.embedded import CorruptState
    from airflow_epochs.connection.zookeeper import InvalidConnection
    from airflow_epochs.coordination import AccessDenied, EpochsError
    from airflow_epochs.private_files import UnsafeState
    from airflow_epochs.redaction import redact

    args = build_parser().parse_args(argv)
    # kazoo's reconnect chatter would bury the one line that says what is wrong.
    kazoo_log = logging.getLogger("airflow_epochs.kazoo")
    quiet, propagate = logging.NullHandler(), kazoo_log.propagate
    kazoo_log.addHandler(quiet)
    kazoo_log.propagate = False
    try:
        return int(args.func(args))
    except (NoAuthError, AccessDenied):  # a pipeline command names who was refused (refusals_named)
        message = ("ZooKeeper refused access (NoAuth): the credentials this command connected with, if any, do "
                   f"not give this right (--conn-id, or --digest-user with ${PASSWORD_ENV}, names others)")
    except (CliError, CorruptState, EpochsError, InvalidConnection, UnsafeState) as exc:
        message = str(exc)
    except KazooException as exc:
        message = f"ZooKeeper: {type(exc).__name__}: {exc}"
    except OSError as exc:
        message = f"{type(exc).__name__}: {exc}"
    finally:
        kazoo_log.removeHandler(quiet)
        kazoo_log.propagate = propagate
    print(f"error: {redact(' '.join(message.split()))}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
