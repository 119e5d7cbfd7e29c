import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { readAppEnv } from '../../src/config/app-env.js';
import { WorkerMetrics } from '../../src/worker/worker-metrics.js';
import { freePort } from '../support/redis-server.js';

const PEM = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
  type: 'pkcs8',
  format: 'pem',
}) as string;
const BASE = { APP_ID: '1', PRIVATE_KEY: PEM, WEBHOOK_SECRET: 's' };

test('ISSUE_AGENT_WORKER_METRICS_PORT is a port or a range; anything else is refused with the form it takes', () => {
  assert.deepEqual(readAppEnv({ ...BASE, ISSUE_AGENT_WORKER_METRICS_PORT: '9464' }).workerMetrics, {
    port: 9464,
    lastPort: 9464,
    host: '127.0.0.1',
  });
  assert.deepEqual(readAppEnv({ ...BASE, ISSUE_AGENT_WORKER_METRICS_PORT: '9464-9471' }).workerMetrics, {
    port: 9464,
    lastPort: 9471,
    host: '127.0.0.1',
  });
  assert.equal(readAppEnv(BASE).workerMetrics, null);
  for (const bad of ['9471-9464', '70000', 'http', '9464-', '-1']) {
    assert.throws(
      () => readAppEnv({ ...BASE, ISSUE_AGENT_WORKER_METRICS_PORT: bad }),
      /ISSUE_AGENT_WORKER_METRICS_PORT/,
      bad,
    );
  }
});

test('workers given one range of ports (compose --scale on the host network) each take the next free one; a full range is an error', async (t) => {
  const first = await freePort();
  // Something else holds the first port of the range.
  const other = createServer();
  await new Promise<void>((resolve) => other.listen(first, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) =>
        other.close(() => {
          resolve();
        }),
      ),
  );
  const a = await new WorkerMetrics().serveInRange(first, first + 10, '127.0.0.1');
  t.after(() => a.close());
  const b = await new WorkerMetrics().serveInRange(first, first + 10, '127.0.0.1');
  t.after(() => b.close());
  assert.ok(a.port > first && a.port <= first + 10);
  assert.ok(b.port > a.port && b.port <= first + 10);
  assert.equal((await fetch(`http://127.0.0.1:${b.port}/metrics`)).status, 200);
  await assert.rejects(new WorkerMetrics().serveInRange(first, first, '127.0.0.1'), /EADDRINUSE/);
});
