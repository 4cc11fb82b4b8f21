"""The on-call screen's keys in a real terminal: each test runs ``rltui`` in a tmux server of its
own, types as a user would (``send-keys``) and reads what the screen shows (``capture-pane``).
Most replay a recorded demo job (fixtures/scenarios, README there) and press ``e`` to reach its
end; the OOM triage also runs the real demo job. Sizes are 80x24 and, where the layout differs,
200x60. Skipped where tmux is not installed.

Every wait polls the screen against a deadline. A key that Textual answers through a binding
(tab, enter, escape, ``/``, ctrl+u) acts a moment after the keys typed behind it have reached
the focused widget, so after such a key the test waits for what it changes on the screen (the
footer names the focused pane's keys: ``o Open log`` for the rank table, ``⏎ Open`` for a
symptom's evidence, ``f1 Help`` for a text field) before it types on, as a user looking at the
screen would."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.tmux import ROOT, Tmux, exit_status, notice, squeeze

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SCENARIOS = ROOT / "fixtures" / "scenarios"
SMALL, LARGE = (80, 24), (200, 60)
HEADER = re.compile(r"[│ ]*rank[▲▼]? +pid\b")  # the rank table's header line


@dataclass
class Session:
    """One app in one tmux server, with the folders it was given."""

    tmux: Tmux
    root: Path

    @property
    def work(self) -> Path:  # the folder it runs in
        return self.root / "work"

    @property
    def config(self) -> Path:
        return self.root / "config" / "rltui" / "config.yaml"

    @property
    def tmp(self) -> Path:  # TMPDIR: the demo's run folder goes here
        return self.root / "tmp"

    def keys(self, *keys: str) -> None:
        self.tmux.keys(*keys)

    def type(self, text: str) -> None:
        self.tmux.type(text)

    def shows(self, *words: str) -> str:
        return self.tmux.shows(*words)

    def until(self, condition, what: str, timeout: float = 30.0) -> str:
        return self.tmux.until(condition, what, timeout)

    def press(self, key: str, footer: str) -> str:
        """Press ``key`` (a tmux key name) and wait until the footer starts with ``footer``."""
        self.keys(key)
        return self.until(lambda s: footer_of(s).startswith(footer),
                          f"the footer to start with {footer!r} after {key}")

    def leave(self, key: str, footer: str) -> str:
        """Press ``key`` and wait until the footer no longer starts with ``footer``."""
        self.keys(key)
        return self.until(lambda s: not footer_of(s).startswith(footer),
                          f"the footer to change from {footer!r} after {key}")

    def matches(self, *patterns: str) -> str:
        """Wait until every regex of ``patterns`` matches the screen (a line each: ``^`` and
        ``$`` are a line's ends); the screen."""
        return self.until(lambda s: all(re.search(p, s, re.MULTILINE) for p in patterns),
                          f"{patterns!r} on the screen")

    def notice_says(self, *parts: str) -> str:
        """Wait until the toasts say every one of ``parts`` (spaces do not count)."""
        return self.until(lambda s: all(squeeze(p) in notice(s) for p in parts),
                          f"a notice saying {parts!r}")

    def buffer(self) -> str:
        """tmux's paste buffer: what the app sent by OSC 52 (set-clipboard on)."""
        return self.tmux("show-buffer").stdout


@pytest.fixture
def rltui(tmp_path):
    """``rltui(*ARGS, size=, clipboard=, config=)`` starts the app (``config``: the text of its
    config file); every server is closed at the end."""
    sessions: list[Session] = []

    def start(*args: str, size: tuple[int, int] = SMALL, clipboard: bool = False,
              config: str | None = None) -> Session:
        root = tmp_path / f"app{len(sessions)}"
        for name in ("work", "home", "config", "tmp"):
            (root / name).mkdir(parents=True)
        (root / "run").mkdir(mode=0o700)
        session = Session(Tmux("rltui-keys"), root)
        sessions.append(session)
        if config is not None:
            session.config.parent.mkdir()
            session.config.write_text(config)
        session.tmux.start_app(args, size=size, cwd=session.work, env={
            "HOME": root / "home", "XDG_CONFIG_HOME": root / "config",
            "XDG_RUNTIME_DIR": root / "run", "TMPDIR": root / "tmp", "TZ": "UTC"})
        if clipboard:  # tmux passes OSC 52 on and keeps it in its paste buffer
            session.tmux("set-option", "-s", "set-clipboard", "on")
        session.shows(" rltui ")
        return session

    yield start
    for session in sessions:
        session.tmux.close()


def footer_of(screen: str) -> str:
    return screen.rstrip("\n").splitlines()[-1]


RANKS, EVIDENCE, FIELD = "o Open log", "⏎ Open", "f1 Help"  # the footer, by focus


def at_end(rltui, scenario: str, *args: str, size=SMALL, clipboard=False) -> Session:
    """A replay of the recorded ``scenario`` at the end of its recording (``e``)."""
    app = rltui("replay", str(SCENARIOS / scenario), *args, size=size, clipboard=clipboard)
    app.keys("e")
    app.until(lambda s: re.search(r"replay (\S+)/\1s x1 end", s), "the end of the replay")
    return app


def rank_rows(screen: str) -> list[int]:
    """The ranks of the rank table's rows, top to bottom, as drawn under its header."""
    lines = screen.splitlines()
    header = next(i for i, line in enumerate(lines) if HEADER.match(line))
    ranks = []
    for line in lines[header + 1:]:
        found = re.match(r"[│ ]*(\d+)\s+\d+\s", line)
        if not found:
            break
        ranks.append(int(found[1]))
    return ranks


def rank_header(screen: str) -> str:
    return next(line for line in screen.splitlines() if HEADER.match(line))


def sorted_column(screen: str) -> str | None:
    """The column the rank table's header marks (``GPU%▲``), with its arrow."""
    found = re.search(r"(\S+(?: \S+)?[▲▼])", rank_header(screen))
    return found[1].split("  ")[-1].strip() if found else None


def background(tmux: Tmux, text: str) -> str:
    """The background the screen draws the first character of ``text`` on (an SGR colour, with
    ``reverse`` when the colours are swapped)."""
    styled = tmux("capture-pane", "-p", "-e", "-t", "t").stdout
    for line in styled.splitlines():
        plain, colour, reverse, at = "", "", False, {}
        for part in re.split(r"(\x1b\[[0-9;]*m)", line):
            if not part.startswith("\x1b["):
                for char in part:
                    at[len(plain)] = colour + (" reverse" if reverse else "")
                    plain += char
                continue
            params = part[2:-1].split(";")
            i = 0
            while i < len(params):
                p = params[i]
                if p in ("", "0"):
                    colour, reverse = "", False
                elif p == "7":
                    reverse = True
                elif p == "27":
                    reverse = False
                elif p == "49":
                    colour = ""
                elif p == "48":
                    n = 3 if params[i + 1] == "5" else 5
                    colour, i = ";".join(params[i:i + n]), i + n - 1
                elif p == "38":  # a foreground colour: skip its numbers
                    i += 2 if params[i + 1] == "5" else 4
                i += 1
        if text in plain:
            return at[plain.index(text)]
    raise AssertionError(f"{text!r} is not on the screen")


# -- quitting -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("where", "key"), [("main", "C-c"), ("main", "q"),
                                            ("timeline", "C-c")])
