"""Hostlists, --hosts values and hostfiles (rltui.remote.hostlist).

The expansion cases include the examples Slurm's own documentation gives: slurm.conf(5)
(NodeName), Slurm::Hostlist(3pm) and slurm_hostlist_create(3).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltui.remote.hostlist import (
    MAX_HOSTS,
    HostlistError,
    Target,
    compress,
    count,
    expand,
    parse_hostfile,
    parse_hosts,
)


def names(prefix: str, numbers, width: int = 0) -> list[str]:
    return [f"{prefix}{str(n).zfill(width)}" for n in numbers]


EXPANSIONS = [
    # slurm.conf(5), NodeName
    ("alpha,beta,gamma", ["alpha", "beta", "gamma"]),
    ("linux[0-64,128]", names("linux", [*range(65), 128])),
    ("lx[15,18,32-33]", ["lx15", "lx18", "lx32", "lx33"]),
    ("linux[0000-1023]", names("linux", range(1024), 4)),
    ("rack[0-63]_blade[0-41]", [f"rack{r}_blade{b}" for r in range(64) for b in range(42)]),
    # Slurm::Hostlist(3pm): commas or whitespace between names
    ("node1,node[2-5,12]", ["node1", "node2", "node3", "node4", "node5", "node12"]),
    ("tux[0-5,12,20-25]", names("tux", [*range(6), 12, *range(20, 26)])),
    ("node21 node[27-34]", ["node21", *names("node", range(27, 35))]),
    ("a\tb", ["a", "b"]),
    # slurm_hostlist_create(3)
    ("linux[1-3,6]", ["linux1", "linux2", "linux3", "linux6"]),
    # the examples
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("gpu-a[1-2],gpu-b3", ["gpu-a1", "gpu-a2", "gpu-b3"]),
    ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
    # zero padding: each range keeps the width of its low bound, as Slurm does
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[01-02,3,004]", ["n01", "n02", "n3", "n004"]),
    ("n[1-010]", names("n", range(1, 11))),  # the high bound's zeros do not count
    # commas inside brackets separate numbers; between names, names
    ("a[1,3],b[2],c", ["a1", "a3", "b2", "c"]),
    ("[1-3]", ["1", "2", "3"]),
    # order and duplicates as written (scontrol show hostnames keeps them)
    ("tux[2,1-2]", ["tux2", "tux1", "tux2"]),
    ("b1,a1", ["b1", "a1"]),
    # empty names are skipped; an empty list is empty
    ("a,,b,", ["a", "b"]),
    ("", []),
    (" , ", []),
    # a suffix after the last group (pdsh, ClusterShell); three groups multiply out
    ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ("r[1-2]c[1-2]n[1-2]", [f"r{r}c{c}n{n}" for r in (1, 2) for c in (1, 2) for n in (1, 2)]),
    ("gpu.node[1-2]", ["gpu.node1", "gpu.node2"]),
]


@pytest.mark.parametrize(("hostlist", "expected"), EXPANSIONS, ids=[e[0] for e in EXPANSIONS])
def test_expand(hostlist, expected):
    assert expand(hostlist) == expected
    assert count(hostlist) == len(expected)


ERRORS = [
    # (hostlist, 0-based position, the problem's start)
    ("node[1-3", 4, "'[' is never closed"),
    ("node]1", 4, "']' without a matching '['"),
    ("a,b[1-2]],c", 8, "']' without a matching '['"),
    ("n[1[2]]", 3, "'[' inside brackets"),
    ("n[1, 2]", 4, "space inside brackets"),
    ("node[3-1]", 5, "range 3-1 is reversed"),
    ("a,node[1,5-2]", 9, "range 5-2 is reversed"),
    ("node[]", 5, "empty range"),
    ("node[1,,2]", 7, "empty range"),
    ("node[1-]", 5, "'1-' is not a number or a range"),
    ("node[-1]", 5, "'-1' is not a number or a range"),
    ("node[a-b]", 5, "'a-b' is not a number or a range"),
    ("n[1-2-3]", 2, "'1-2-3' is not a number or a range"),
    ("ok,n[1-1000000]", 3, "expands to more than 100,000 hosts"),
    ("r[0-999]n[0-999]", 0, "expands to more than 100,000 hosts"),
]


@pytest.mark.parametrize(("hostlist", "position", "problem"), ERRORS,
                         ids=[e[0] for e in ERRORS])
def test_malformed_hostlists_say_where(hostlist, position, problem):
    with pytest.raises(HostlistError) as info:
        expand(hostlist)
    err = info.value
    assert err.problem.startswith(problem)
    assert err.position == position
    assert f"(column {position + 1})" in str(err)
    assert err.pointer() == f"{hostlist}\n{' ' * position}^"


def test_the_limit_counts_the_whole_list_and_is_checked_before_expanding():
    assert len(expand("n[1-60000],m[1-40000]")) == MAX_HOSTS
    with pytest.raises(HostlistError, match="more than 100,000"):
        expand("n[1-60000],m[1-40001]")
    with pytest.raises(HostlistError, match="more than 10 hosts"):
        expand("n[1-6],m[1-5]", limit=10)
    with pytest.raises(HostlistError):  # would be 10**18 names: refused, not allocated
        expand("a[0-999999]b[0-999999]c[0-999999]")


COMPRESSIONS = [
    (["node01", "node02", "node03", "node04", "node07"], "node[01-04,07]"),
    (["gpu-a1", "gpu-a2", "gpu-b3"], "gpu-a[1-2],gpu-b3"),
    (["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"], "rack[1-2]-node[01-02]"),
    (["rack1-node01", "rack2-node01"], "rack[1-2]-node[01]"),
    ([f"r{r}c{c}n{n}" for r in (1, 2) for c in (1, 2, 3) for n in (1, 2)], "r[1-2]c[1-3]n[1-2]"),
    (["n9", "n10", "n11"], "n[9-11]"),
    (["n08", "n09", "n10"], "n[08-10]"),
    (["n09", "n10"], "n09,n10"),  # shorter than n[09-10]
    (["n9", "n010", "n11", "n12"], "n[9,010,11-12]"),  # 010 is not what width 1 writes for 10
    (["n1", "n01"], "n01,n1"),  # shorter than n[1,01]
    (["node3", "node1", "node2", "node2"], "node[1-3]"),
    (["login", "node1", "node-ib"], "login,node1,node-ib"),
    (["a1"], "a1"),
    ([], ""),
    (names("linux", range(1024), 4), "linux[0000-1023]"),
    # names that are not all alike: two groups, not a wrong product
    (["rack1-node01", "rack1-node02", "rack2-node01"], "rack1-node[01-02],rack2-node01"),
]


@pytest.mark.parametrize(("hosts", "expected"), COMPRESSIONS, ids=[c[1] or "empty"
                                                                    for c in COMPRESSIONS])
def test_compress(hosts, expected):
    assert compress(hosts) == expected
    assert sorted(expand(expected)) == sorted(set(hosts))


host_names = st.builds(
    lambda prefix, number, width, suffix: f"{prefix}{str(number).zfill(width)}{suffix}",
    st.sampled_from(["n", "node", "gpu-a", "r1-n", "r2-n", "x"]),
    st.integers(0, 120), st.integers(0, 4), st.sampled_from(["", "", "", "-ib"]))


@given(st.lists(host_names, max_size=60))
def test_compress_then_expand_gives_the_same_hosts(hosts):
    compact = compress(hosts)
    assert sorted(expand(compact)) == sorted(set(hosts))
    assert len(compact) <= len(",".join(dict.fromkeys(hosts)))


def test_hosts_values():
    assert parse_hosts("node[01-02],gpu-a3") == [Target("node01"), Target("node02"),
                                                 Target("gpu-a3")]
    assert parse_hosts("alice@node[1-2],bob@login1") == [
        Target("node1", "alice"), Target("node2", "alice"), Target("login1", "bob")]
    assert Target("node1", "alice").destination == "alice@node1"
    assert Target("node1").destination == "node1"
    assert parse_hosts("n1,n[1-2],n1") == [Target("n1"), Target("n2")]  # one agent per node
    assert parse_hosts("fe80::1,10.0.0.7") == [Target("fe80::1"), Target("10.0.0.7")]


@pytest.mark.parametrize(("value", "position", "problem"), [
    ("node1:2222", 5, "a port is not part of a host"),
    ("alice@n[1-2]:22", 12, "a port is not part of a host"),
    ("-oProxyCommand=x", 0, "'-oProxyCommand=x' is not a host name"),
    ("a@b@c", 2, "'b@c' is not a host name"),
    ("@node1", 0, "'' is not a user name"),
    ("n1,n[2-1]", 5, "range 2-1 is reversed"),
])
def test_bad_hosts_values(value, position, problem):
    with pytest.raises(HostlistError) as info:
        parse_hosts(value)
    assert info.value.problem.startswith(problem) and info.value.position == position


def test_the_same_host_for_two_users_is_an_error():
    with pytest.raises(HostlistError, match="node1 is given twice, as alice@node1 and "
                                            "bob@node1"):
        parse_hosts("alice@node[1-2],bob@node1")


HOSTFILE = """\
# the job's nodes
node01 slots=8
node02 slots=8 max_slots=8   # Open MPI
worker-3 slots=4

