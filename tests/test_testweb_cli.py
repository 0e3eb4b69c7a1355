"""``python -m scrapy_twolevel.testweb``: every option explained, bad values refused early."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_twolevel.testweb.__main__ import build_parser

pytestmark = pytest.mark.glue

DOCS = Path(__file__).parents[1] / "docs" / "testweb.rst"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(commands.choices)


def test_every_subcommand_exists() -> None:
    assert set(_subcommands()) == {"serve", "crawl", "news"}


@pytest.mark.parametrize("name", ["serve", "crawl"])
def test_every_option_has_a_help_text_shown_by_help(name: str) -> None:
    sub = _subcommands()[name]
    options = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
    assert len(options) >= 7
    lacking = [a.option_strings for a in options if not a.help or a.help == argparse.SUPPRESS]
    assert lacking == []
    text = " ".join(sub.format_help().split())  # unwrap argparse's line breaks
    for action in options:
        assert action.option_strings[0] in text
        first_words = " ".join(action.help.split()[:4]) % {"default": action.default}
        assert first_words in text, action.option_strings


@pytest.mark.parametrize("name", ["serve", "crawl", "news"])
def test_every_option_is_documented(name: str) -> None:
    docs = DOCS.read_text()
    assert f".. program:: python -m scrapy_twolevel.testweb {name}" in docs
    for action in _subcommands()[name]._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f".. option:: {option}" in docs, option


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--hosts", "0"], "argument --hosts: expected an integer >= 1, got '0'"),
        (["crawl", "--pages-per-host", "x"], "expected an integer >= 1, got 'x'"),
        (["serve", "--delay-scale", "-1"], "argument --delay-scale: expected a number >= 0"),
        (["serve", "--port", "65536"], "argument --port: expected a port in 0..65535"),
        (["crawl", "--interrupt-after", "0"], "argument --interrupt-after: expected an integer"),
        (["crawl", "--set", "JOBDIR"], "expected NAME=VALUE, got 'JOBDIR'"),
    ],
)
def test_bad_values_are_refused_with_the_rule(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_settings_parse_as_json_when_they_can() -> None:
    args = build_parser().parse_args(
        ["crawl", "--set", "A=3", "--set", 'B={"x": 1}', "--set", "C=text"]
    )
    assert dict(args.set) == {"A": 3, "B": {"x": 1}, "C": "text"}


def test_help_runs_as_a_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy_twolevel.testweb", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--ready-file PATH" in proc.stdout
