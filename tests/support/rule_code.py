"""Source text of users' rules that tests write to a file and run through the command."""

from __future__ import annotations

import textwrap

__all__ = ["COUNTS_STEPS"]

# Fires at the 4th and 12th step it evaluates, counting from its first, sleeping ``delay``
# seconds a step: its verdict depends on its history, so a resumed run that skipped the earlier
# steps would fire elsewhere (or never). With ``hold`` (a file's path), it does not start its
# 9th step while that file exists: a test can stop or kill the run between the two firings
# however slow the machine is.
COUNTS_STEPS = textwrap.dedent("""
    import os
    import time
    from smdebug.rules import Rule

    class CountsSteps(Rule):
        def __init__(self, base_trial, delay="0.15", hold=""):
            super().__init__(base_trial)
            self.delay = float(delay)
            self.hold = hold
            self.seen = 0

        def invoke_at_step(self, step):
            while self.hold and self.seen == 8 and os.path.exists(self.hold):
                time.sleep(0.05)
            name = self.base_trial.tensor_names()[0]
            self.base_trial.tensor(name).value(step)
            self.seen += 1
            time.sleep(self.delay)
            return self.seen in (4, 12)
""")