node[04-05]
node06:8
alice@login1
node01
"""


def test_hostfiles_read_mpi_and_deepspeed_styles():
    assert parse_hostfile(HOSTFILE) == [
        Target("node01"), Target("node02"), Target("worker-3"), Target("node04"),
        Target("node05"), Target("node06"), Target("login1", "alice")]
    assert parse_hostfile("") == [] and parse_hostfile("# nothing\n\n") == []


@pytest.mark.parametrize(("text", "line", "position", "problem"), [
    ("node01\nnode02 node03\n", 2, 7, "one host per line: 'node03' is not key=value"),
    ("node01\n\n  node[1-\n", 3, 6, "'[' is never closed"),
    ("a\nb\nnode1:ssh\n", 3, 5, "a port is not part of a host"),
])
def test_hostfile_errors_name_the_file_line_and_column(text, line, position, problem):
    with pytest.raises(HostlistError) as info:
        parse_hostfile(text, source="hosts.txt")
    err = info.value
    assert err.problem.startswith(problem)
    assert (err.line, err.position, err.source) == (line, position, "hosts.txt")
    assert f"(hosts.txt, line {line}, column {position + 1})" in str(err)


def test_a_hostfile_over_the_limit_is_refused():
    text = "".join(f"n{i}\n" for i in range(12))
    with pytest.raises(HostlistError, match="more than 10 hosts") as info:
        parse_hostfile(text, limit=10)
    assert info.value.line == 11


def test_a_hostfile_with_one_host_for_two_users_names_the_file():
    with pytest.raises(HostlistError) as info:
        parse_hostfile("alice@n1\nbob@n1\n", source="hosts.txt")
    assert str(info.value) == "n1 is given twice, as alice@n1 and bob@n1 (hosts.txt)"