def test_ctrl_c_and_q_quit(rltui, where, key):
    app = rltui("replay", str(SCENARIOS / "demo-healthy"))
    if where == "timeline":
        app.type("a")
        app.shows("Timeline: who stopped first")
    app.keys(key)
    screen = app.until(lambda s: exit_status(s) is not None, "the app's end")
    assert exit_status(screen) == 0


# -- z: zoom and the folded tables --------------------------------------------------------------

def test_z_at_80x24_fills_the_screen_with_a_folded_table_and_escape_folds_it(rltui):
    app = at_end(rltui, "demo-rank-exit")
    screen = app.shows("4 GPUs: 4 idle", "4 ranks: 3 sleeping, 1 exited", "Evidence")
    assert "GPU  name" not in screen and not any(HEADER.match(x) for x in screen.splitlines())
    # the symptoms have the focus; shift+tab reaches the folded rank line, z shows its table
    app.press("BTab", RANKS)
    app.type("z")
    screen = app.until(lambda s: "rank       pid" in s, "the rank table zoomed")
    assert rank_rows(screen) == [0, 1, 2, 3]
    assert "exited        12s ago" in screen and "Symptoms" not in screen
    assert screen.splitlines()[0].startswith("─Ranks (3 running, 1 departed)")
    app.keys("Escape")
    screen = app.until(lambda s: "rank       pid" not in s, "the rank table folded")
    assert "4 ranks: 3 sleeping, 1 exited" in screen and "Symptoms (1)" in screen
    # enter on a folded line does what z does
    app.leave("BTab", RANKS)  # the GPU line
    app.keys("Enter")
    screen = app.until(lambda s: "GPU  name" in s, "the GPU table zoomed")
    assert screen.splitlines()[0].startswith("─GPUs (4) simulated")
    assert "Simulated GPU" in screen and "Ranks (" not in screen
    app.type("z")
    app.until(lambda s: "GPU  name" not in s, "the GPU table folded")
    # z on the symptoms: the incident in full, its last next step included
    app.press("Tab", RANKS)
    app.leave("Tab", RANKS)
    app.type("z")
    screen = app.until(lambda s: "4. Relaunch with NCCL_DEBUG" in s and "GPUs" not in s,
                       "the symptoms zoomed")
    assert screen.splitlines()[0].startswith("─Symptoms (1)")
    app.keys("Escape")
    app.shows("4 GPUs: 4 idle", "4 ranks: 3 sleeping, 1 exited")


