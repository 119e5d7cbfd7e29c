import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EnvironmentRecord } from '../../src/events/schema.js';
import { describeEnvironment, failedSetupOutput, renderEnvironment } from '../../src/publish/environment.js';

const request = (host: string, port: number, allowed: boolean) => ({
  time: '2026-12-01T00:00:00.000Z',
  method: 'CONNECT',
  host,
  port,
  allowed,
  bytesUp: 10,
  bytesDown: 100,
  durationMs: 5,
});

function record(over: Partial<EnvironmentRecord['setup']> = {}): EnvironmentRecord {
  return {
    image: 'issue-agent/python:3.11',
    runtimes: [{ language: 'python', version: '3.11', requested: null, source: 'default' }],
    setup: {
      source: 'detected',
      reason: 'requirements.txt is present',
      commands: [
        {
          command: 'python3 -m venv --system-site-packages .venv',
          reason: 'a virtualenv',
          exitCode: 0,
          timedOut: false,
          durationMs: 1800,
          attempts: 1,
          output: '',
        },
        {
          command: '.venv/bin/pip install -r requirements.txt',
          reason: 'requirements.txt is present',
          exitCode: 1,
          timedOut: false,
          durationMs: 400,
          attempts: 1,
          output: 'ERROR: No matching distribution found for plurals==9.9 (token sk-secret-123)',
        },
      ],
      testEnv: {},
      secrets: ['INDEX_TOKEN'],
      cache: { status: 'not-stored', key: null },
      durationMs: 2200,
      ...over,
    },
    egress: {
      setup: {
        allowHosts: ['pypi.org', 'files.pythonhosted.org', '127.0.0.1'],
        requests: [
          request('127.0.0.1', 8080, true),
          request('127.0.0.1', 8080, true),
          request('evil.example', 443, false),
        ],
        dropped: 0,
        denied: [{ host: 'evil.example', ports: [443], count: 1, reason: 'not in the allowlist' }],
        totals: { requests: 3, allowed: 2, denied: 1, bytesUp: 30, bytesDown: 300 },
      },
      agentAllowHosts: [],
    },
  };
}

describe('the environment, as the PR and the progress comment say it', () => {
  it('names the hosts setup reached apart from the allowlist, and the refused ones with their ports', () => {
    const text = renderEnvironment(record());
    assert.match(
      text,
      /Network during setup: 2 request\(s\) through the egress proxy, to `127\.0\.0\.1` \(allowlist: `pypi\.org`, `files\.pythonhosted\.org`, `127\.0\.0\.1`\); 1 refused\./,
    );
    assert.match(text, /- `evil\.example` port 443 — 1× \(not in the allowlist\)/);
    assert.match(text, /Setup secrets provided: `INDEX_TOKEN` \(setup only\)\./);
    assert.match(
      text,
      /\| `\.venv\/bin\/pip install -r requirements\.txt` \| requirements\.txt is present \| ❌ exit 1 \|/,
    );
    assert.match(text, /The agent worked with no network\./);
  });

  it('a cache hit says setup was skipped, with no command table', () => {
    const text = renderEnvironment(record({ cache: { status: 'hit', key: 'k' } }));
    assert.match(text, /Cache: reused a cached environment \(setup skipped\)\./);
    assert.doesNotMatch(text, /\| Command \|/);
    assert.match(describeEnvironment(record({ cache: { status: 'hit', key: 'k' } })), /setup skipped/);
  });

  it('redacts what it shows, and gives the failed command with its output', () => {
    const redact = (t: string): string => t.replaceAll('sk-secret-123', '[REDACTED]');
    assert.match(
      failedSetupOutput(record()),
      /^\$ \.venv\/bin\/pip install -r requirements\.txt\nERROR: No matching/,
    );
    const short = describeEnvironment(record(), redact);
    assert.match(short, /blocked hosts: `evil\.example`/);
    assert.doesNotMatch(renderEnvironment(record(), redact), /sk-secret-123/);
  });
});
