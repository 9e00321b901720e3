"""A database password is never shown: every form a storage target can take, through `sweep status`."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import TINY_GRID, write_grid

from sweep import cli
from sweep.store import STORAGE_ENV, redact

pytestmark = pytest.mark.unit

FORMS = [
    "postgresql:///nodb?user=u&password=Zq9secret&host=127.0.0.1&port=1",  # libpq's query form
    "postgresql://u:Zq9/secret@127.0.0.1:1/db",  # userinfo with /
    "postgresql://u:Zq9@secret@127.0.0.1:1/db",  # with @: the driver's error echoes 'secret@127.0.0.1'
    "postgresql://u:Zq9:secret@127.0.0.1:1/db",  # with :
    "postgresql://u:Zq9%2Fsecret@127.0.0.1:1/db",  # percent-escaped
    "postgresql://u:Zq9secret@127.0.0.1:1/db?sslmode=bogus",  # a driver error about the query
    "postgresql://u@127.0.0.1:1/db?PASSWORD='Zq9 secret'",  # quoted, upper case
    "host=127.0.0.1 port=1 user=u password=Zq9secret dbname=db",  # libpq key=value
    "postgresql://u@127.0.0.1:1/db?sslpassword=Zq9secret",  # a query parameter whose name holds password
    "postgresql://u@127.0.0.1:1/db?password=Zq9,secret",  # a , inside the password
    "postgresql://u@127.0.0.1:1/db?password=Zq9;sec)ret&sslmode=bogus",  # ; and ) inside it
    "host=127.0.0.1 port=1 user=u sslpassword='Zq9 secret' dbname=db",  # key=value, quoted
    "postgresql://u:Zq9 secret@127.0.0.1:1/db",  # a space, as SQLAlchemy takes it: the pattern stopped there
    "postgresql://u:Zq9 x@secret y@127.0.0.1:1/db",  # a space and an @: the driver echoes 'secret y@127.0.0.1'
]


def _shown(text: str) -> bool:
    return any(piece in text for piece in ("Zq9", "secret"))


@pytest.mark.parametrize("form", FORMS)
def test_status_never_shows_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, form: str
) -> None:
    write_grid(tmp_path, TINY_GRID)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store.url").write_text(form + "\n")
    (tmp_path / "store.url").chmod(0o600)
    for args, env in ((["--storage", form], None), (["--storage", "@store.url"], None), ([], form)):
        if env:
            monkeypatch.setenv(STORAGE_ENV, env)
        assert cli.main(["status", "grid.yaml", *args]) == 2
        captured = capsys.readouterr()
        assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
        assert not _shown(captured.out + captured.err), captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml", "store.url"]  # nothing written


def test_a_storage_file_under_the_home_folder_is_read_from_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--storage @~/store.url` (or $BATCHSWEEP_STORAGE=@~/...) reads ~/store.url, wherever the command runs."""
    from sweep.cli import cli_cluster

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    (home / "store.url").write_text(FORMS[1] + "\n")
    (home / "store.url").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    assert cli.storage_arg("@~/store.url") == FORMS[1]
    monkeypatch.setenv(STORAGE_ENV, "@~/store.url")
    assert cli.storage_arg(None) == FORMS[1]
    # a worker started elsewhere (Slurm) is handed the file's absolute path, never a password or a literal ~
    assert cli_cluster._worker_storage("@~/store.url", FORMS[1]) == f"@{home.resolve() / 'store.url'}"
    assert not (elsewhere / "~").exists()


@pytest.mark.parametrize(
    "text, target, expected",
    [
        ("connect postgresql://u:a/b@c@h:5/db now", None, "connect postgresql://u:***@h:5/db now"),
        ("dsn 'host=h password=\"p w\" user=u'", None, "dsn 'host=h password=*** user=u'"),
        ("?user=u&Password=x%26y&host=h", None, "?user=u&Password=***&host=h"),
        (
            "failed to resolve host 'Bsecret2@127.0.0.1'",
            "postgresql://u:Zq9@Bsecret2@127.0.0.1/db",
            "failed to resolve host '***@127.0.0.1'",
        ),
        (  # an @ not percent-encoded: the driver echoes the piece after it, which holds a -
            "failed to resolve host 'Zq-17@127.0.0.1'",
            "postgresql://u:Pw7-17@Zq-17@127.0.0.1:1/db",
            "failed to resolve host '***@127.0.0.1'",
        ),
        ("password is p/w", "postgresql://u:p%2Fw3x@h/db", "password is p/w"),  # pieces under 4 characters stay
        (
            "no url here: postgresql://postgres@127.0.0.1:5/db",
            None,
            "no url here: postgresql://postgres@127.0.0.1:5/db",
        ),
        ("postgresql://u@h:1/db?sslpassword=S3cretXyz&x=1", None, "postgresql://u@h:1/db?sslpassword=***&x=1"),
        ("?password=ab,Secr3t&host=h", None, "?password=***&host=h"),  # PostgreSQL accepts a , in a password
        ("?password=ab;c)Secr3t", None, "?password=***"),
        ("PGPASSWORD=Zq9secret psql", None, "PGPASSWORD=*** psql"),
        ("mlflow at http://u:Zq9secret@mlflow:5000 refused", None, "mlflow at http://u:***@mlflow:5000 refused"),
        ("val_acc 0.1 epoch 1", "postgresql://u:1@h/db", "val_acc 0.1 epoch 1"),  # a 1-character password
        ("url postgresql://u:1@h/db", "postgresql://u:1@h/db", "url postgresql://u:***@h/db"),  # still in its form
    ],
)
def test_redact_masks_each_form(text: str, target: str | None, expected: str) -> None:
    assert redact(text, target) == expected


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@127.0.0.1:1/db?sslpassword=S3cretXyz", "postgresql://u@127.0.0.1:1/db?password=ab,S3cret"],
)
def test_a_url_with_a_password_in_any_query_parameter_never_reaches_a_workers_command_line(url: str) -> None:
    """A worker started elsewhere (a Slurm array) gets the URL on its command line only when it holds no
    password; otherwise it reads $BATCHSWEEP_STORAGE, which `ps` does not show.
    """
    from sweep.cli import cli_cluster

    assert cli_cluster._worker_storage(url, url) is None
    plain = "postgresql://u@127.0.0.1:1/db?sslmode=disable"
    assert cli_cluster._worker_storage(plain, plain) == plain


