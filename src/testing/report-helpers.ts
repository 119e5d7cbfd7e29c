/**
 * Files the harness puts in a run's report folder (report-plan.ts) for runners whose own options
 * cannot write a report beside the console output and bound a hung test: a pytest plugin and a
 * `node` wrapper. node:test's reporter is in node-test-report.ts, beside its reader. Each is the
 * harness's constant text, written fresh for each run into a folder no earlier run could have
 * prepared.
 */

/** The plugin's module name (`-p issue_agent_pytest`), chosen to collide with nothing. */
export const PYTEST_PLUGIN_MODULE = 'issue_agent_pytest';

/**
 * The pytest plugin (pytest 7 to 9): one JSON line per event, flushed as it happens, so a run that
 * hangs, crashes or runs out of memory still tells which tests passed and which one was running:
 * `item` per collected test, `collect_error` per module that could not be collected, `start` when a
 * test begins, `report` per phase (setup, call, teardown) with its outcome, `finish` at the end.
 * With ISSUE_AGENT_TEST_BOUND_S set, a test that runs longer has its stack printed and the process
 * ends (faulthandler's `exit=True`): the run goes on to report instead of waiting for the harness's
 * time limit. The stack goes to a copy of stderr taken when the plugin is loaded, before pytest
 * captures the output, so it reaches the run's output.
 */
export const PYTEST_PLUGIN = `"""issue-agent's pytest plugin (docs/testing.md): a JSON line per test event; a bound on each test."""
import faulthandler
import json
import os

import pytest

_PATH = os.environ.get("ISSUE_AGENT_PYTEST_REPORT")
try:
    _BOUND = float(os.environ.get("ISSUE_AGENT_TEST_BOUND_S") or "0")
except ValueError:
    _BOUND = 0.0
try:
    _STDERR = os.dup(2)
except OSError:
    _STDERR = None
_out = None


def _write(record):
    global _out
    if _PATH is None:
        return
    if _out is None:
        _out = open(_PATH, "a", encoding="utf-8")
    _out.write(json.dumps(record) + "\\n")
    _out.flush()


def pytest_collectreport(report):
    if report.failed:
        _write({"e": "collect_error", "id": report.nodeid})


def pytest_collection_finish(session):
    for item in session.items:
        # location: (path, 0-based line or None, name); the line is the test's definition.
        line = item.location[1] if len(item.location) > 1 else None
        _write({"e": "item", "id": item.nodeid, "line": line + 1 if isinstance(line, int) else None})


def pytest_runtest_logstart(nodeid, location):
    _write({"e": "start", "id": nodeid})


def pytest_runtest_logreport(report):
    _write({
        "e": "report",
        "id": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "xfail": hasattr(report, "wasxfail"),
        "dur": getattr(report, "duration", 0),
    })


def pytest_sessionfinish(session, exitstatus):
    _write({"e": "finish", "status": int(exitstatus)})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    armed = _BOUND > 0 and _STDERR is not None
    if armed:
        faulthandler.dump_traceback_later(_BOUND, exit=True, file=_STDERR)
    try:
        yield
    finally:
        if armed:
            faulthandler.cancel_dump_traceback_later()
`;

/**
 * The `node` first on PATH during a node:test run: the real node (ISSUE_AGENT_NODE), with
 * ISSUE_AGENT_NODE_FLAGS (`--test-timeout`, `--test-force-exit`) put first when the command line
 * runs the test runner. node takes neither flag from NODE_OPTIONS, and after a file argument it
 * would read them as file names, so they can only go in front. A flag the command line sets itself
 * comes later and wins.
 */
export const NODE_WRAPPER = `#!/bin/sh
# issue-agent: bounds node:test runs (docs/testing.md).
for a in "$@"; do
  if [ "$a" = "--test" ]; then
    # shellcheck disable=SC2086
    exec "$ISSUE_AGENT_NODE" $ISSUE_AGENT_NODE_FLAGS "$@"
  fi
done
exec "$ISSUE_AGENT_NODE" "$@"
`;
