"""What ``y`` copies, as plain text. Pure: model values in, a string out.

* ``evidence_text``: a symptom as a ticket or a chat wants it: the severity and title, its id,
  ranks and age, then its evidence lines (what the symptoms pane shows, without the colours).
* ``stack_class_text``: one class of the stack compare screen as ``py-spy dump`` prints a
  thread (innermost frame first, ``name (file:line)``), under a line saying which ranks share
  it. The text reads back with rltui's own stack reader (``rltui stacks``, ``diagnose
  --stacks``), so a copied stack pasted into a file is a dump again.

Nothing here hides secrets: the one step out (``rltui.scrub.outgoing_text``) does that where
the text leaves the app.
"""

from __future__ import annotations

from rltui.diagnosis.stacks import StackReport, who
from rltui.diagnosis.stacktree import StackClass
from rltui.model import Frame, Symptom
from rltui.rankset import compact
from rltui.units import age


def evidence_text(symptom: Symptom, now: float | None = None) -> str:
    """``CRITICAL  <title>`` / ``id ..., ranks ..., for ...`` / ``Evidence:`` and one ``- ``
    line per item. ``now`` (the snapshot's time) gives the symptom's age."""
    meta = [f"id {symptom.id}"]
    if symptom.ranks:
        meta.append(f"ranks {compact(symptom.ranks)}")
    if symptom.since is not None and now is not None:
        meta.append(f"for {age(now - symptom.since)}")
    if symptom.job:
        meta.append(f"job {symptom.job}")
    lines = [f"{symptom.severity.upper()}  {symptom.title}", "  ".join(meta)]
    if symptom.evidence:
        lines.append("Evidence:")
        lines += [f"  - {e}" for e in symptom.evidence]
    return "\n".join(lines) + "\n"


def _frame_line(frame: Frame) -> str:
    # py-spy's own form: the file as it gave it (short name or path), no ":0" without a line
    loc = f"{frame.filename}:{frame.line}" if frame.line else frame.filename
    return f"    {frame.name} ({loc})"


def _status(c: StackClass) -> str:
    """py-spy's marker when every member's thread agrees; none when they differ."""
    members = set(c.members)
    if members and set(c.idle) >= members:
        return " (idle)"
    if members and set(c.active) >= members:
        return " (active)"
    return ""


def stack_class_text(report: StackReport, index: int) -> str:
    """Class ``index`` of ``report`` (``#index+1`` on screen) as a py-spy thread dump."""
    c = report.classes[index]
    count = len(c.members)
    state = "" if c.state == "unknown" else f", {c.state}"
    head = (f"# rltui stack class #{index + 1} of {len(report.classes)}: {who(c.members)} "
            f"({count} process{'es' if count != 1 else ''}{state})")
    thread = f' "{c.thread}"' if c.thread else ""
    lines = [head, f"Thread{_status(c)}:{thread}" if thread else f"Thread{_status(c)}"]
    lines += [_frame_line(f) for f in reversed(c.frames)]  # the class keeps root first
    return "\n".join(lines) + "\n"