def test_z_at_200x60_gives_the_rank_pane_the_whole_screen(rltui):
    app = at_end(rltui, "demo-rank-exit", size=LARGE)
    app.until(lambda s: rank_rows(s) == [0, 1, 2, 3] and "Logs (" in s, "the rank table")
    app.press("Tab", RANKS)  # from the GPU table to the rank table
    app.type("z")
    screen = app.until(lambda s: "Symptoms" not in s and "GPUs" not in s, "the ranks zoomed")
    lines = screen.rstrip("\n").splitlines()
    assert len(lines) == 60
    # the pane from the top line to the footer: not a table floating in an empty screen
    assert lines[0].startswith("╭─ Ranks (3 running, 1 departed)")
    assert lines[-2].startswith("╰─") and lines[-2].endswith("─╯")
    assert all(line.startswith("│") and line.endswith("│") for line in lines[1:-2])
    header = rank_header(screen)
    for column in ("GPU mem", "step time", "ETA", "stack", "role", "left"):
        assert column in header
    app.keys("Escape")
    app.shows("GPUs (4)", "Symptoms (1)", "Logs (")


# -- the rank table: sort and filter ------------------------------------------------------------

def rank_table(app: Session, size: tuple[int, int]) -> str:
    """Focus the rank table (zoomed where it is folded, at 80x24); the screen."""
    if size == SMALL:
        app.press("BTab", RANKS)
        app.type("z")
    else:
        app.press("Tab", RANKS)
    return app.until(lambda s: "rank       pid" in s, "the rank table")


@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_sort_keys_move_the_column_and_reverse_the_order(rltui, size):
    app = at_end(rltui, "demo-rank-exit", size=size)
    screen = rank_table(app, size)
    assert sorted_column(screen) is None and rank_rows(screen) == [0, 1, 2, 3]
    # `.` walks right: pid, GPU, GPU% (the rank's own order is where it starts)
    for column in ("pid▲", "GPU▲", "GPU%▲"):
        app.type(".")
        screen = app.until(lambda s, c=column: sorted_column(s) == c, f"{column} marked")
    # GPU% is 0%, 0%, 2% and "-" for the rank that left: "-" stays last, ties by rank
    assert rank_rows(screen) == [0, 1, 2, 3]
    app.type("I")
    screen = app.until(lambda s: sorted_column(s) == "GPU%▼", "the order reversed")
    assert rank_rows(screen) == [2, 0, 1, 3]
    app.type(",")
    screen = app.until(lambda s: sorted_column(s) == "GPU▲", "GPU marked")
    assert rank_rows(screen) == [0, 1, 2, 3]
    app.type("I")
    screen = app.until(lambda s: sorted_column(s) == "GPU▼", "GPU reversed")
    assert rank_rows(screen) == [3, 2, 1, 0]


def ranks_title(screen: str) -> str:
    return next(line for line in screen.splitlines() if "Ranks (" in line)


