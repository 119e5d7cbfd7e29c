import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { loadSpec, OpenApiSpec } from '../support/github-sim/spec.js';
import { selectExample } from '../support/github-sim/webhooks.js';

const scratch = mkdtempSync(join(tmpdir(), 'ia-spec-validators-'));
after(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A folder with the shared compact description but no stored validators yet. */
async function freshFolder(): Promise<string> {
  const shared = (await loadSpec()).folder;
  const folder = mkdtempSync(join(scratch, 'spec-'));
  for (const entry of ['index.json', 'ops', 'hooks']) symlinkSync(join(shared, entry), join(folder, entry));
  return folder;
}

function operation(spec: OpenApiSpec, method: string, path: string) {
  const match = spec.match(method, path);
  assert.ok(match !== null, `${method} ${path}`);
  return match.operation;
}

/** Whether the `email` format refuses an address, in a real workflow_run payload's head commit. */
function emailRejected(spec: OpenApiSpec, email: string): boolean {
  const payload = structuredClone(selectExample('workflow_run', 'completed'));
  const run = payload['workflow_run'] as { head_commit: { author: { email: string } } };
  run.head_commit.author.email = email;
  const errors = spec.checkWebhook('workflow_run', 'completed', payload);
  return errors?.includes('/workflow_run/head_commit/author/email must match format') === true;
}

/** The same checks, each answered by a validator the spec either compiled or loaded from its folder. */
function verdicts(spec: OpenApiSpec): unknown[] {
  const createIssue = operation(spec, 'POST', '/repos/o/r/issues');
  const getRepo = operation(spec, 'GET', '/repos/o/r');
  const bot = '41898282+issue-agent[bot]@users.noreply.github.com';
  return [
    spec.checkRequestBody(createIssue, { title: 'ok' }),
    spec.checkRequestBody(createIssue, { body: 5, labels: 'x' }),
    spec.checkResponse(getRepo, 200, { id: 'not a number' }) !== null,
    spec.checkResponse(operation(spec, 'GET', '/repos/o/r/pulls'), 200, []),
    // Formats: a date-time (ajv-formats'), and `email` with the simulator's own rule (a bot's noreply
    // address passes, a plain word does not).
    spec.checkRequestBody(operation(spec, 'POST', '/repos/o/r/check-runs'), {
      name: 'n',
      head_sha: 'a'.repeat(40),
      started_at: 'yesterday',
    }),
    emailRejected(spec, bot),
    emailRejected(spec, 'not-an-address'),
    spec.checkWebhook('issue_comment', 'created', { action: 'created' }) !== null,
  ];
}

void test('a validator loaded from its stored code answers exactly as the one compiled from the schema', async () => {
  const folder = await freshFolder();
  const compiled = new OpenApiSpec(folder);
  const first = verdicts(compiled);
  const stored = readdirSync(folder).filter((f) => f.startsWith('validators-'));
  assert.equal(stored.length, 1, 'the compiled validators were stored');
  assert.ok(readdirSync(join(folder, stored[0] ?? '')).length >= 5);

  const loaded = new OpenApiSpec(folder);
  assert.deepEqual(verdicts(loaded), first);
  // What the checks found, so a validator that accepts everything cannot pass for one that works.
  assert.deepEqual(first[0], []);
  assert.ok(Array.isArray(first[1]) && first[1].length >= 2, JSON.stringify(first[1]));
  assert.equal(first[2], true);
  assert.ok(Array.isArray(first[4]) && first[4].length === 1, JSON.stringify(first[4]));
  assert.equal(first[5], false);
  assert.equal(first[6], true);
  assert.equal(first[7], true);
  assert.ok(existsSync(folder));
});
