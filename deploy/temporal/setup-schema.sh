#!/bin/sh
# Creates Temporal's two databases on Postgres and migrates them to the schema version this
# admin-tools image ships: `temporal` (persistence) and `temporal_visibility` (SQL visibility,
# no Elasticsearch). Every command is idempotent, so the job can run again, and an upgrade is the
# same job with the newer image (update-schema applies only the versions not yet applied).
# Connection: SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD (temporal-sql-tool reads the password
# from SQL_PASSWORD).
set -eu

: "${SQL_HOST:?SQL_HOST is required}"
: "${SQL_USER:?SQL_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
SQL_PORT="${SQL_PORT:-5432}"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

sql_tool() {
    temporal-sql-tool --plugin postgres12 --ep "$SQL_HOST" -p "$SQL_PORT" -u "$SQL_USER" "$@"
}

for pair in temporal:temporal visibility:temporal_visibility; do
    kind="${pair%%:*}"
    db="${pair#*:}"
    echo "database $db: create, set up the schema's version table, migrate ($kind schema)"
    sql_tool --db "$db" create || echo "could not create $db (it may exist already); going on"
    sql_tool --db "$db" setup-schema -v 0.0
    sql_tool --db "$db" update-schema -d "$SCHEMA_DIR/$kind/versioned"
done
echo "Temporal's schemas are up to date"
