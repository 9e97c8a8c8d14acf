"""Views of a pipeline's state: one view model (:mod:`.model`) read from ZooKeeper by one reader
(:mod:`.pipeline`, with the recorded history in :mod:`.history`), shown by ``airflow-epochs status``
(:mod:`.status`), ``airflow-epochs timeline`` (:mod:`.timeline`) and the Epochs page (the web plumbing
is :mod:`airflow_epochs.ui`). Read-only; no Airflow import."""
