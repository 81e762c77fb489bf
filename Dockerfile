# The image for this project's worker (and, with another command, the grocer and the starter).
FROM python:3.11.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY . .
RUN pip install . \
    && useradd --create-home --uid 10001 agent
USER agent

# TEMPORAL_ADDRESS and DATABASE_URL must be set (docker-compose.yml does): without them the worker
# would start a local dev server and an embedded Postgres inside the container.
CMD ["python", "worker.py"]
