"""Airflow listeners the provider registers through its plugin (see :mod:`.declared_producers`)."""
