"""recon: batch reconciliation of MySQL/MariaDB change-data-capture streams dumped from Kafka.

All logic lives in this package; `dags/recon_pipelines.py` and the spark-submit applications
of `recon/jobs/` only wire it to Airflow and spark-submit. Modules whose names end in `_io` (or live under `recon.spark`) touch files and
Spark; everything else is a pure function of its inputs.
"""

__version__ = "0.1.0"
