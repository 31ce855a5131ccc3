"""Ctrl-C anywhere in a ``zkcoord`` command: one line on stderr, with the resume hint the command set, and exit 130;
never a traceback. Pure: a stand-in command raises KeyboardInterrupt as Ctrl-C would."""

import argparse

import pytest

import zkcoord.cli
from zkcoord.cli import common


def command(run):
    """A parser whose one command runs ``run(args)``."""

    def build_parser():
        parser = argparse.ArgumentParser(prog="zkcoord")
        parser.add_argument("--log-level", default="WARNING")
        parser.set_defaults(func=run)
        return parser

    return build_parser


def interrupted(*_):
    raise KeyboardInterrupt


def main_with(monkeypatch, capsys, run):
    monkeypatch.setattr(zkcoord.cli, "build_parser", command(run))
    code = zkcoord.cli.main([])
    return code, capsys.readouterr().err


def test_ctrl_c_is_one_line_and_130(monkeypatch, capsys):
    assert main_with(monkeypatch, capsys, interrupted) == (130, "interrupted\n")


def test_the_resume_hint_a_command_set_is_in_the_line(monkeypatch, capsys):
    def step(args):
        common.set_resume_hint("step 0002 under way for group orders", "zkcoord migrate up --group orders")
        interrupted()

    code, err = main_with(monkeypatch, capsys, step)
    assert (code, err) == (
        130,
        "interrupted; the state is step 0002 under way for group orders; run zkcoord migrate up --group orders "
        "to resume\n",
    )


def test_a_command_that_handled_ctrl_c_itself_still_exits_130(monkeypatch, capsys):
    def stopped_cleanly(args):
        common.mark_interrupted()  # what interrupt_event's SIGINT handler does before the command returns
        return common.EXIT_OK

    assert main_with(monkeypatch, capsys, stopped_cleanly) == (130, "interrupted\n")


def test_the_next_command_starts_without_the_last_ones_interruption_or_hint(monkeypatch, capsys):
    def step(args):
        common.set_resume_hint("half done", "it again")
        interrupted()

    main_with(monkeypatch, capsys, step)
    assert main_with(monkeypatch, capsys, lambda args: common.EXIT_PROBLEM) == (1, "")
    assert main_with(monkeypatch, capsys, interrupted) == (130, "interrupted\n")


@pytest.mark.parametrize("code", [common.EXIT_OK, common.EXIT_PROBLEM, common.EXIT_USAGE])
def test_without_ctrl_c_the_commands_code_stands(monkeypatch, capsys, code):
    assert main_with(monkeypatch, capsys, lambda args: code) == (code, "")
