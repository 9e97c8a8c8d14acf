"""Declared producers: ordinary Airflow tasks whose success is a vote (staged by the provider's
listener), built on ledgers: :mod:`.votes` (stage and drain votes), :mod:`.staging` (staged votes and
keys), :mod:`.reruns` (a cleared task's rerun), :mod:`.records`. The declarations themselves are part of
the pipeline's configuration (``wire.declared``)."""
