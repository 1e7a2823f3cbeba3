"""One Airflow DAG per pipeline YAML in `pipelines/` (or `$RECON_PIPELINES_DIR`).

The DAGs are built by `recon.airflow.dag_factory` (schedule, tasks, params, assets: see its
docstring); a YAML that does not validate becomes an import error of its own DAG only.
"""

from recon.airflow.dag_factory import load_dags

load_dags(globals())
