"""``rltui diagnose --hosts/--hostfile/--slurm-job``: flag checks (usage errors, exit 2), the
agents' command lines, and the Slurm nodelist read through a fake ``squeue`` on PATH (this
machine has no Slurm; the fake stands for the real client and records how it was called)."""

from __future__ import annotations

import os
import stat

import pytest

from rltui import cli
from rltui.cli import hosts as cluster_run
from rltui.remote.transports import SLURM, SSH
from rltui.sources.slurm import SlurmError, job_nodelist, parse_nodelist, squeue_argv


def diagnose(argv, capsys) -> tuple[int, str]:
    code = cli.main(["diagnose", *argv])
    return code, capsys.readouterr().err


def args_of(*argv: str):
    return cli.build_parser().parse_args(["diagnose", *argv])


# -- usage errors -----------------------------------------------------------------------------


def test_a_bad_hostlist_is_a_usage_error_that_points_at_the_column(capsys):
    code, err = diagnose(["--hosts", "node[1-3,gpu-a1", "--json"], capsys)
    assert code == cli.EXIT_USAGE
    assert "--hosts: '[' is never closed" in err and "(column 5)" in err
    assert "    ^" in err  # the caret under the '['


def test_an_unknown_hostfile_is_a_usage_error(tmp_path, capsys):
    code, err = diagnose(["--hostfile", str(tmp_path / "nope"), "--json"], capsys)
    assert code == cli.EXIT_USAGE and "not found" in err


def test_a_bad_hostfile_line_says_the_line(tmp_path, capsys):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node01 slots=8\nnode[3-1]\n")
    code, err = diagnose(["--hostfile", str(hostfile)], capsys)
    assert code == cli.EXIT_USAGE and "reversed" in err and "line 2" in err


def test_an_empty_hostfile_is_a_usage_error(tmp_path, capsys):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# nothing\n\n")
    code, err = diagnose(["--hostfile", str(hostfile)], capsys)
    assert code == cli.EXIT_USAGE and "names no host" in err


@pytest.mark.parametrize("argv, said", [
    (["--hosts", "a", "--slurm-job", "12"], "give one of"),
    (["--hosts", "a", "--pid", "5"], "--pid reads this node only"),
    (["--hosts", "a", "--replay", "x"], "--replay reads this node only"),
    (["--hosts", "a", "--duration", "-1"], "--duration must not be negative"),
    (["--hosts", "a", "--connect-timeout", "0"], "--connect-timeout must be positive"),
    (["--slurm-job", "12", "--ssh-option=-p2"], "--ssh-option applies to --hosts"),
    (["--ssh-option=-p2"], "--ssh-option needs --hosts"),
    (["--no-dump"], "--no-dump needs --hosts"),
    (["--hosts", ""], "names no host"),
    (["--hosts", "a:22"], "a port is not part of a host"),
    (["--slurm-job", "12; rm"], "not a Slurm job id"),
])
def test_flag_problems_are_usage_errors(argv, said, capsys):
    code, err = diagnose(argv, capsys)
    assert code == cli.EXIT_USAGE and said in err, err


def test_the_app_takes_the_host_flags_and_checks_them_the_same_way(capsys):
    args = cli.build_parser().parse_args(["--hosts", "node[01-02]", "--connect-timeout", "3"])
    assert args.command is None and args.hosts == "node[01-02]" and cluster_run.wanted(args)
    assert [x.host for x in cluster_run.launches(args)] == ["node01", "node02"]
    for argv, said in ((["--hosts", "a", "--pid", "5"], "--pid reads this node only"),
                       (["--hosts", "a", "--ray", "h"], "give one of"),
                       (["--ray", "h", "--ssh-option=-p2"], "not used with --ray")):
        assert cli.main(argv) == cli.EXIT_USAGE
        assert said in capsys.readouterr().err


@pytest.mark.parametrize("command", [["demo"], ["replay", "x"], ["agent"], ["stacks", "x"]])
def test_host_flags_before_another_command_are_refused(command, capsys):
    assert cli.main(["--hosts", "a", *command]) == cli.EXIT_USAGE
    assert "--hosts: not an option of" in capsys.readouterr().err


def test_a_host_flag_before_the_command_is_kept():
    args = cli.build_parser().parse_args(["--hosts", "a", "diagnose", "--json"])
    assert args.hosts == "a" and args.json


