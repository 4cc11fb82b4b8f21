"""``y``: copy what the screen shows to the clipboard (OSC 52) and to a file.

The screen on top says what there is to copy (its ``copy_target``): the monitor the selected
symptom's evidence, the compare screen the highlighted stack class. The app sends it to the
terminal's clipboard through OSC 52 (Textual's ``copy_to_clipboard``: an escape sequence, so
it crosses ssh, and tmux with ``set-clipboard on``) and hands it to its copy sink, which writes
it to a private file and says whether the environment lets OSC 52 through
(``rltui.sources.clipboard.save_copy``, given by the app's builder: the UI touches no file and
runs no command). The notice names the file either way, since no terminal says whether it took
the text; where the environment says it cannot (the Linux console), nothing is sent.

The text passes ``rltui.scrub.outgoing_text`` first: secrets hidden, control characters
escaped, in the clipboard and the file alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from textual.binding import Binding

from rltui.scrub import outgoing_text, printable
from rltui.sources.clipboard import NO, YES, Copied

NOTHING = ("Nothing to copy here: y copies the selected symptom's evidence (monitor) or the "
           "highlighted stack class (compare screen).")
TITLE_MAX = 60  # characters of a title quoted in the notice


class CopyTarget(NamedTuple):
    text: str
    what: str  # for the notice: 'the evidence of "rank 3 exited"'
    kind: str  # for the file's name: evidence, stack, report-path


def copy_binding(binding_id: str) -> Binding:
    return Binding("y", "copy", "Copy", id=binding_id, show=False,
                   tooltip="copy the selected symptom's evidence, the highlighted stack class "
                           "or (while its notice shows) the report's path: OSC 52 and a file")


def quoted(title: str) -> str:
    title = printable(title)
    return f'"{title[:TITLE_MAX - 1]}…"' if len(title) > TITLE_MAX else f'"{title}"'


def copy_notice(what: str, copied: Copied | None, sent: bool) -> tuple[str, str]:
    """(message, severity) for one copy: what went where. Where the clipboard likely did not
    take it, the file comes first: a narrow toast may not show the end of a long notice."""
    if copied is None:  # no sink (an app built without one): OSC 52 alone
        return f"Copied {what} (OSC 52).", "information"
    if copied.path is None:
        if not sent:
            return (f"Not copied: {copied.why}, and the file could not be written "
                    f"({copied.error}).", "error")
        return (f"Copied {what} (OSC 52); the file copy failed: {copied.error}.", "warning")
    if copied.osc52 == YES:
        return f"Copied {what} (OSC 52); also in {copied.path}", "information"
    where = f"{what[:1].upper()}{what[1:]} is in {copied.path}"
    if copied.osc52 == NO:
        return f"{where}: {copied.why}.", "warning"
    return f"{where}. Sent by OSC 52 too, but {copied.why}.", "warning"


class Copying:
    """Mix into an App (before ``App``): the ``copy`` action and its sink."""

    # Writes the copy to a file and says what the environment says of OSC 52; set by the
    # app's builder (rltui.sources.clipboard.save_copy).
    copy_sink: Callable[[str, str], Copied] | None = None

    def copy_target(self) -> CopyTarget | None:
        """What ``y`` copies now: the top screen's ``copy_target``, if it has one."""
        target = getattr(self.screen, "copy_target", None)  # type: ignore[attr-defined]
        return target() if callable(target) else None

    def action_copy(self) -> None:
        target = self.copy_target()
        if target is None:
            self.notify(NOTHING, severity="information")  # type: ignore[attr-defined]
            return
        self.copy_out(target)

    def copy_out(self, target: CopyTarget) -> None:
        """Copy ``target`` (scrubbed). The sink (a file written, tmux asked about OSC 52) runs
        on a thread, off the event loop; the clipboard and the notice follow on it."""
        text = outgoing_text(target.text)
        sink = self.copy_sink
        if sink is None:
            self._copied(text, target, None)
            return

        def save() -> None:  # worker thread: the sink never raises (a failure is its error)
            copied = sink(text, target.kind)
            self.call_from_thread(self._copied, text, target, copied)  # type: ignore[attr-defined]

        self.run_worker(save, name="copy", group="copy", thread=True,  # type: ignore[attr-defined]
                        exit_on_error=False)

    def _copied(self, text: str, target: CopyTarget, copied: Copied | None) -> None:
        sent = copied is None or copied.osc52 != NO
        if sent:  # the Linux console would print the sequence: not sent there
            self.copy_to_clipboard(text)  # type: ignore[attr-defined]
        message, severity = copy_notice(target.what, copied, sent)
        self.notify(message, title="Copy", severity=severity,  # type: ignore[attr-defined]
                    timeout=15 if severity != "information" else 8)
