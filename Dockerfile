# The project image: Java 17, a C compiler (setup builds the package's C modules) and the pinned venv
# of `make setup`, at /opt/recon. Every service
# of docker-compose.yaml runs it: Airflow's api-server, scheduler, dag-processor, triggerer and
# workers, and the Spark standalone master and workers (pyspark's own spark-class), so the
# driver and the executors have the same Python, the same code and the same paths.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps curl make gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/recon
COPY . /opt/recon
# scripts/setup.sh as `make setup` runs it (its C compiler is installed above; what only the tests
# need, MariaDB, PostgreSQL and Chromium, is not: the compose file has its own PostgreSQL). The volumes' mount
# points exist in the image, owned by the service user and writable by its group (root, as
# Airflow's images do: the services run as ${AIRFLOW_UID}:0), so a named volume starts with that
# ownership instead of root's.
RUN RECON_SKIP_SYSTEM_PACKAGES=1 bash scripts/setup.sh \
 && useradd --uid 50000 --gid 0 --home-dir /opt/recon --no-create-home recon \
 && mkdir -p /opt/recon/demo-data /opt/airflow/logs \
 && chown -R 50000:0 /opt/recon/demo-data /opt/airflow \
 && chmod -R g=u /opt/recon/demo-data /opt/airflow

ENV PATH=/opt/recon/.venv/bin:$PATH \
    PYSPARK_PYTHON=/opt/recon/.venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/recon/.venv/bin/python \
    SPARK_HOME=/opt/recon/.venv/lib/python3.11/site-packages/pyspark \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/recon/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/recon/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    RECON_PIPELINES_DIR=/opt/recon/pipelines
USER 50000
