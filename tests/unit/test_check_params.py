"""The checks' settings are declared once (rltui/checks/*/params.py) and the command line, the
app's check form and the spec are derived from them. The flags, defaults, help texts and form
fields are a public contract: ``data/check_parameters.json`` holds them as they were written by
hand before, and the derived ones must equal it."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from rltui.checks import params
from rltui.checks.rollout import cli as rollout_cli
from rltui.checks.rollout import form as rollout_form
from rltui.checks.rollout.params import PARAMS as ROLLOUT
from rltui.checks.rollout.spec import RolloutSpec
from rltui.checks.workflow import cli as workflow_cli
from rltui.checks.workflow import form as workflow_form
from rltui.checks.workflow.params import PARAMS as WORKFLOW
from rltui.checks.workflow.spec import SpecError, WorkflowSpec

CONTRACT = json.loads((Path(__file__).parent / "data" / "check_parameters.json").read_text())
CHECKS = {"rollout": (rollout_cli, rollout_form, RolloutSpec, ROLLOUT),
          "workflow": (workflow_cli, workflow_form, WorkflowSpec, WORKFLOW)}


def _actions(add) -> list[dict]:
    p = argparse.ArgumentParser(prog="rltui x", add_help=False)
    add(p)
    out = []
    for a in p._actions:
        group = next((g.title for g in p._action_groups if a in g._group_actions), None)
        excl = next((i for i, g in enumerate(p._mutually_exclusive_groups)
                     if a in g._group_actions), None)
        out.append(dict(option_strings=a.option_strings, dest=a.dest, action=type(a).__name__,
                        default=a.default, type=getattr(a.type, "__name__", None),
                        choices=a.choices, required=a.required, metavar=a.metavar, help=a.help,
                        nargs=a.nargs, const=a.const, group=group, exclusive=excl))
    return json.loads(json.dumps(out, default=repr))


def _help(add) -> str:
    p = argparse.ArgumentParser(prog="rltui x")
    add(p)
    return p.format_help()


def _defaults(cls) -> dict[str, str]:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = "factory " + f.default_factory.__name__
        else:
            out[f.name] = "required"
    return out


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_derived_flags_are_the_ones_people_use(check, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps the help to the terminal
    cli = CHECKS[check][0]
    assert _actions(cli.add_arguments) == CONTRACT[check]["actions"]
    assert _help(cli.add_arguments) == CONTRACT[check]["help"]


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_the_derived_form_and_spec_defaults_are_unchanged(check):
    _, form, cls, _ = CHECKS[check]
    assert [dataclasses.asdict(f) for f in form.FIELDS] == CONTRACT[check]["form"]
    assert _defaults(cls) == CONTRACT[check]["spec"]


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_every_setting_is_a_spec_field_with_the_declared_default(check):
    _, _, cls, table = CHECKS[check]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for p in table:
        if not p.spec:
            continue
        assert p.name in fields, p.name
        f = fields[p.name]
        if f.default is not dataclasses.MISSING:
            assert f.default == p.default, p.name
    names = [p.name for p in table]
    assert len(names) == len(set(names))


def test_the_command_line_builds_the_spec_from_the_same_table(tmp_path):
    p = argparse.ArgumentParser()
    rollout_cli.add_arguments(p)
    args = p.parse_args(["--dataset", "d.jsonl", "--reference", "ref", "--server",
                         "http://h:1/v1", "--timeout", "5", "--limit", "3",
                         "--reference-dtype", "bfloat16"])
    spec = rollout_cli.spec_from_args(args)
    assert (spec.dataset, spec.timeout_s, spec.limit, spec.reference_dtype, spec.max_new_tokens,
            spec.api) == ("d.jsonl", 5.0, 3, "bfloat16", 256, "auto")

    p = argparse.ArgumentParser()
    workflow_cli.add_arguments(p)
    args = p.parse_args(["m:C", "--prompt", "hi", "--path", "a", "--path", "b", "--no-probe",
                         "--kwargs", '{"model": "m"}', "--sequential", "0", "--loop-block",
                         "2.5"])
    spec = workflow_cli._spec(args)
    assert (spec.target, spec.prompt, spec.paths, spec.probe_server, spec.extra_kwargs,
            spec.init_kwargs, spec.sequential_prompts, spec.loop_block_s, spec.force) == (
        "m:C", "hi", ("a", "b"), False, {"model": "m"}, {}, 0, 2.5, False)
    args = p.parse_args(["m:C", "--kwargs", "[1]"])
    with pytest.raises(SpecError, match="--kwargs: expected a JSON object, got list"):
        workflow_cli._spec(args)


def test_the_form_reads_its_fields_by_their_declaration(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "x"}\n')
    values = {f.name: f.default for f in rollout_form.FIELDS}
    values.update(dataset=str(data), reference="http://r:1/v1", server="http://s:1/v1",
                  tokenizer="tok", timeout="7.5", api_key="  k  ")
    spec = rollout_form.build_spec(values)
    assert (spec.timeout_s, spec.max_new_tokens, spec.concurrency, spec.limit, spec.api,
            spec.api_key, spec.model) == (7.5, 256, 8, None, "auto", "k", None)
    with pytest.raises(ValueError, match="^timeout: 'soon' is not a number$"):
        rollout_form.build_spec({**values, "timeout": "soon"})
    with pytest.raises(ValueError, match="^max new tokens: must be at least 1$"):
        rollout_form.build_spec({**values, "max_new_tokens": "0"})
    with pytest.raises(ValueError, match="^fill in reference, server$"):
        rollout_form.build_spec({**values, "reference": "", "server": " "})

    values = {f.name: f.default for f in workflow_form.FIELDS}
    values.update(target="m:C", prompt="hi", concurrency="3", kwargs='{"a": 1}')
    spec = workflow_form.build_spec(values)
    assert (spec.timeout, spec.global_bs, spec.concurrency, spec.extra_kwargs, spec.paths,
            spec.base_url) == (60.0, 256, 3, {"a": 1}, (), None)
    with pytest.raises(ValueError, match="^concurrency cap: 'x' is not a whole number$"):
        workflow_form.build_spec({**values, "concurrency": "x"})


def test_help_names_the_default_once():
    p = params.Param("n", "--n", params.FLOAT, 120.0, help="per request (default {default})")
    assert p.help_text == "per request (default 120)"
    assert params.shown(0.5) == "0.5" and params.shown("auto") == "auto"


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_placeholders_read_as_hints_not_as_values(check):
    """An empty field shows what leaving it empty gives ("default: 256") or an example marked
    as one ("e.g. http://..."), never a bare value that reads as if it were filled in."""
    _, form, _, table = CHECKS[check]
    by_key = {f.name: f for f in form.FIELDS}
    for p in table:
        if p.form is None:
            continue
        text = by_key[params.form_key(p)].placeholder
        if p.form.placeholder is None or p.form.prefill:
            assert text.startswith(f"default: {params.shown(p.default)}"), (p.name, text)
        looks_like_a_value = any(mark in text for mark in ("://", ".jsonl", "{", ":"))
        assert text.startswith("default: ") or "e.g. " in text or not looks_like_a_value, \
            (p.name, text)


def test_a_placeholder_names_the_default_once():
    p = params.Param("t", "--t", params.FLOAT, 60.0, form=params.Form("t", "default: {default} s"))
    assert params.placeholder(p) == "default: 60 s"
    assert params.placeholder(params.Param("n", "--n", params.INT, 8,
                                           form=params.Form("n"))) == "default: 8"
    assert params.placeholder(params.Param("m", "--m", form=params.Form("m"))) == ""
