"""Sensors that gate DAGs on sealed epochs (installed as ``airflow_epochs.sensors``)."""

from airflow_epochs.sensors.barrier import BarrierSensor
from airflow_epochs.sensors.frontier import FrontierSensor
from airflow_epochs.sensors.seals import SealedPartitionSensor
from airflow_epochs.sensors.versions import NewestVersionSensor

__all__ = ["BarrierSensor", "FrontierSensor", "NewestVersionSensor", "SealedPartitionSensor"]
