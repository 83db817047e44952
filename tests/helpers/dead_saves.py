"""The timing of the tests where a framework's save dies half-way under a `Watcher`.

The watcher's quiet period is ``SETTLE``; stopping, it waits for a checkpoint not complete
until that checkpoint has been quiet for ``STALLED`` (``Watcher(stalled_after=)``), looking at
it every poll. So a dead save has stayed quiet well past the quiet period under the watcher's
eyes by the time ``stop()`` returns, and the test then shows it was never pushed, with no
sleep of its own.
"""

SETTLE = 0.5
STALLED = 2 * SETTLE
WATCH = {"settle": SETTLE, "stalled_after": STALLED}
"""The keywords of such a test's `Watcher`."""