def test_the_agents_host_option_is_not_taken_for_an_abbreviation_of_hosts():
    # argparse would read --host as an ambiguous prefix of --hosts/--hostfile at the top level.
    args = cli.build_parser().parse_args(["agent", "--host", "node07"])
    assert args.command == "agent" and args.host == "node07"


# -- command lines ----------------------------------------------------------------------------


def test_ssh_launches_carry_the_users_options_the_remote_rltui_and_the_job_flags():
    plan = cluster_run.launches(args_of(
        "--hosts", "alice@node[01-02]", "--ssh-option", "-F '/etc/test ssh'", "--ssh-option=-p2222",
        "--remote-rltui", "~/venv/bin/rltui", "--connect-timeout", "3",
        "--log", "/job/*.log", "--match", "train"))
    assert [(x.host, x.transport) for x in plan] == [("node01", SSH), ("node02", SSH)]
    argv = plan[1].argv
    assert argv[:4] == ("ssh", "-F", "/etc/test ssh", "-p2222")
    assert "ConnectTimeout=3" in argv and "alice@node02" in argv
    assert argv[-1] == ("~/venv/bin/rltui agent --host node02 --match train "
                        "--log '/job/*.log'")


def test_a_hostfile_gives_its_hosts(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("gpu-a[1-2] slots=8  # the rollout nodes\ngpu-b3:8\n")
    plan = cluster_run.launches(args_of("--hostfile", str(hostfile)))
    assert [x.host for x in plan] == ["gpu-a1", "gpu-a2", "gpu-b3"]


# -- Slurm ------------------------------------------------------------------------------------


@pytest.fixture
def fake_squeue(tmp_path, monkeypatch):
    """``squeue`` on PATH: records its argv, prints $FAKE_OUT, exits $FAKE_RC."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "squeue"
    script.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$FAKE_CALLS"\n'
                      'printf "%b" "$FAKE_OUT"\nprintf "%b" "$FAKE_ERR" >&2\nexit "$FAKE_RC"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CALLS", str(calls))
    monkeypatch.setenv("FAKE_ERR", "")
    monkeypatch.setenv("FAKE_RC", "0")

    def answer(out: str, rc: int = 0, err: str = "") -> None:
        monkeypatch.setenv("FAKE_OUT", out)
        monkeypatch.setenv("FAKE_RC", str(rc))
        monkeypatch.setenv("FAKE_ERR", err)
    answer.calls = calls
    return answer


def test_squeue_is_asked_for_the_jobs_nodelist_and_srun_starts_one_agent_per_node(
        fake_squeue):
    fake_squeue("node[01-02,07],gpu-a3\n")
    plan = cluster_run.launches(args_of("--slurm-job", "4242", "--remote-rltui",
                                        "/shared/venv/bin/rltui", "--log", "/job/out.log"))
    assert fake_squeue.calls.read_text().split("\n")[:-1] == ["-h", "-j", "4242", "-o", "%N"]
    assert [(x.host, x.transport) for x in plan] == [
        ("node01", SLURM), ("node02", SLURM), ("node07", SLURM), ("gpu-a3", SLURM)]
    assert plan[2].argv == (
        "srun", "--overlap", "--jobid=4242", "--nodes=1", "--ntasks=1", "--nodelist=node07",
        "--job-name=rltui-agent", "/shared/venv/bin/rltui", "agent", "--host", "node07",
        "--log", "/job/out.log")


def test_squeues_refusal_is_a_usage_error_with_its_words(fake_squeue, capsys):
    fake_squeue("", rc=1, err="slurm_load_jobs error: Invalid job id specified\n")
    code, err = diagnose(["--slurm-job", "99"], capsys)
    assert code == cli.EXIT_USAGE
    assert "Slurm job 99 does not exist or has ended" in err and "Invalid job id" in err


def test_a_pending_job_has_no_nodes(fake_squeue):
    fake_squeue("\n")
    with pytest.raises(SlurmError, match="has no nodes"):
        job_nodelist("5")


def test_no_squeue_here_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmError, match="squeue is not found"):
        job_nodelist("5")


def test_parse_nodelist_joins_components_and_skips_nulls():
    assert parse_nodelist("7", "node[1-2]\n(null)\n\ngpu3\n") == "node[1-2],gpu3"
    assert squeue_argv("12_3") == ["squeue", "-h", "-j", "12_3", "-o", "%N"]
    with pytest.raises(SlurmError):
        squeue_argv("-j")
