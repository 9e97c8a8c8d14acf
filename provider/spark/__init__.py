"""The epoch job contract for PySpark drivers; importable with no Airflow installed.

- :class:`EpochContext`: what a job receives (epoch, attempt, inputs, snapshot, output location).
- :class:`EpochJob`, :func:`run_job`: read inputs and the last sealed snapshot, write output and a
  new snapshot, finish with a manifest.
- :func:`read_sealed`: what consumers read; only sealed manifests resolve to data.
"""

from airflow_epochs.spark.context import CONTEXT_ARG, EpochContext
from airflow_epochs.spark.job import EpochJob, JobAlreadyFinished, content_checksum, run_epoch, run_job
from airflow_epochs.spark.reseal import ResubmitOutcome, resubmit_version
from airflow_epochs.spark.sealed import SealedOutput, read_sealed, sealed_outputs, sealed_runs
from airflow_epochs.spark.storage import (
    MANIFEST_FILE,
    collect_garbage,
    epoch_location,
    read_manifest,
    run_location,
)
from airflow_epochs.spark.submit import JobWithoutManifest, SubmitOutcome, submit_and_seal, vote_summary

__all__ = [
    "CONTEXT_ARG",
    "MANIFEST_FILE",
    "EpochContext",
    "EpochJob",
    "JobAlreadyFinished",
    "JobWithoutManifest",
    "ResubmitOutcome",
    "SealedOutput",
    "SubmitOutcome",
    "collect_garbage",
    "content_checksum",
    "epoch_location",
    "read_manifest",
    "read_sealed",
    "resubmit_version",
    "run_epoch",
    "run_job",
    "run_location",
    "sealed_outputs",
    "sealed_runs",
    "submit_and_seal",
    "vote_summary",
]
