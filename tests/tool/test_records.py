"""Run records: atomic saves, no silent overwrite, clear errors on bad files."""

import json
import os

import pytest

from ddp_lessons.tool import records
from ddp_lessons.tool.records import RecordError


def _rec():
    return records.make_record("test", {"world_size": 2}, [{"rank": 0, "steps": []}])


def test_round_trip_names_the_machine(tmp_path):
    path = records.save(_rec(), "r1", runs_dir=tmp_path)
    assert path == tmp_path / "r1.json"
    rec = records.load("r1", runs_dir=tmp_path)
    assert rec["schema_version"] == records.SCHEMA_VERSION and rec["kind"] == "test"
    for key in ("torch", "python", "cpu_count", "gpus", "nccl", "gloo"):
        assert key in rec["machine"]
    assert "torch" in records.describe_machine(rec)
    assert records.list_records("test", runs_dir=tmp_path) == ["r1"]


def test_existing_record_is_never_overwritten_silently(tmp_path):
    records.save(_rec(), "r1", runs_dir=tmp_path)
    with pytest.raises(RecordError, match="exists: pass overwrite=True"):
        records.save(_rec() | {"config": {"changed": True}}, "r1", runs_dir=tmp_path)
    assert records.load("r1", runs_dir=tmp_path)["config"] == {"world_size": 2}
    records.save(_rec() | {"config": {"changed": True}}, "r1", runs_dir=tmp_path, overwrite=True)
    assert records.load("r1", runs_dir=tmp_path)["config"] == {"changed": True}
    assert sorted(os.listdir(tmp_path)) == ["r1.json"]  # no temporary file left


def test_corrupt_file_gives_a_clear_error(tmp_path):
    (tmp_path / "bad.json").write_text('{"schema": "ddp-lessons/run", "schema_ver')
    with pytest.raises(RecordError, match="not valid JSON.*record the run again"):
        records.load("bad", runs_dir=tmp_path)


def test_older_schema_gives_a_clear_error(tmp_path):
    rec = _rec() | {"schema_version": 0}
    (tmp_path / "old.json").write_text(json.dumps(rec))
    with pytest.raises(RecordError, match="schema version 0, this ddp-lessons reads version 1"):
        records.load("old", runs_dir=tmp_path)


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(RecordError, match="no run record"):
        records.load("nope", runs_dir=tmp_path)
    (tmp_path / "other.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="not a ddp-lessons run record"):
        records.load("other", runs_dir=tmp_path)


def test_every_committed_record_loads():
    for name in records.list_records(runs_dir=records.RUNS_DIR):
        rec = records.load(name, runs_dir=records.RUNS_DIR)
        assert rec["machine"]["torch"]


def test_records_go_to_runs_in_the_current_directory_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(records.ENV_VAR, raising=False)
    path = records.save(_rec(), "mine")
    assert path.resolve() == (tmp_path / "runs" / "mine.json").resolve()
    assert records.load("mine")["kind"] == "test" and "mine" in records.list_records("test")


def test_the_environment_variable_names_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(records.ENV_VAR, str(tmp_path / "elsewhere"))
    assert records.save(_rec(), "mine") == tmp_path / "elsewhere" / "mine.json"
    assert records.load("mine")["kind"] == "test"


def test_a_name_not_in_the_users_folder_is_read_from_the_course_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(records.ENV_VAR, raising=False)
    name = records.list_records(runs_dir=records.RUNS_DIR)[0]
    assert records.load(name) == records.load(name, runs_dir=records.RUNS_DIR)
    assert not (tmp_path / "runs").exists()  # reading writes nothing


def test_the_default_folder_is_never_inside_the_package(tmp_path, monkeypatch):
    import ddp_lessons
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(records.ENV_VAR, raising=False)
    package = os.path.dirname(ddp_lessons.__file__)
    assert not str(records.default_dir().resolve()).startswith(package)


def test_a_record_names_the_commit_from_git_or_from_the_environment(monkeypatch):
    monkeypatch.delenv("DDP_LESSONS_COMMIT", raising=False)
    from_git = records.source_commit()
    assert from_git is None or len(from_git.split("+")[0]) == 40      # a checkout: HEAD's hash
    monkeypatch.setenv("DDP_LESSONS_COMMIT", "abc1234")                # a copy without .git
    assert records.source_commit() == "abc1234"
    assert records.make_record("x", {}, [])["commit"] == "abc1234"


def test_a_records_line_names_its_commit_an_uncommitted_tree_and_another_torch():
    import torch
    rec = {"commit": "2de9dd4", "commit_note": "made from 2de9dd4 with uncommitted wording changes",
           "created": "2026-12-04T17:00:00+00:00",
           "machine": {"torch": "2.11.0+cu130", "python": "3.12.3", "gpus": ["NVIDIA H200"], "nccl": "2.28.9",
                       "driver": "580", "cpu_count": 16}}
    line = records.describe_machine(rec)
    assert line.endswith(f"recorded 2026-12-04 at commit 2de9dd4, from an uncommitted tree (read here with torch "
                         f"{torch.__version__})"), line
    rec.update(commit=None, commit_note=None)
    rec["machine"]["torch"] = torch.__version__
    assert records.describe_machine(rec).endswith("at no recorded commit")
    assert records.describe_machine(dict(rec, live=True)).endswith("measured live in this run")


def test_a_saved_record_names_paths_inside_the_checkout_relative_to_it(tmp_path):
    from ddp_lessons.tool.paths import REPO
    rec = records.make_record("t", {"cmd": [str(REPO / ".venv" / "bin" / "torchrun"), "/elsewhere/x.py"]},
                              {"argv": (str(REPO / "src" / "s.py"), "--n", 2)})
    back = records.load(records.save(rec, "t", runs_dir=tmp_path))
    assert back["config"]["cmd"] == [".venv/bin/torchrun", "/elsewhere/x.py"]
    assert back["results"]["argv"] == ["src/s.py", "--n", 2]
