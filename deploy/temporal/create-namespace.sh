#!/bin/sh
# Registers the namespace the workers use, once the cluster answers. Idempotent: an existing
# namespace is left as it is. TEMPORAL_ADDRESS, NAMESPACE (default), NAMESPACE_RETENTION (72h).
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
NAMESPACE="${NAMESPACE:-default}"
RETENTION="${NAMESPACE_RETENTION:-72h}"

tries=0
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
        echo "Temporal at $TEMPORAL_ADDRESS did not become healthy in 120 s" >&2
        exit 1
    fi
    sleep 2
done

if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" >/dev/null 2>&1; then
    echo "namespace $NAMESPACE already exists"
else
    temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" --retention "$RETENTION"
    echo "namespace $NAMESPACE created (retention $RETENTION)"
fi
