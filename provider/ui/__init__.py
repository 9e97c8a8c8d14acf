"""The Epochs page inside Airflow's UI: an Airflow plugin (:mod:`.plugin`) mounting a FastAPI app
(:mod:`.app`) that reads pipeline state through :mod:`.state` and DAG ownership through :mod:`.dags`."""
