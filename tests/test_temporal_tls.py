"""Temporal over mutual TLS, end to end: HAProxy (Debian's package) terminates TLS in front of the
dev server and demands a client certificate signed by the test's own CA. The worker and the
starter reach it only through the standard settings (`temporalio.envconfig`), as in production
against Temporal Cloud or a self-hosted cluster with mTLS.

`.ci/run` installs HAProxy and sets TLS_PROXY_REQUIRED=1, so there a missing HAProxy fails the
test; elsewhere it is skipped with the command that installs it."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from infra.processes import free_port
from tests.helpers import (
    PAYMENTS_INPUT,
    WorkerProcess,
    assert_one_line_error,
    child_env,
    crashtest_runs,
    failing,
    failing_starter,
    new_run_id,
    payments,
    run_python,
    starter,
    wait_listening,
)

HAPROXY = shutil.which("haproxy") or next(
    (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.path.exists(p)), None
)

if HAPROXY is None and os.environ.get("TLS_PROXY_REQUIRED") != "1":
    pytest.skip(
        "HAProxy is not installed (apt-get install haproxy); .ci/run installs it",
        allow_module_level=True,
    )


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


class Authority:
    """A certificate authority made for the test, valid for a day."""

    def __init__(self, name: str, folder: Path) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(CA_KEY_USAGE, critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / f"{name}.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.folder = folder

    def issue(self, name: str, *, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        issued = Issued(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, issued.key)
        return issued


@dataclass(frozen=True)
class MutualTLS:
    address: str
    ca: Path
    client: Issued
    stranger: Issued  # a client certificate from another CA

    def env(self, client: Issued | None) -> dict[str, str]:
        """The standard settings for a client of the proxy (beside TEMPORAL_ADDRESS), with
        `client`'s certificate."""
        env = {
            "TEMPORAL_TLS": "true",
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(self.ca),
            "TEMPORAL_TLS_SERVER_NAME": "localhost",
        }
        if client is not None:
            env["TEMPORAL_TLS_CLIENT_CERT_PATH"] = str(client.cert)
            env["TEMPORAL_TLS_CLIENT_KEY_PATH"] = str(client.key)
        return env


HAPROXY_CONFIG = """\
defaults
    mode tcp
    timeout connect 5s
    # longer than a worker's long poll (about 70 s)
    timeout client 5m
    timeout server 5m

frontend temporal_tls
    bind 127.0.0.1:{port} ssl crt {server_pem} ca-file {ca} verify required alpn h2
    default_backend temporal_dev

backend temporal_dev
    server dev {upstream}
"""


@pytest.fixture(scope="module")
def mutual_tls(
    temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MutualTLS]:
    assert HAPROXY is not None, "HAProxy is required here (TLS_PROXY_REQUIRED=1)"
    folder = tmp_path_factory.mktemp("mtls")
    ca = Authority("test-ca", folder)
    server = ca.issue("temporal-proxy", server=True)
    server_pem = folder / "temporal-proxy.pem"  # HAProxy wants the certificate and key together
    server_pem.write_bytes(server.cert.read_bytes() + server.key.read_bytes())
    port = free_port()
    config = folder / "haproxy.cfg"
    config.write_text(
        HAPROXY_CONFIG.format(
            port=port, server_pem=server_pem, ca=ca.path, upstream=temporal_address
        )
    )
    check = subprocess.run([HAPROXY, "-c", "-q", "-f", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.Popen(
        [HAPROXY, "-db", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_listening(proc, port)
    yield MutualTLS(
        f"127.0.0.1:{port}", ca.path, ca.issue("household-worker", server=False),
        Authority("other-ca", folder).issue("stranger", server=False),
    )  # fmt: skip
    proc.terminate()
    proc.wait(10)


async def test_the_agent_completes_over_mutual_tls(
    db_url: str, workers: Callable[..., WorkerProcess], mutual_tls: MutualTLS
) -> None:
    """The worker and the starter, given the CA and a client certificate by the standard
    settings, run the agent through the proxy: one order, one email."""
    queue = new_run_id("q")
    tls = mutual_tls.env(mutual_tls.client)
    workers(queue, TEMPORAL_ADDRESS=mutual_tls.address, **tls)
    out = await asyncio.to_thread(
        starter, db_url, mutual_tls.address, queue, "--household", new_run_id("h"), **tls
    )
    assert (out["model_calls"], out["orders"], out["emails"]) == (3, 1, 1)


@pytest.mark.parametrize("who", ["no client certificate", "another CA's certificate"])
async def test_without_the_right_certificate_temporal_is_refused_in_one_line(
    db_url: str, mutual_tls: MutualTLS, who: str
) -> None:
    tls = mutual_tls.env(None if who.startswith("no") else mutual_tls.stranger)
    done = await failing_starter(
        db_url, mutual_tls.address, new_run_id("q"), new_run_id("h"), **tls
    )
    assert_one_line_error(done, f"cannot reach Temporal at {mutual_tls.address}")


def test_plain_text_to_the_tls_port_is_refused_in_one_line(
    db_url: str, mutual_tls: MutualTLS
) -> None:
    """A client that forgot TEMPORAL_TLS: one line, no stack trace."""
    done = run_python(
        ["starter.py", "--task-queue", new_run_id("q")],
        child_env(db_url, TEMPORAL_ADDRESS=mutual_tls.address),
        60,
    )
    assert_one_line_error(done, f"cannot reach Temporal at {mutual_tls.address}")


def test_the_crash_tool_sees_a_duplicate_over_mutual_tls(
    db_url: str, mutual_tls: MutualTLS, tmp_path: Path
) -> None:
    """crashtest, its workers and its fast-forward all on the configured (mTLS) server: the
    unkeyed charge is still caught, the keyed one still passes. So through the proxy on the
    wire (`--worker-cmd`): it reaches the server with the CA and the client certificate, and the
    worker command, given none of the TLS settings, talks to it in plain text."""
    env = child_env(
        db_url, TEMPORAL_ADDRESS=mutual_tls.address, **mutual_tls.env(mutual_tls.client)
    )
    point = ["--points", "after-effect:charge#2"]
    command = f"{sys.executable} -m temporal_crashtest.worker --worker "
    command += "examples.payments.worker:unkeyed_worker"
    on_the_wire = ["--worker-cmd", command, "--workflow", "PaymentsWorkflow"]
    on_the_wire += ["--input", PAYMENTS_INPUT, "--observe", "examples.payments.observe:payments_of"]
    results = crashtest_runs(
        {
            "keyed": ([*payments("keyed_worker"), *point], {}),
            "unkeyed": ([*payments("unkeyed_worker"), *point], {}),
            "unkeyed-command": ([*on_the_wire, *point], {}),
        },
        env,
        tmp_path,
    )
    done, report = results["keyed"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["crash_at"] for c in report["cells"]] == ["after-effect:3"]
    for unkeyed in ("unkeyed", "unkeyed-command"):
        done, report = results[unkeyed]
        assert done.returncode == 1, done.stdout + done.stderr
        assert failing(report) == {"after-effect:3"}
