#!/usr/bin/env bash
# What could be run of docker-compose.yaml on a machine without a Docker engine or registry
# (README "Running on docker compose"): the project image, built with podman, running the
# compose file's Spark master and two workers (same commands, host network instead of the
# compose network) and the `recon-demo` service's command against them, with one volume
# mounted at /opt/recon/demo-data in every container. Airflow's metadata database is SQLite
# inside the demo container here (no PostgreSQL image could be pulled). On the host network the
# two workers share one host name, so Spark would read the other container's shuffle files
# as "host-local" disk: readHostLocalDisk is off here (the compose network gives each its own).
#   bash deploy/podman-smoke.sh [image]      (image default localhost/recon:latest)
set -euo pipefail
image=${1:-localhost/recon:latest}
run=(podman run --network host -v recon-smoke-data:/opt/recon/demo-data)
cleanup() { podman rm -f recon-smoke-master recon-smoke-w1 recon-smoke-w2 >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
podman volume rm -f recon-smoke-data >/dev/null 2>&1 || true
podman volume create recon-smoke-data >/dev/null
# the volume belongs to the image's user (uid 50000), as the compose file's services run
podman run --rm -u 0 -v recon-smoke-data:/opt/recon/demo-data "$image" chown 50000:0 /opt/recon/demo-data
"${run[@]}" -d --name recon-smoke-master "$image" \
  spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 17077 --webui-port 18080
for i in 1 2; do
  "${run[@]}" -d --name "recon-smoke-w$i" -e SPARK_WORKER_DIR=/tmp/spark-work "$image" \
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:17077 \
    --cores 1 --memory 2g --webui-port "1808$i"
done
for _ in $(seq 60); do
  n=$(curl -s http://127.0.0.1:18080/json/ | python3 -c 'import json,sys; print(sum(w["state"]=="ALIVE" for w in json.load(sys.stdin)["workers"]))' 2>/dev/null || echo 0)
  [ "$n" = 2 ] && break
  sleep 2
done
echo "podman-smoke: master up with $n workers"
"${run[@]}" --rm \
  -e AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "spark://127.0.0.1", "port": 17077}' \
  -e RECON_SPARK_CONF='{"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.shuffle.readHostLocalDisk": "false"}' \
  "$image" bash -c "airflow db migrate >/dev/null && python -m recon.airflow.pool && recon demo --airflow-from-environment"
apps=$(curl -s http://127.0.0.1:18080/json/ | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["completedapps"]))')
echo "podman-smoke: $apps applications completed on the containers' Spark master"
