import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { ROOT } from '../support/pipeline.js';

interface ActionSpec {
  inputs: Record<string, { description: string; default?: string }>;
  outputs: Record<string, { description: string }>;
  runs: { using: string; main: string };
}
interface Workflow {
  on: Record<string, { types: string[]; workflows?: string[]; branches?: string[] }>;
  permissions: Record<string, string>;
  concurrency?: unknown;
  jobs: Record<
    string,
    {
      concurrency?: { group: string; 'cancel-in-progress': boolean };
      'timeout-minutes'?: number;
      if?: string;
      steps: { uses?: string; run?: string; with?: Record<string, unknown> }[];
    }
  >;
}

const read = (path: string): unknown => parseYaml(readFileSync(join(ROOT, path), 'utf8'));

/** action.yml, the example workflow and docs/github-action.md stay true to each other. */
describe('action.yml, its docs and the example workflow', () => {
  const spec = read('action.yml') as ActionSpec;
  const docs = readFileSync(join(ROOT, 'docs', 'github-action.md'), 'utf8');
  const example = read('docs/examples/issue-agent-workflow.yml') as Workflow;

  it('runs the committed bundle on a Node runtime Actions supports', () => {
    assert.ok(['node20', 'node24'].includes(spec.runs.using), spec.runs.using);
    assert.equal(spec.runs.main, 'dist-action/index.mjs');
    assert.ok(existsSync(join(ROOT, spec.runs.main)));
  });

  it('documents every input and output', () => {
    for (const name of [...Object.keys(spec.inputs), ...Object.keys(spec.outputs)])
      assert.ok(docs.includes(`\`${name}\``), `docs/github-action.md mentions ${name}`);
  });

  it('the example workflow: minimal permissions, per-issue concurrency, a timeout, known inputs', () => {
    assert.deepEqual(example.permissions, {
      contents: 'write',
      issues: 'write',
      'pull-requests': 'write',
      checks: 'write',
    });
    assert.equal(example.concurrency, undefined, 'per job: only events that pass `if:` enter the group');
    assert.deepEqual(Object.keys(example.on).sort(), [
      'issue_comment',
      'issues',
      'pull_request_review_comment',
    ]);
    for (const job of Object.values(example.jobs)) {
      assert.match(job.concurrency?.group ?? '', /github\.event\.issue\.number/);
      assert.equal(job.concurrency?.['cancel-in-progress'], false);
      assert.ok((job['timeout-minutes'] ?? 0) > 0, 'a job timeout');
      const agent = job.steps.find((s) => s.uses?.includes('issue-agent'));
      assert.ok(agent !== undefined);
      for (const key of Object.keys(agent.with ?? {})) assert.ok(key in spec.inputs, `input ${key} exists`);
      for (const step of job.steps) {
        // Event text in a `run:` would be shell injection; the example has no `run:` at all.
        assert.equal(step.run, undefined);
        assert.ok(!step.uses?.startsWith('actions/checkout'), 'no checkout of untrusted code');
      }
    }
  });

  it('the red-CI example: workflow_run on failure of the agent’s branches, read-only checks and actions, an App token', () => {
    const ci = read('docs/examples/issue-agent-ci-workflow.yml') as Workflow;
    assert.deepEqual(ci.permissions, {
      contents: 'write',
      issues: 'write',
      'pull-requests': 'write',
      checks: 'read',
      actions: 'read',
    });
    assert.deepEqual(ci.on.workflow_run?.types, ['completed']);
    assert.ok((ci.on.workflow_run.workflows ?? []).length > 0, 'names the CI workflows');
    assert.deepEqual(ci.on.workflow_run.branches, ['issue-agent/issue-*']);
    assert.equal(ci.concurrency, undefined);
    for (const job of Object.values(ci.jobs)) {
      assert.match(job.concurrency?.group ?? '', /github\.event\.workflow_run\.pull_requests\[0\]\.number/);
      assert.equal(job.concurrency?.['cancel-in-progress'], false);
      assert.match(job.if ?? '', /workflow_run\.conclusion == 'failure'/);
      assert.match(job.if ?? '', /workflow_run\.conclusion == 'timed_out'/);
      assert.match(
        job.if ?? '',
        /startsWith\(github\.event\.workflow_run\.head_branch, 'issue-agent\/issue-'\)/,
      );
      const agent = job.steps.find((s) => s.uses?.includes('issue-agent/issue-agent'));
      assert.ok(agent !== undefined);
      for (const key of Object.keys(agent.with ?? {})) assert.ok(key in spec.inputs, `input ${key} exists`);
      assert.match(
        JSON.stringify(agent.with?.['github-token']),
        /steps\.token\.outputs\.token/,
        'the App token',
      );
      for (const step of job.steps) {
        assert.equal(step.run, undefined);
        assert.ok(!step.uses?.startsWith('actions/checkout'), 'no checkout of untrusted code');
      }
    }
    assert.ok(docs.includes('examples/issue-agent-ci-workflow.yml'), 'the docs link it');
  });
});
