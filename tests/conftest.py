"""Fixtures shared by every test folder."""

import signal

pytest_plugins = ["tests.fakes.rollout_fixtures", "tests.fakes.netns_fixtures"]

# A test run started in the background (`cmd &`, nohup, some CI runners) inherits SIGINT
# ignored, and every process a test starts would inherit that too: Python then never raises
# KeyboardInterrupt, and the tests of what Ctrl-C does would hang. A handled signal is reset to
# its default in a new program, so handling it here gives the children a normal Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
