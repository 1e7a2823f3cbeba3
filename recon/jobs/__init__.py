"""The spark-submit applications the DAGs run: `stage.py` (one stage of one run) and `app.py`
(the run's long-lived driver that serves the stages). Files, run as scripts by spark-submit."""
