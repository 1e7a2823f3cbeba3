"""Airflow plugin: the recon audit reports in the Airflow UI (`recon.airflow.ui`), registered by
the package's `airflow.plugins` entry point (pyproject.toml): installing the package is enough.

`fastapi_apps` mounts the pages at /recon on the api-server; `external_views` put them in the UI:
a nav entry (every pipeline), a tab on each DAG (its hours and verdicts) and a tab on each DAG
run (the reports of the hours it merged). Nothing is served to a user who is not logged in.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from recon.airflow.ui import create_app


class ReconPlugin(AirflowPlugin):
    name = "recon"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/recon", "name": "recon audit reports"}]
    external_views = [
        {
            "name": "Recon audit",
            "href": "recon/",
            "destination": "nav",
            "category": "browse",
            "url_route": "recon",
        },
        {
            "name": "Audit reports",
            "href": "recon/dags/{DAG_ID}",
            "destination": "dag",
            "url_route": "recon-dag",
        },
        {
            "name": "Audit report",
            "href": "recon/dags/{DAG_ID}/runs/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "recon-run",
        },
    ]