HINT = "/ ranks 0-3,7 · stalled · exited · #2 · a node"  # the empty filter's placeholder


def filter_anew(app: Session, text: str) -> None:
    """``/`` from the rank table, the field emptied, ``text`` typed."""
    app.type("/")
    app.until(lambda s: footer_of(s).startswith(FIELD), "the filter's field")
    app.keys("C-u")
    app.shows(HINT)
    app.type(text)


def test_slash_filters_the_rank_table_by_ranks_class_and_state(rltui):
    app = at_end(rltui, "demo-cleanup-deadlock", size=LARGE)
    rank_table(app, LARGE)
    app.type("/")
    app.until(lambda s: footer_of(s).startswith(FIELD) and HINT in s, "the empty filter")
    app.type("0-1")
    screen = app.until(lambda s: rank_rows(s) == [0, 1], "ranks 0-1 alone")
    assert "Ranks (4 running) · 2 shown: /0-1" in ranks_title(screen)
    app.press("Enter", RANKS)  # back to the table, the filter kept
    app.type(".")
    screen = app.until(lambda s: sorted_column(s) == "pid▲", "the table's keys again")
    assert rank_rows(screen) == [0, 1]
    for text, ranks in (("#2", [3]),  # a stack class, numbered as on the compare screen
                        ("recv_object_list", [0, 1, 2]),  # a word: where a class waits
                        ("sleeping 2-3", [2, 3])):  # a state and a rank set: both must hold
        filter_anew(app, text)
        title = f"Ranks (4 running) · {len(ranks)} shown: /{text} ─"
        app.until(lambda s, r=ranks, t=title: rank_rows(s) == r and t in ranks_title(s),
                  f"{text}: ranks {ranks}")
        app.press("Enter", RANKS)
    filter_anew(app, "3-1")  # does not parse: the title says why, the rows keep "3"
    screen = app.until(lambda s: "not a rank set: '3-1'" in ranks_title(s), "the error")
    assert rank_rows(screen) == [3]
    app.press("Escape", RANKS)  # clears the filter
    screen = app.until(lambda s: rank_rows(s) == [0, 1, 2, 3], "every rank again")
    assert "shown" not in ranks_title(screen) and "filter" not in ranks_title(screen)


def test_slash_filters_by_the_node_the_header_names(rltui):
    """The header says ``node gpu-node-07``; ``node:gpu-node-07`` shows its ranks, and another
    node none."""
    app = at_end(rltui, "demo-cleanup-deadlock", size=LARGE)
    assert "node gpu-node-07" in app.shows("node gpu-node-07")
    rank_table(app, LARGE)
    app.type("/")
    app.until(lambda s: footer_of(s).startswith(FIELD) and HINT in s, "the empty filter")
    app.type("node:gpu-node-07")
    app.until(lambda s: "4 shown: /node:gpu-node-07 ─" in ranks_title(s)
              and rank_rows(s) == [0, 1, 2, 3], "this node's ranks")
    app.type("x")
    screen = app.until(lambda s: "0 shown: /node:gpu-node-07x ─" in ranks_title(s),
                       "another node's")
    assert rank_rows(screen) == []


def test_escape_in_the_filter_of_a_zoomed_rank_table_clears_it(rltui):
    """80x24: the folded rank table zoomed (z), filtered, then escape: the docs say escape
    clears the filter (the zoom stays); escape again unzooms."""
    app = at_end(rltui, "demo-cleanup-deadlock")
    rank_table(app, SMALL)
    app.type("/")
    app.until(lambda s: footer_of(s).startswith(FIELD) and HINT in s, "the empty filter")
    app.type("0-1")
    app.until(lambda s: rank_rows(s) == [0, 1], "ranks 0-1 alone")
    app.keys("Escape")
    screen = app.until(lambda s: "0-1" not in ranks_title(s), "the filter gone", timeout=3)
    assert "rank       pid" in screen and rank_rows(screen) == [0, 1, 2, 3]
    # still zoomed: the next escape unzooms, back to the folded line
    app.keys("Escape")
    app.until(lambda s: "rank       pid" not in s and " 4 ranks: " in s, "the folded line")


# -- enter on evidence --------------------------------------------------------------------------

