"""Sensors that gate DAGs on sealed epochs (installed as ``airflow_epochs.sensors``)."""
