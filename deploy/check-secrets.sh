#!/bin/sh
# One-shot, before any database starts: refuses .env.example's placeholders (and a short grocer
# key) for every secret the stack takes, so that no service comes up with a password anyone can
# read in the repository. Our own services refuse them too; the third-party images would not.
# Exits 1 naming each variable at fault.
set -u
bad=0
for name in TEMPORAL_DB_PASSWORD APP_DB_ADMIN_PASSWORD APP_DB_PASSWORD GROCER_DB_ADMIN_PASSWORD \
            GROCER_DB_PASSWORD GROCER_API_KEY; do
    value=$(printenv "$name" || true)
    case "$value" in
        "") echo "check-secrets: $name is not set (see .env.example)" >&2; bad=1 ;;
        change-me*) echo "check-secrets: $name is .env.example's placeholder: set your own in .env" >&2; bad=1 ;;
    esac
done
key=$(printenv GROCER_API_KEY || true)
if [ -n "$key" ] && [ "${#key}" -lt 16 ]; then
    echo "check-secrets: GROCER_API_KEY must be at least 16 characters" >&2
    bad=1
fi
[ "$bad" = 0 ] && echo "check-secrets: no placeholder among the secrets"
exit "$bad"
