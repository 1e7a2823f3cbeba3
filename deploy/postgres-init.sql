-- The compose file's PostgreSQL holds Airflow's metadata database (POSTGRES_DB) and, in a
-- database of its own, the Iceberg SQL catalog of every pipeline.
CREATE DATABASE iceberg;
