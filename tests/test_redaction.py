"""Secrets out of every line, in-process: Postgres URLs and connection strings in every form libpq
takes, URL userinfo, Bearer tokens, and the configured secrets themselves."""

from __future__ import annotations

import pytest

from infra.cli import visible
from infra.redaction import redact

ENV = {
    "MODEL_API_KEY": "sk-model-sentinel",
    "GROCER_API_KEYS": "household=grocer-sentinel-1,stranger=grocer-sentinel-2",
    "DATABASE_URL": "postgresql://agent:db-sentinel@db/grocery",
    "KEY_STRATEGY": "workflow",  # not a secret: its name only begins with KEY
    "GROCER_KEY_TTL_S": "86400",
}


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("postgresql://u:secret1@h:5432/d", "secret1", "postgresql://u:***@h:5432/d"),
        ("postgresql://u:pa@ss@h/d", "pa@ss", "postgresql://u:***@h/d"),
        ("postgresql://u@h/d?password=secret2&sslmode=require", "secret2", "sslmode=require"),
        ("host=h user=u password=secret3 dbname=d", "secret3", "dbname=d"),
        ("host=h password='se cret4' dbname=d", "se cret4", "dbname=d"),
        ("PASSWORD = secret5", "secret5", "PASSWORD = ***"),
        ("https://user:secret6@api.example.com/v1", "secret6", "https://user:***@api.example.com"),
        ("Authorization: Bearer abc.def-secret7", "abc.def-secret7", "Authorization: Bearer ***"),
        ("Authorization: Basic dTpzZWNyZXQ4", "dTpzZWNyZXQ4", "Authorization: Basic ***"),
        ("the provider said: Invalid key sk-model-sentinel", "sk-model-sentinel", "Invalid key"),
        ("keys grocer-sentinel-2 and db-sentinel", "sentinel", "keys *** and ***"),
    ],
)
def test_every_form_of_a_secret_is_hidden(text: str, hidden: str, kept: str) -> None:
    out = redact(text, ENV)
    assert hidden not in out and kept in out, out


def test_ordinary_words_stay() -> None:
    text = "KEY_STRATEGY=workflow, keys live 86400 s, user grocery at db"
    assert redact(text, ENV) == text


SECRET = "Sentinel-9f3a"
# (the URL, the secret it holds as a server or a model would echo it)
URL_FORMS = [
    ("{scheme}://robot:{secret}@host.example.com/v1", "{secret}"),
    ("{scheme}://robot:pa/{secret}@host.example.com/v1", "pa/{secret}"),  # an unencoded /
    ("{scheme}://robot:pa@{secret}@host.example.com/v1", "pa@{secret}"),  # an unencoded @
    ("{scheme}://host.example.com/v1?api-key={secret}", "{secret}"),
    ("{scheme}://host.example.com/v1?api_key={secret}&x=1", "{secret}"),
    ("{scheme}://host.example.com/v1?x=1&token={secret}", "{secret}"),
    ("{scheme}://host.example.com/v1?key={secret}", "{secret}"),
    ("{scheme}://host.example.com/v1?access_token={secret}#top", "{secret}"),
    ("{scheme}://host.example.com/v1?sslpassword={secret}", "{secret}"),
]


@pytest.mark.parametrize(("form", "echoed"), URL_FORMS)
@pytest.mark.parametrize(
    ("setting", "scheme"),
    [("DATABASE_URL", "postgresql"), ("MODEL_BASE_URL", "https"), ("GROCER_URL", "https")],
)
def test_every_url_setting_form_is_hidden(
    setting: str, scheme: str, form: str, echoed: str
) -> None:
    """The URL as it would appear in an error line, and its secret alone as a server or a model
    would echo it: hidden in both, from the pattern and from the configured value."""
    url = form.format(scheme=scheme, secret=SECRET)
    env = {setting: url}
    echo = f"the server said: bad key {echoed.format(secret=SECRET)}"
    for line in (f"error: cannot reach {url}: refused", echo):
        out = redact(line, env)
        assert SECRET not in out, out
        assert "***" in out, out
    assert "host.example.com" in redact(f"error: cannot reach {url}", env)  # the host stays


def test_a_libpq_keyword_sslpassword_is_hidden() -> None:
    env = {"DATABASE_URL": f"host=db sslpassword={SECRET} dbname=grocery"}
    for line in (env["DATABASE_URL"], f"bad passphrase {SECRET}"):
        assert SECRET not in redact(line, env)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("::add-mask::secret", "\\x3a:add-mask::secret"),
        ("grocery-a\x1b]52;c;cm0=\x07-w49", "grocery-a\\x1b]52;c;cm0=\\x07-w49"),
        ("run\r\nforged line", "run\\r\\nforged line"),
        ("abc ##[error]x", "abc #\\x23[error]x"),
        ("rlo\u202eevil", "rlo\\u202eevil"),
        ("grocery-smith-2026-W49", "grocery-smith-2026-W49"),
    ],
)
def test_what_the_commands_print_of_an_id_is_one_harmless_line(text: str, shown: str) -> None:
    """`python -m infra blocked` and `python -m dbos_agent pending` print workflow ids, run ids
    and versions anyone could have chosen through `visible`: once raw (a line began
    `::add-mask::`, ESC and OSC reached the terminal)."""
    assert visible(text) == shown


def test_an_unknown_argument_is_shown_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m infra blocked`, `python -m dbos_agent pending` (every command of the project)
    echoed an argument they did not know as it was: its escape codes reached the terminal.
    Every command's parser is the one that shows it as text (crashtest's: its own tests)."""
    from pathlib import Path

    from infra.cli import ArgumentParser

    with pytest.raises(SystemExit) as ended:
        ArgumentParser(prog="python -m infra").parse_args(["blocked", "\x1b[2J\x07"])
    assert ended.value.code == 2
    said = capsys.readouterr().err
    assert "\\x1b[2J\\x07" in said and "\x1b" not in said and "\x07" not in said, said
    root = Path(__file__).resolve().parent.parent
    plain = [
        str(p.relative_to(root))
        for p in root.glob("**/*.py")
        if ".venv" not in p.parts and "tests" not in p.parts and "build" not in p.parts
        and "argparse.ArgumentParser(" in p.read_text()
    ]  # fmt: skip
    assert plain == [], plain
