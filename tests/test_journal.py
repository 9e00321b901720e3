"""A journal file is recognised before anything is written to it, and read without writing by the commands
that only read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY_GRID, write_grid

from sweep import cli, vocab
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.store import Store

SECRET = "Pw SecretCx"
# Files given as --storage that are no journal, and what the refusal says they look like
NOT_JOURNALS = {
    "store.url": (f"postgresql://u:{SECRET}@127.0.0.1:1/db\n".encode(), "this file holds a database URL"),
    "dsn.txt": (f"host=h user=u password='{SECRET}'\n".encode(), "this file holds a libpq connection string"),
    "grid.yaml": (b"name: tiny\nseeds: [0]\n", "this file holds text"),
    "data.json": (b'{"study": "tiny"}\n', "this file holds JSON that is no journal record"),
    "image.png": (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "this file holds binary data"),
    "store.db": (b"SQLite format 3\x00" + bytes(100), "this file is an SQLite database"),
}


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and its modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(NOT_JOURNALS))
@pytest.mark.parametrize("command", ["status", "run", "export"])
def test_a_file_that_is_no_journal_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, command: str
) -> None:
    """`--storage ~/.sweep-db` with the @ forgotten: one line naming what the file holds (never its text),
    exit 2, and the file, like everything else, unchanged.
    """
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID, "sweep.yaml")
    data, says = NOT_JOURNALS[name]
    (tmp_path / name).write_bytes(data)
    before = _snapshot(tmp_path)
    extra = ["--no-train"] if command == "run" else []
    assert cli.main([command, "sweep.yaml", "--storage", name, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {name}: {says}") and err.count("\n") == 1, err
    assert SECRET not in err and "Secret" not in err
    assert _snapshot(tmp_path) == before  # the file's bytes and time, and no lock, folder or results beside it


@pytest.mark.unit
def test_a_url_file_given_without_its_at_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / ".sweep-db").write_bytes(NOT_JOURNALS["store.url"][0])
    assert cli.main(["status", "grid.yaml", "--storage", ".sweep-db"]) == 2
    assert capsys.readouterr().err == (
        "error: .sweep-db: this file holds a database URL, not a journal: did you mean --storage @.sweep-db?; "
        "an Optuna journal holds one JSON record per line\n"
    )


@pytest.mark.unit
def test_a_journal_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / "folder.log").mkdir()
    for command in (["status"], ["run", "--no-train"]):
        assert cli.main([command[0], "grid.yaml", "--storage", "folder.log", *command[1:]]) == 2
        err = capsys.readouterr().err
        assert err == "error: folder.log: cannot be read as a journal: Is a directory\n", err
    assert cli.main(["export", "grid.yaml", "--storage", "folder.log"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: folder.log: no such journal file") and err.count("\n") == 1, err


def _queued_journal(tmp_path: Path) -> Path:
    """A real journal: the tiny grid's runs queued, one claimed with an epoch recorded."""
    journal = tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE
    store = Store.open(journal, "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID))))
    lease = store.claim_next()
    assert lease is not None
    store.record_epoch(lease, {**dict.fromkeys(vocab.EPOCH_METRICS, 0.5), "epoch": 1, "step": 10})
    return journal


@pytest.mark.unit
@pytest.mark.parametrize("command", [["status", "grid.yaml"], ["status", "results/tiny"], ["export", "grid.yaml"]])
def test_a_command_that_only_reads_the_store_never_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Not even the repair of a last line cut off mid-write (another process may be writing it)."""
    journal = _queued_journal(tmp_path)
    with open(journal, "ab") as handle:
        handle.write(b'{"op_code": 8, "worker_id": "w", "trial_id": 0, "user_attr": {"epo')
    before = (journal.read_bytes(), journal.stat().st_mtime_ns)
    monkeypatch.chdir(tmp_path)
    assert cli.main(command) == 0
    assert "1 running, " in capsys.readouterr().out
    assert (journal.read_bytes(), journal.stat().st_mtime_ns) == before
    assert sorted(p.name for p in journal.parent.iterdir() if "journal" in p.name) == [vocab.JOURNAL_FILE]
