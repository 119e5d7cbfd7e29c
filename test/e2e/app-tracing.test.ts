import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { oracle } from '../../src/model-sim/index.js';
import { startStack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';

interface ReceivedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly attributes: Record<string, string | number | boolean>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpKeyValue {
  key: string;
  value: OtlpValue;
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        attributes?: OtlpKeyValue[];
      }[];
    }[];
  }[];
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    const v = value.stringValue ?? value.boolValue ?? value.doubleValue ?? value.intValue;
    if (v !== undefined) out[key] = typeof v === 'string' && value.intValue !== undefined ? Number(v) : v;
  }
  return out;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
}

/**
 * A small OTLP/HTTP (JSON) receiver: what the App and the worker export, span by span.
 */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close: () => Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const parsed = JSON.parse((await body(req)).toString('utf8')) as OtlpRequest;
      for (const rs of parsed.resourceSpans ?? []) {
        const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              service,
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              attributes: attributesOf(s.attributes),
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      }),
  };
}

/**
 * Must-show 6 of issue 13: with an OTLP endpoint set, one job is one trace from the webhook to the
 * pull request, across the App's and the worker's processes, with every parent link intact.
 */
test(
  'OpenTelemetry: one job is one trace, webhook → intake → queue wait → job → steps, model calls, tools → publish, across the App and the worker',
  { skip: redisSkipReason(), timeout: 300_000 },
  async (t) => {
    const receiver = await startReceiver();
    t.after(() => receiver.close());
    const stack = await startStack({
      owner: 'acme',
      repo: 'calc',
      maintainer: { login: 'maria', permission: 'write' },
      modelKey: 'sk-ant-tracing-0123456789',
      policy: (fixture) => oracle(fixture.patch),
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
    t.after(() => stack.stop());
    const { sim, pipeline } = stack;
    const n = sim.createIssue('acme', 'calc', {
      title: 'Average rounds wrong',
      body: 'b',
      author: 'maria',
    }).number;
    await sim.label('acme', 'calc', n, 'agent', 'maria');
    await sim.waitFor(
      () => sim.pulls('acme', 'calc').length === 1,
      120_000,
      () => `the PR\n${pipeline.logs()}`,
    );
    // The job span ends after the PR; the worker exports its batch within 100 ms.
    await sim.waitFor(
      () => receiver.spans.some((s) => s.name === 'job'),
      30_000,
      () => `the job span\n${JSON.stringify(receiver.spans.map((s) => s.name))}`,
    );

    const webhooks = receiver.spans.filter(
      (s) => s.name === 'webhook' && s.attributes['github.event'] === 'issues.labeled',
    );
    assert.equal(webhooks.length, 1, 'one labelled delivery');
    const root = webhooks[0];
    assert.ok(root);
    assert.equal(root.parentSpanId, '', 'the webhook span is the root');
    assert.equal(root.service, 'issue-agent-app');
    const trace = receiver.spans.filter((s) => s.traceId === root.traceId);
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const one = (name: string) => {
      const found = trace.filter((s) => s.name === name);
      assert.equal(found.length, 1, `one ${name} span: ${JSON.stringify(trace.map((s) => s.name))}`);
      return found[0] as ReceivedSpan;
    };
    const parentOf = (s: ReceivedSpan) => byId.get(s.parentSpanId);

    const intake = one('intake');
    assert.equal(intake.parentSpanId, root.spanId);
    const job = one('job');
    assert.equal(job.service, 'issue-agent-worker', 'the job span comes from the worker process');
    assert.equal(job.parentSpanId, intake.spanId, 'the worker continues the trace the App queued');
    assert.equal(job.attributes['github.repository'], 'acme/calc');
    assert.match(String(job.attributes['issue_agent.job']), /^r\d+-i\d+-/);
    assert.equal(one('queue wait').parentSpanId, intake.spanId);
    assert.equal(one('sandbox').parentSpanId, job.spanId);
    assert.equal(one('publish').parentSpanId, job.spanId);
    const steps = trace.filter((s) => s.name === 'agent step');
    assert.ok(steps.length >= 3, `steps: ${steps.length}`);
    for (const s of steps) assert.equal(parentOf(s)?.name, 'job');
    const calls = trace.filter((s) => s.name === 'model call');
    assert.equal(calls.length, steps.length, 'one model call per step');
    for (const c of calls) assert.equal(parentOf(c)?.name, 'agent step');
    const tools = trace.filter((s) => s.name.startsWith('tool '));
    assert.ok(
      tools.some((s) => s.name === 'tool run_tests'),
      JSON.stringify(tools.map((s) => s.name)),
    );
    for (const s of tools) assert.equal(parentOf(s)?.name, 'agent step');
    // Every parent link resolves inside the trace: one root, no orphans.
    for (const s of trace) if (s !== root) assert.ok(byId.has(s.parentSpanId), `${s.name} has its parent`);
  },
);
