"""Airflow front end: the DAG factory (`dag_factory`) and the UI pages (`ui`). Imported when the
scheduler parses DAG files, so nothing here imports Spark, pyarrow or the stage packages at
module level (ruff TID253 and tests/e2e/test_dags.py keep it so)."""
