"""docker-compose.yml, the Dockerfile and .env.example, checked without a Docker engine.

The file is validated by a real implementation of the Compose Specification's JSON schema (the
copy `check-jsonschema` ships), as written and with .env.example's values substituted; the rest
are the checks a reviewer would make by hand: names, pins, order of start, the worker's settings.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.helpers import ROOT

COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")

# What a worker on a cluster cannot do without: with TEMPORAL_ADDRESS or DATABASE_URL unset it
# would start a dev server or an embedded Postgres inside its container.
WORKER_NEEDS = {
    "TEMPORAL_ADDRESS", "DATABASE_URL", "TASK_QUEUE", "ORDER_BACKEND", "GROCER_URL",
    "LOG_FORMAT", "METRICS_PORT", "METRICS_HOST",
}  # fmt: skip


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution, for the forms this file uses."""

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        value = env.get(name)
        if op and op.endswith("-") and not value:
            return str(arg)
        if op and op.endswith("?") and not value:
            raise AssertionError(f"{name} is required: {arg}")
        return value or ""

    return VARIABLE.sub(substitute, text)


def loaded(env: dict[str, str] | None = None) -> dict[str, Any]:
    text = COMPOSE.read_text()
    data = yaml.safe_load(interpolate(text, env) if env is not None else text)
    assert isinstance(data, dict)
    return data


def services() -> dict[str, dict[str, Any]]:
    return dict(loaded(env_example())["services"])


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_valid_under_the_compose_specification(tmp_path: Path) -> None:
    done = validate(COMPOSE)
    assert done.returncode == 0, done.stdout + done.stderr
    # As compose sees it once .env supplies the variables.
    resolved = tmp_path / "resolved.yml"
    resolved.write_text(yaml.safe_dump(loaded(env_example())))
    done = validate(resolved)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_validator_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    text = COMPOSE.read_text()
    assert "service_completed_successfully" in text
    broken.write_text(text.replace("service_completed_successfully", "service_finished"))
    done = validate(broken)
    assert done.returncode == 1 and "depends_on" in done.stdout, done.stdout + done.stderr


def documented_services() -> set[str]:
    """The services in the table of docs/operations.md's Production section."""
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page[page.index("## Production") :]
    section = section[: section.index("\n## ", 1)]
    return set(re.findall(r"^\| `([a-z-]+)` \|", section, re.MULTILINE))


def test_every_service_the_docs_name_exists() -> None:
    named = documented_services()
    assert named, "docs/operations.md's Production section lists no services"
    assert named == set(services())


def test_every_image_is_pinned_and_none_is_auto_setup() -> None:
    assert "auto-setup" not in COMPOSE.read_text()
    for name, service in services().items():
        image = service.get("image")
        assert image, f"{name} has no image"
        repository, _, tag = str(image).rpartition(":")
        assert repository and re.search(r"\d", tag) and tag != "latest", f"{name}: {image}"
    base = re.search(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), re.MULTILINE)
    assert base and re.search(r":[^:]*\d", base.group(1)) and "latest" not in base.group(1)


def test_start_order() -> None:
    all_services = services()
    for name, service in all_services.items():
        for target in service.get("depends_on", {}):
            assert target in all_services, f"{name} depends on unknown {target}"
    temporal = all_services["temporal"]
    assert temporal["depends_on"] == {
        "temporal-schema": {"condition": "service_completed_successfully"}
    }
    assert "healthcheck" in temporal
    assert temporal["environment"]["DB"] == "postgres12"
    assert temporal["environment"]["VISIBILITY_DBNAME"] == "temporal_visibility"
    assert "ENABLE_ES" not in temporal["environment"]  # SQL visibility, no Elasticsearch
    assert all_services["temporal-schema"]["image"].startswith("temporalio/admin-tools:")
    worker_deps = all_services["worker"]["depends_on"]
    assert worker_deps["temporal-namespace"] == {"condition": "service_completed_successfully"}
    assert worker_deps["app-db"] == {"condition": "service_healthy"}


def mounted_files() -> dict[str, Path]:
    """Container path -> repository path, for every bind mount."""
    mounts = {}
    for service in services().values():
        for volume in service.get("volumes", []):
            source, _, target = str(volume).partition(":")
            if source.startswith("./"):
                mounts[target.split(":")[0]] = ROOT / source
    return mounts