@pytest.mark.parametrize(
    "storage, says",
    [
        (
            "host=127.0.0.1 port=1 user=u dbname=db",
            "a libpq key=value string is not a store URL; give it as postgresql://",
        ),
        ("@empty.url", "empty.url is empty; write the store's URL in it"),
    ],
)
def test_a_store_given_in_a_form_it_cannot_be_is_refused_not_taken_as_a_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, storage: str, says: str
) -> None:
    """A connection string without a password, or an empty @file, would otherwise start a local journal
    (on a cluster: every node training every run into its own).
    """
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / "empty.url").write_text("\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "grid.yaml", "--storage", storage, "--no-train"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.url", "grid.yaml"]  # nothing written


def test_an_at_file_holding_a_password_must_be_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    write_grid(tmp_path, TINY_GRID)
    monkeypatch.chdir(tmp_path)
    secret = tmp_path / "store.url"
    secret.write_text(FORMS[1] + "\n")
    secret.chmod(0o644)
    assert cli.main(["status", "grid.yaml", "--storage", "@store.url"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: --storage @store.url: {Path('store.url')} holds a password and is readable by others (mode 644); "
        f"run: chmod 600 {Path('store.url')}\n"
    )
    plain = tmp_path / "plain.url"  # no password: nothing to protect, any mode
    plain.write_text("postgresql://u@127.0.0.1:1/db\n")
    plain.chmod(0o644)
    assert cli.storage_arg("@plain.url") == "postgresql://u@127.0.0.1:1/db"
    secret.chmod(0o600)
    assert cli.storage_arg("@store.url") == FORMS[1]


# Passwords as a user writes them into a URL, unescaped: SQLAlchemy's parse (what the driver gets) takes
# every one of these characters; the text after a second @ reaches the driver as part of the host.
HOSTILE = [
    "Pw SecretCx",  # a space
    "Pw SecretCx@Xk Tail9",  # a space and a second @
    "Pw%41SecretCx",  # a percent-escape: the driver gets PwASecretCx
    "Pw%SecretCx",  # a % that escapes nothing
    "Pw:Secret/Cx",  # : and /
    "Pw#SecretCx",  # #
    "Pässwört Geheim",  # unicode and a space
    "Pw?Secret&Cx=1",  # ? & =
]


def _hostile_url(password: str) -> str:
    return f"postgresql://uspace:{password}@127.0.0.1:55432/uspace"


@pytest.mark.parametrize("password", HOSTILE)
def test_a_hostile_password_is_masked_wherever_the_url_or_the_driver_shows_it(password: str) -> None:
    """The password is what SQLAlchemy's parse says it is (what the driver gets), not what a pattern guesses:
    none of its text appears in the masked lines, whether shown raw, as the driver got it, or its tail
    echoed as a host.
    """
    from sqlalchemy.engine import make_url

    url = _hostile_url(password)
    parsed = make_url(url)
    lines = [
        f"store: {url}",
        f"cannot open the store {url.replace('postgresql://', 'postgresql+psycopg://')}: OperationalError: refused",
        f"failed to resolve host '{parsed.host}'",  # the driver echoes a host that holds the password's tail
        f"FATAL: password authentication failed for user uspace with {parsed.password}",
    ]
    shown = {password, str(parsed.password), password.partition("@")[2], unquote(password)} - {""}
    for line in lines:
        masked = redact(line, url)
        assert not [secret for secret in shown if secret in masked], masked
    assert redact(lines[0], url) == "store: postgresql://uspace:***@127.0.0.1:55432/uspace"


@pytest.mark.parametrize("password", HOSTILE)
def test_a_hostile_password_keeps_a_store_off_command_lines_scripts_and_open_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password: str
) -> None:
    """The same parse decides that the URL holds a password: a worker's command line and a Slurm script
    never carry it, and an @file holding it must be readable by its owner only.
    """
    from sweep.cli import cli_cluster
    from sweep.exits import UsageError
    from sweep.run import slurm

    url = _hostile_url(password)
    assert cli_cluster._worker_storage(url, url) is None  # the worker reads $BATCHSWEEP_STORAGE
    with pytest.raises(slurm.SlurmError) as refused:  # a script never holds it, however it was reached
        slurm.ArrayJob(study="s", storage=url, tasks=1, folder=tmp_path, workdir=tmp_path)
    assert password not in str(refused.value) and "@FILE" in str(refused.value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store.url").write_text(url + "\n")
    (tmp_path / "store.url").chmod(0o644)
    with pytest.raises(UsageError, match="holds a password and is readable by others"):
        cli.storage_arg("@store.url")
    (tmp_path / "store.url").chmod(0o600)
    assert cli.storage_arg("@store.url") == url
