"""The command line's entry point (cli/__init__.py: build_parser and main): the help explains every
command, and an unknown choice is argparse's error."""

from __future__ import annotations

import pytest

from labeldp.cli import build_parser, main


def test_help_explains_every_command(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "train" in text and "demo" in text and "download" in text
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for flag in ("--dataset", "--method", "--epsilon", "--stages", "--epochs", "--seed", "--out", "--data-dir"):
        assert flag in text


def test_unknown_dataset_is_an_argparse_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "imagenet", "--out", "x"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "sweep", "tune", "audit"])
def test_every_command_that_trains_takes_threads(command) -> None:
    assert "--threads" in build_parser(command)._subparsers._group_actions[0].choices[command].format_help()


def test_ctrl_c_while_the_command_starts_is_one_line(monkeypatch, capsys) -> None:
    import labeldp.cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(labeldp.cli, "build_parser", interrupted)
    assert main(["train", "--out", "x"]) == 130
    assert capsys.readouterr().err.strip() == "labeldp: interrupted."