def test_scripts_and_config_it_mounts() -> None:
    mounts = mounted_files()
    for path in mounts.values():
        assert path.exists(), path
    schema_job = (ROOT / "deploy/temporal/setup-schema.sh").read_text()
    for step in ("create", "setup-schema -v 0.0", "update-schema -d"):
        assert step in schema_job
    assert "postgresql/v12" in schema_job
    assert "temporal:temporal" in schema_job and "visibility:temporal_visibility" in schema_job
    shell = shutil.which("sh")
    assert shell
    for script in (ROOT / "deploy").rglob("*.sh"):
        done = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, f"{script}: {done.stderr}"

    # The dynamic config the server is told to read is the file that is mounted there.
    temporal = services()["temporal"]
    in_container = "/etc/temporal/" + temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    directory = str(Path(in_container).parent)
    assert directory in mounts, f"{directory} is not mounted"
    config = yaml.safe_load((mounts[directory] / Path(in_container).name).read_text())
    assert config["history.transferProcessorMaxPollRPS"] == [{"value": 1000, "constraints": {}}]
    assert config["history.timerProcessorMaxPollRPS"] == [{"value": 1000, "constraints": {}}]
    assert "history.timerProcessorMaxTimeShift" not in config  # dev only: one clock
    assert not {k for k in config if k.startswith("matching.")}  # dev only: partitions scale


def settings_the_code_reads() -> set[str]:
    pattern = re.compile(r'(?:env_str|env_port|env_number|os\.environ\.get)\(\s*"([A-Z0-9_]+)"')
    sources = [*ROOT.glob("*.py")]
    for package in ("infra", "agent", "activities", "workflows", "grocer", "journal"):
        sources += (ROOT / package).rglob("*.py")
    return {name for path in sources for name in pattern.findall(path.read_text())}


