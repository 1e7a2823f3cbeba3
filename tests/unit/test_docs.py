"""Docs that cannot drift: every `recon ...` command line in README.md and docs/ names commands
and flags that exist (and parses, where it is concrete); every YAML example is a pipeline
`recon validate` accepts; the pipeline YAML's JSON Schema and the loader accept the same keys;
no page points outside the repository."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from recon import config
from recon.cli import build_parser
from recon.core.findings import FINDINGS
from recon.formats import FORMATS
from recon.rawdumps import LAYOUTS
from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SCHEMA = json.loads((ROOT / "docs" / "reference" / "pipeline.schema.json").read_text())
BASE = {
    "name": "doc",
    "format": "debezium_json",
    "raw_path": "raw",
    "topics": ["t"],
    "warehouse": "wh",
    "start": "2026-11-20T00:00:00Z",
    "tables": {"shop.orders": {}},
}


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def command_lines(text: str) -> list[tuple[str, bool]]:
    """Every `recon ...` command: lines of code blocks (with the flags of the indented lines
    that continue them), which must parse where they are concrete, and inline code spans,
    which mention a command and some of its flags."""
    found: list[str] = []
    for _, body in _blocks(text):
        for line in body.splitlines():
            cmd = re.sub(r"^\s*(\$ |\.venv/bin/)?", "", line)
            if cmd.startswith("recon "):
                found.append(cmd.split("  ")[0])
            elif found and line.startswith(" ") and line.strip().startswith("[--"):
                found[-1] += " " + line.strip().split("  ")[0]
    spans = []
    outside = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    for span in re.findall(r"`([^`\n]+)`", outside):
        if span.startswith("recon ") and not span.split()[1].endswith(":"):
            spans.append(span)
    return [(c, True) for c in found] + [(c, False) for c in spans]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("recon has no subcommands")


def check_command(line: str, whole: bool = True) -> str | None:
    """Why `line` is not a recon command line, or None; `whole`: a concrete line (no
    placeholders) must parse as it is."""
    parser = build_parser()
    subs = _subparsers(parser)
    words = line.replace("[", " ").replace("]", " ").replace("|", " ").split()
    if words[1].startswith("--"):
        top = {s for a in parser._actions for s in a.option_strings}
        return None if words[1] in top else f"no option {words[1]}"
    sub = subs.get(words[1])
    if sub is None:
        return f"no command {words[1]!r}"
    known = {s for a in sub._actions for s in a.option_strings}
    for w in words[2:]:
        flag = w.split("=")[0].rstrip(",.;)")
        if flag.startswith("--") and flag not in known:
            return f"recon {words[1]} has no flag {flag}"
    if whole and not re.search(r"[\[\]|]|\.\.\.|<", line):  # a concrete line: it parses
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit:
            return "does not parse"
    return None


ALL_COMMANDS = [
    (p.relative_to(ROOT).as_posix(), c, whole)
    for p in PAGES
    for c, whole in command_lines(p.read_text())
]


def test_the_pages_show_commands() -> None:
    """The extraction finds them (a test that read nothing would pass anything)."""
    assert len(ALL_COMMANDS) > 40
    named = {c.split()[1] for _, c, _ in ALL_COMMANDS}
    assert named >= {"inspect", "init", "run", "validate", "export"}
    assert sum(whole for _, _, whole in ALL_COMMANDS) > 15


@pytest.mark.parametrize(("page", "line", "whole"), ALL_COMMANDS)
def test_every_command_line_names_real_commands_and_flags(
    page: str, line: str, whole: bool
) -> None:
    why = check_command(line, whole)
    assert why is None, f"{page}: {line}: {why}"


def test_a_wrong_flag_or_command_is_caught() -> None:
    assert "no flag --hour" in str(
        check_command("recon export --pipeline p.yaml --table a.b --hour 1")
    )
    assert "no command" in str(check_command("recon frobnicate --pipeline p.yaml"))
    assert check_command("recon run --pipeline p.yaml --from 2026-11-20T00 --oops") is not None


class _Strings(yaml.SafeLoader):
    """YAML as JSON Schema sees it in an editor: times stay text."""


_Strings.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def yaml_examples() -> list[tuple[str, int, str]]:
    out = []
    for p in PAGES:
        for i, (lang, body) in enumerate(_blocks(p.read_text())):
            if lang == "yaml":
                out.append((p.relative_to(ROOT).as_posix(), i, body))
    return out


def _as_pipeline(body: str) -> dict[str, Any]:
    doc = yaml.load(body, Loader=_Strings)
    assert isinstance(doc, dict)
    return doc if "name" in doc else {**BASE, **doc}


@pytest.mark.parametrize(("page", "block", "body"), yaml_examples())
def test_every_yaml_example_passes_validate_and_the_schema(
    tmp_path: Path, page: str, block: int, body: str
) -> None:
    doc = _as_pipeline(body)
    path = tmp_path / "example.yaml"
    path.write_text(yaml.safe_dump(doc))
    config.load_config(path)  # raises ConfigError with the line if not
    jsonschema.validate(doc, SCHEMA)


def test_the_project_pipelines_pass_the_schema() -> None:
    files = sorted((ROOT / "pipelines").glob("*.yaml"))
    assert files
    for f in files:
        text = f.read_text()
        assert text.startswith(
            "# yaml-language-server: $schema=../docs/reference/pipeline.schema.json"
        )
        jsonschema.validate(yaml.load(text, Loader=_Strings), SCHEMA)


def _props(node: dict[str, Any]) -> set[str]:
    return set(node.get("properties", {}))


def test_the_schema_and_the_loader_take_the_same_keys() -> None:
    props = SCHEMA["properties"]
    assert _props(SCHEMA) == config._TOP_KEYS
    assert set(SCHEMA["required"]) == set(config._REQUIRED)
    assert _props(props["tables"]["additionalProperties"]) == config._TABLE_KEYS
    assert _props(props["audit"]) == config._AUDIT_KEYS
    assert _props(props["airflow"]) == config._AIRFLOW_KEYS
    assert _props(props["notify"]) == config._NOTIFY_KEYS
    assert _props(props["dump"]) == config._DUMP_KEYS
    assert _props(props["snapshot"]) == {"path"}
    (name, topic) = props["topics"]["items"]["oneOf"]
    assert name["type"] == "string" and _props(topic) == config._TOPIC_KEYS
    assert props["format"]["enum"] == list(FORMATS)
    assert props["audit"]["properties"]["fail_on"]["items"]["enum"] == list(FINDINGS)
    assert props["write_mode"]["enum"] == list(config.WRITE_MODES)
    assert props["dump"]["properties"]["layout"]["enum"] == list(LAYOUTS)


def _described(node: Any, where: str = "") -> list[str]:
    missing = []
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            if "description" not in sub:
                missing.append(f"{where}{name}")
            missing += _described(sub, f"{where}{name}.")
        if isinstance(node.get("additionalProperties"), dict):
            missing += _described(node["additionalProperties"], f"{where}*.")
        for i, sub in enumerate(node.get("items", {}).get("oneOf", [])):
            missing += _described(sub, f"{where}[{i}].")
    return missing


def test_every_key_of_the_schema_is_described() -> None:
    assert _described(SCHEMA) == []


@pytest.mark.parametrize(
    "extra",
    [{"bogus": 1}, {"dump": {"layout": "kafka-connect-s3", "bogus": 1}}, {"audit": {"x": 1}}],
)
def test_the_schema_and_the_loader_refuse_the_same_unknown_keys(
    tmp_path: Path, extra: dict
) -> None:
    doc = {**BASE, **extra}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(config.ConfigError):
        config.load_config(path)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


OUTSIDE = re.compile(
    r"\.\./shared|contract(\.md| \d)|house-style|(?<!docs/)architecture\.md\b(?! is)|"
    r"(?<![/\w])formats\.md \"|\bissue \d+"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_page_points_outside_the_repository(page: Path) -> None:
    text = page.read_text()
    assert not OUTSIDE.search(text), OUTSIDE.search(text)
    # the project's own files a page names (pipelines/<yours>.yaml are the reader's)
    own = r"(?<![\w/.])((?:docs|benchmarks|recon|tests|scripts)/[\w./-]+\.\w+)"
    for ref in re.findall(own, text):
        assert (ROOT / ref.rstrip(".")).exists(), f"{page.name} names {ref}, which is not here"


def test_the_readme_is_a_newcomers_page() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