def test_enter_on_evidence_opens_the_log_at_the_line_and_the_ranks_row(rltui):
    app = at_end(rltui, "demo-rank-exit")
    app.press("Enter", EVIDENCE)  # on the symptom: zoomed, the cursor on the first line
    app.shows("Evidence  enter opens rank 3's row, escape goes back", "▶ rank 3 (pid 1293)")
    app.keys("Down")
    app.shows("Evidence  enter opens the log at line 7", "▶ rank 3's last error")
    app.keys("Enter")
    app.matches(r"rank 3 log +/var/run/demo/rank3\.log", r"follow off",
                r"^ +7 Traceback \(most recent call last\):")
    # the cursor stands on line 7
    app.until(lambda s: background(app.tmux, "   7 Traceback")
              != background(app.tmux, "   8   File"), "line 7 highlighted")
    assert background(app.tmux, "   6 step:2") == background(app.tmux, "   8   File")
    app.keys("Escape")
    app.shows("Evidence  enter opens the log at line 7")
    app.keys("Up")
    app.shows("Evidence  enter opens rank 3's row")
    # the folded rank table is zoomed to show the row, its cursor on rank 3
    app.press("Enter", RANKS)
    screen = app.until(lambda s: rank_rows(s) == [0, 1, 2, 3], "the rank table zoomed")
    row = next(line for line in screen.splitlines() if re.match(r"[│ ]*3 +1293 ", line))
    other = next(line for line in screen.splitlines() if re.match(r"[│ ]*2 +1292 ", line))
    app.until(lambda s: background(app.tmux, row.strip(" │")[:25])
              != background(app.tmux, other.strip(" │")[:25]), "rank 3's row highlighted")
    app.type("o")  # that rank's log
    app.shows("rank 3 log", "/var/run/demo/rank3.log")
    app.keys("Escape")  # back to the zoomed table, and escape folds it again
    app.until(lambda s: "rank       pid" in s and rank_rows(s) == [0, 1, 2, 3],
              "the zoomed table again")
    app.keys("Escape")
    app.until(lambda s: "rank       pid" not in s and " 4 ranks: " in s, "the folded line")


def test_enter_on_evidence_opens_the_rank_row_at_200x60(rltui):
    app = at_end(rltui, "demo-rank-exit", size=LARGE)
    app.press("Tab", RANKS)
    app.leave("Tab", RANKS)  # the symptoms
    app.press("Enter", EVIDENCE)
    app.shows("Evidence  enter opens rank 3's row")
    app.press("Enter", RANKS)
    screen = app.until(lambda s: rank_rows(s) == [0, 1, 2, 3] and "GPUs" in s, "the monitor")
    row = next(line for line in screen.splitlines() if re.match(r"│ +3 +1293 ", line))
    other = next(line for line in screen.splitlines() if re.match(r"│ +2 +1292 ", line))
    app.until(lambda s: background(app.tmux, row[1:30]) != background(app.tmux, other[1:30]),
              "rank 3's row highlighted")
    app.type("o")
    app.shows("rank 3 log")


def test_enter_on_evidence_opens_the_class_and_the_frame(rltui):
    app = at_end(rltui, "demo-cleanup-deadlock", size=(120, 40))
    app.press("Tab", RANKS)
    app.leave("Tab", RANKS)  # the symptoms
    app.press("Enter", EVIDENCE)
    app.shows("Evidence  enter opens stack class #1 in the compare screen")
    app.keys("Down")
    app.shows("Evidence  enter opens stack class #2 in the compare screen",
              "▶ rank 3: destroy_process_group")
    app.keys("Enter")
    app.shows("Classes (2)", "Merged stacks")
    # the compare screen's cursor is on class #2 (rank 3)
    app.until(lambda s: background(app.tmux, "#2   3 ") != background(app.tmux, "#1   0-2 "),
              "class #2 highlighted")
    app.keys("Escape")
    app.shows("Evidence  enter opens stack class #2")
    app.keys("Down")
    app.shows("Evidence  enter opens the source at rank.py:85", "▶ ranks diverge below main")
    app.keys("Enter")
    # the diff's cursor on the frame, its source below
    app.until(lambda s: "Source rank 0 rank.py:85" in s
              and re.search(r"▶3 +main \(rank\.py:85\)", s)
              and re.search(r"85 ▶ +trainer\.train\(\)", s), "the source at rank.py:85")


