"""``python -m airflow_epochs.cli``: the ``airflow-epochs`` command."""

from __future__ import annotations

import sys

from airflow_epochs.cli import main

sys.exit(main())