def test_variables_come_from_env_example_and_secrets_are_not_committed() -> None:
    example = env_example()
    text = COMPOSE.read_text()
    for match in VARIABLE.finditer(text):
        name, op = match.group(1), match.group(2) or ""
        assert name in example or op.endswith("-"), f"${{{name}}} is not in .env.example"
    raw = loaded()["services"]
    for name in ("temporal-db", "app-db", "grocer-db"):
        assert "${" in raw[name]["environment"]["POSTGRES_PASSWORD"], f"{name}: literal password"
    tracked = subprocess.run(
        ["git", "ls-files", ".env"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert tracked.stdout.strip() == "", ".env is committed"


def test_the_worker_environment_is_complete_and_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    all_services = services()
    worker = all_services["worker"]
    env = {name: str(value) for name, value in worker["environment"].items()}
    assert WORKER_NEEDS <= set(env), WORKER_NEEDS - set(env)
    known = settings_the_code_reads()
    for name, service in all_services.items():
        if "build" in service:  # ours: configured only through what the code reads
            unknown = set(service.get("environment", {})) - known
            assert not unknown, f"{name} is given settings no code reads: {unknown}"
    assert int(worker["deploy"]["replicas"]) > 1
    assert all_services["starter"]["environment"] == worker["environment"]
    # Every address names a service of this file.
    for name in ("DATABASE_URL", "GROCER_URL"):
        assert urlsplit(env[name]).hostname in all_services, env[name]
    assert env["TEMPORAL_ADDRESS"].split(":")[0] in all_services

    # And the values are ones the code accepts: its own parsers, as the worker calls them.
    from agent.grocer import grocer_from_env
    from agent.llm import model_from_env
    from infra.config import env_port, task_queue
    from infra.logs import LogFormat, log_format
    from infra.metrics import metrics_host
    from worker import key_strategy

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GROCER_API_KEY", "a-real-account-key-0123")  # .env's, not the example's
    assert log_format() is LogFormat.JSON
    assert env_port("METRICS_PORT") == 9464 and metrics_host() == "0.0.0.0"
    assert task_queue() == "grocery-agent"
    assert str(key_strategy()) == "workflow"
    model_from_env()
    grocer = grocer_from_env()
    assert grocer is not None and grocer.effect_check


def test_dockerfile_runs_the_worker() -> None:
    commands = re.findall(r"^(?:CMD|ENTRYPOINT)\s+(.+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert commands == ['["python", "worker.py"]']
    assert json.loads(commands[0]) == ["python", "worker.py"]
    assert ".venv" in (ROOT / ".dockerignore").read_text()


def test_networks_keep_the_grocer_and_the_databases_apart() -> None:
    nets = {name: set(s.get("networks", [])) for name, s in services().items()}
    assert nets["grocer"] == nets["grocer-db"] == {"store"}
    assert nets["app-db"] == {"app"}
    assert {"temporal-db", "temporal", "temporal-ui"} <= {
        n for n, s in nets.items() if s == {"temporal"}
    }
    assert nets["worker"] == nets["starter"] == {"temporal", "app", "store"}
    offline = {name for name, s in services().items() if s.get("network_mode") == "none"}
    assert offline == {"check-secrets"}
    assert all(v for n, v in nets.items() if n not in offline), "a service on the default network"


def test_every_service_logs_in_as_a_role_that_owns_its_database_only() -> None:
    all_services = services()
    for user_of, db in (("worker", "app-db"), ("grocer", "grocer-db")):
        url = urlsplit(str(all_services[user_of]["environment"]["DATABASE_URL"]))
        db_env = all_services[db]["environment"]
        assert url.hostname == db and url.username == db_env["OWNER_ROLE"], user_of
        assert url.username != db_env["POSTGRES_USER"], f"{user_of} logs in as the superuser"
        assert url.password == db_env["OWNER_PASSWORD"]
        assert url.path == f"/{db_env['POSTGRES_DB']}"
    script = (ROOT / "deploy/postgres/create-owner-role.sh").read_text()
    assert "NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS" in script
    assert "OWNER TO" in script and "REVOKE ALL ON DATABASE" in script


def test_temporal_cannot_be_driven_from_outside() -> None:
    all_services = services()
    assert "ports" not in all_services["temporal"]  # the frontend is not published on the host
    ui = all_services["temporal-ui"]
    assert ui["environment"]["TEMPORAL_DISABLE_WRITE_ACTIONS"] == "true"
    assert all(str(p).startswith("127.0.0.1:") for p in ui["ports"])


def test_restart_policies_and_no_privileges_for_our_containers() -> None:
    for name, service in services().items():
        one_shot = service.get("restart") == "no" or "profiles" in service
        if not one_shot:
            assert service.get("restart") == "unless-stopped", f"{name} is not restarted"
        if "build" in service:  # ours
            assert service.get("security_opt") == ["no-new-privileges:true"], name
            assert service.get("cap_drop") == ["ALL"], name


def test_env_example_placeholders_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from grocer.accounts import Accounts
    from infra.db import ensure_database_url
    from infra.errors import ConfigError

    example = env_example()
    worker_env = services()["worker"]["environment"]
    monkeypatch.setenv("DATABASE_URL", str(worker_env["DATABASE_URL"]))
    with pytest.raises(ConfigError, match="placeholder"):
        ensure_database_url()
    with pytest.raises(ConfigError, match="placeholder"):
        Accounts.from_env({"GROCER_API_KEY": example["GROCER_API_KEY"]})
    assert all(v.startswith("change-me-") for k, v in example.items() if "PASSWORD" in k or
               (k.endswith("_KEY") and k != "MODEL_API_KEY"))  # fmt: skip


def test_placeholders_are_refused_before_any_database_starts(tmp_path: Path) -> None:
    """deploy/check-secrets.sh, run here as compose runs it (sh, the service's environment):
    .env.example as it is fails, naming each variable; real values pass. Every database waits
    for it to complete."""
    script = ROOT / "deploy" / "check-secrets.sh"
    check = services()["check-secrets"]
    names = set(check["environment"])
    example = env_example()

    def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", str(script)], env={"PATH": "/usr/bin:/bin", **env},
                              capture_output=True, text=True, timeout=10)  # fmt: skip

    placeholders = run({n: example[n] for n in names})
    assert placeholders.returncode == 1
    for name in names:
        assert f"check-secrets: {name} is .env.example's placeholder" in placeholders.stderr
    real = {n: f"a-real-secret-{i}-0123456789" for i, n in enumerate(sorted(names))}
    assert run(real).returncode == 0
    short = run({**real, "GROCER_API_KEY": "short-key"})
    assert short.returncode == 1 and "at least 16 characters" in short.stderr
    assert run({}).returncode == 1
    for name, service in services().items():
        if str(service.get("image", "")).startswith("postgres:") and name != "check-secrets":
            after = service["depends_on"]["check-secrets"]["condition"]
            assert after == "service_completed_successfully", name
            assert service.get("user") == "postgres", f"{name} runs as root"


def test_every_long_running_service_has_limits() -> None:
    for name, service in services().items():
        if service.get("restart") == "unless-stopped":
            assert service.get("mem_limit") and service.get("cpus"), f"{name}: no limits"
            assert int(service.get("pids_limit", 0)) > 0, f"{name}: no process limit"
