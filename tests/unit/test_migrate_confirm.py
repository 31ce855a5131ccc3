"""The confirmation of a run of several steps lists them on stdout, or on stderr with --json (stdout is the JSON)."""

import io
import sys
from types import SimpleNamespace

import pytest

from zkcoord.cli.migrate import _confirmed


class Step:
    def __init__(self, name):
        self.name = name

    def describe(self, direction):
        return f"what {self.name} does"


PLANS = {"g": [SimpleNamespace(step=Step(name), direction="up") for name in ("0001_a", "0002_b")]}


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("json", [False, True])
def test_the_steps_asked_about_go_where_the_json_does_not(monkeypatch, capsys, json):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert _confirmed(PLANS, SimpleNamespace(action="up", json=json))
    out, err = capsys.readouterr()
    listed, other = (err, out) if json else (out, err)
    assert "group g: 0001_a up: what 0001_a does" in listed and "0002_b" in listed
    assert "0001_a" not in other and "Proceed? [y/N]" in err