# -- a: the timeline ----------------------------------------------------------------------------

def timeline_rows(screen: str) -> list[tuple[int, str, str]]:
    return [(int(m[1]), m[2], m[3]) for m in
            re.finditer(r"^ +(\d+)  (\w+) +\d+ +\S+ +(\w+) +\|", screen, re.MULTILINE)]


def test_a_and_the_palette_open_the_timeline(rltui):
    app = at_end(rltui, "demo-rank-exit")
    app.type("a")
    # who stopped first first: the rank that left, then those left waiting for it
    rows = [(3, "exited", "exit"), (0, "stopped", "log"), (1, "stopped", "log"),
            (2, "stopped", "log")]
    screen = app.until(lambda s: timeline_rows(s) == rows, "the timeline's rows")
    assert "Timeline: who stopped first" in screen
    assert re.search(r"Rank 3 of job \S+ stopped first, at [\d:]+: it left the job", screen)
    app.keys("Escape")
    app.until(lambda s: "Timeline" not in s and "Symptoms (1)" in s, "the monitor")
    app.keys("C-p")
    app.shows("Search for commands")
    app.type("timeline")
    app.shows("View: Timeline")
    app.keys("Enter")
    app.until(lambda s: "Timeline: who stopped first" in s and timeline_rows(s) == rows,
              "the timeline again")
    app.keys("Escape")
    app.until(lambda s: "Timeline" not in s and "Symptoms (1)" in s, "the monitor")


# -- y: copy ------------------------------------------------------------------------------------

def copies(app: Session) -> list[Path]:
    return sorted((app.root / "run").rglob("copy-*.txt"))


def test_y_copies_the_highlighted_symptoms_evidence(rltui):
    app = at_end(rltui, "demo-rank-exit", clipboard=True)
    app.type("y")
    app.notice_says('Copied the evidence of "rank 3 crashed', "(OSC 52); also in")
    file, = copies(app)
    app.notice_says(f"also in {file}")
    text = app.buffer()
    assert text == file.read_text()
    assert "rank-exited" in text
    assert "rank 3 (pid 1293): exited" in text
    assert "rank 3's last error: /var/run/demo/rank3.log:7-22: RuntimeError" in text


# -- m: the OOM triage --------------------------------------------------------------------------

