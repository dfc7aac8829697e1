"""Whether train may write a directory: never over something else, never over a finished run without --overwrite."""

import json
import os

import pytest

from keras_transformer.runs.directory import RunDirectoryError
from keras_transformer.runs.directory import check_output_path
from keras_transformer.runs.directory import check_resume_settings
from keras_transformer.runs.directory import prepare_run_directory


def test_a_file_or_a_foreign_directory_is_refused_and_left_alone(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirectoryError, match="file: exists and is not a directory"):
        check_output_path(tmp_path / "file")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(RunDirectoryError, match="not a keras-transformer run directory"):
        check_output_path(tmp_path / "mine")
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]
    check_output_path(tmp_path / "new" / "run")
    assert (tmp_path / "new" / "run").is_dir()


def test_a_finished_run_needs_overwrite_which_removes_only_run_files(tmp_path):
    run = tmp_path / "run"
    (run / "tokenizers" / "source").mkdir(parents=True)
    (run / "model.keras").write_text("model")
    (run / "config.json").write_text("{}")
    (run / "README.txt").write_text("the user's own notes")
    with pytest.raises(RunDirectoryError, match="holds a finished run .*--overwrite"):
        prepare_run_directory(run)
    assert prepare_run_directory(run, overwrite=True) == "overwrite"
    assert os.listdir(run) == ["README.txt"]


def test_a_started_run_resumes_only_with_its_settings(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"model": {"num_layers": 2, "src_vocab_size": 50},
                                                 "training": {"vocab_size": 100, "seed": 0}}))
    assert prepare_run_directory(run) == "resume"
    check_resume_settings(run, {"num_layers": 2, "src_vocab_size": 50}, {"vocab_size": 100, "seed": 0})
    with pytest.raises(RunDirectoryError, match="started with num_layers = 2, and this command asks for 3"):
        check_resume_settings(run, {"num_layers": 3}, {"vocab_size": 100, "seed": 0})
    with pytest.raises(RunDirectoryError, match="started with vocab_size = 100"):
        check_resume_settings(run, {"num_layers": 2}, {"vocab_size": 200, "seed": 0})
    (run / "config.json").write_text("{\"model\": ")
    with pytest.raises(RunDirectoryError, match="config.json: damaged"):
        check_resume_settings(run, {}, {})
