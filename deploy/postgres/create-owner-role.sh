#!/bin/sh
# Runs once, when a Postgres starts on an empty volume (docker-entrypoint-initdb.d): creates the
# login role OWNER_ROLE (password OWNER_PASSWORD) that owns POSTGRES_DB and nothing else, so the
# service using it is not the image's superuser. It can create its own tables there, and cannot
# read another database, create roles or databases, or bypass row security.
set -eu
: "${OWNER_ROLE:?set OWNER_ROLE}" "${OWNER_PASSWORD:?set OWNER_PASSWORD}" "${POSTGRES_DB:?}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v role="$OWNER_ROLE" -v password="$OWNER_PASSWORD" -v db="$POSTGRES_DB" <<'SQL'
CREATE ROLE :"role" LOGIN PASSWORD :'password' NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER DATABASE :"db" OWNER TO :"role";
ALTER SCHEMA public OWNER TO :"role";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE :"db" TO :"role";
SQL