def test_m_on_a_replay_reads_the_job_and_model_config_given(rltui, tmp_path):
    """--job-config and --model-config: the fixture's verl config with the log-prob micro
    batches set to 8, and Qwen2-7B's config.json."""
    fixture = (ROOT / "fixtures" / "configs" / "verl" / "ppo_trainer_min.yaml").read_text()
    job = tmp_path / "ppo.yaml"
    job.write_text(fixture.replace("log_prob_micro_batch_size_per_gpu: null",
                                   "log_prob_micro_batch_size_per_gpu: 8"))
    app = at_end(rltui, "demo-oom", "--job-config", str(job), "--model-config",
                 str(ROOT / "fixtures" / "models" / "qwen2-7b"), clipboard=True)
    app.shows("m OOM")  # the footer lists it once a log holds an OOM
    app.type("m")
    screen = app.matches(
        r"^ OOM triage: log-prob \(high confidence\), verl", r"^ Framework +verl",
        r"^ Estimate +[\d.]+ GiB per GPU as configured",
        # the key folds at 80 columns; its values stay on its first line: 8 -> 4, the estimate
        r"^  1  actor_rollout_ref\.rollout\.lo +8 +4 +[\d.]+ GiB -> [\d.]+ GiB",
        r"Patch \(y copies it\)")
    # the file given, whole: a long path folds at 80 columns, its file name kept
    shown = re.search(r"^ Config +(.*?)^ Error ", screen, re.MULTILINE | re.DOTALL)[1]
    assert re.sub(r"\s+", "", shown) == str(job), shown
    app.type("y")
    app.notice_says("(OSC 52)")
    assert app.buffer() == (
        "# append to the python3 -m verl.trainer.main_ppo command line:\n"
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4\n"
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4\n")


def live_pids(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie nobody reaps counts as gone)."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


@pytest.mark.slow
def test_m_on_the_oom_demo_shows_verl_the_values_the_estimate_and_the_patch(rltui):
    """The demo's OOM scenario is a verl run: the config is found from the ranks' command
    line. ctrl+c ends the app and the demo's ranks with it."""
    app = rltui("demo", "--scenario", "oom", size=LARGE, clipboard=True)
    job_file, = app.tmp.glob("rltui-demo-*/job.json")  # written before the app starts
    pids = json.loads(job_file.read_text())["pids"]
    try:
        app.until(lambda s: "CUDA out of memory" in s and "m OOM" in s, "the OOM", timeout=60)
        app.type("m")
        app.matches(r"^ OOM triage: log-prob \(high confidence\), verl", r"^ Framework +verl",
                    r"^ Config +\S+/config/ppo_trainer\.yaml \+ command line",
                    r"^ Estimate +[\d.]+ GiB per GPU as configured",
                    r"actor_rollout_ref\.rollout\.log_prob_micro_batch_size_per_gpu +8 +4 +"
                    r"[\d.]+ GiB -> [\d.]+ GiB",
                    r"Patch \(y copies it\)",
                    r"^ +│ actor_rollout_ref\.ref\.log_prob_micro_batch_size_per_gpu=4 +│")
        app.shows("# append to the python3 -m verl.trainer.main_ppo command line:")
        app.type("y")
        app.notice_says("(OSC 52)")
        assert app.buffer().splitlines()[1:] == [
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"]
        app.keys("C-c")
        screen = app.until(lambda s: exit_status(s) is not None, "the app's end")
        assert exit_status(screen) == 0
        assert live_pids(pids) == []
    finally:
        for pid in live_pids(pids):  # a failed test leaves no rank behind
            os.kill(pid, signal.SIGKILL)


# -- t: themes ----------------------------------------------------------------------------------

def test_t_cycles_the_theme_and_says_where_it_saved_it(rltui):
    mine = "# on-call settings\nhistory: 300  # longer sparklines\n"
    app = rltui("replay", str(SCENARIOS / "demo-healthy"), config=mine + "theme: dark\n")
    dark = background(app.tmux, " rltui ")
    for name in ("light", "colorblind", "dark"):
        app.type("t")
        app.notice_says(f"Theme {name} saved to {app.config}")
        # only the theme's line changes: the comments and the other settings stay
        assert app.config.read_text() == mine + f"theme: {name}\n"
        if name == "light":
            app.until(lambda s: background(app.tmux, " rltui ") != dark, "the light colours")


# -- i: the incident report ---------------------------------------------------------------------

def test_i_asks_for_a_folder_once_then_says_where_the_report_is(rltui):
    app = at_end(rltui, "demo-rank-exit", clipboard=True)
    app.type("i")
    # filled in with the folder it runs in (a long path: the field shows its end)
    app.shows("Incident reports go into a new folder inside this one",
              "enter: write the report there; escape: no report", f"{app.root.name}/work ")
    app.keys("Escape")
    app.notice_says("No report written.")
    assert list(app.work.iterdir()) == []
    app.type("i")  # not answered yet: asked again
    app.shows("Incident reports go into a new folder inside this one")
    reports = app.root / "reports"
    app.type(str(reports))  # the folder shown is selected: typing replaces it
    app.until(lambda s: f"{reports.parent.name}/reports " in s, "the folder typed")
    app.keys("Enter")
    app.until(lambda s: "Incidentreportwrittento" in notice(s), "the report's notice")
    first, = reports.iterdir()
    app.notice_says(f"Incident report written to {first}: incident.md and incident.json "
                    "(y copies the path)")
    assert (first / "incident.md").read_text().startswith("#")
    assert json.loads((first / "incident.json").read_text())
    app.type("y")  # while the notice shows: the report's path
    app.notice_says("(OSC 52)")
    assert app.buffer() == str(first / "incident.md")
    app.type("i")  # asked once: the next report goes straight to the same folder
    # (a folder of its own, also within the same second: NAME-2 then)
    app.until(lambda s: len(list(reports.iterdir())) == 2, "a second report")
    second, = set(reports.iterdir()) - {first}
    screen = app.notice_says(f"Incident report written to {second}: incident.md")
    assert "Incident reports go into" not in screen
    assert (second / "incident.md").is_file()
