import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { containerSpec, DEFAULT_LIMITS } from '../../../src/sandbox/docker/container-spec.js';
import { hostsMountFile } from '../../../src/sandbox/docker/ca-file.js';
import { execStream } from '../../../src/sandbox/docker/setup-phase.js';
import { dockerTest, testOwner } from './docker-test-support.js';

/**
 * execStream with a sink slower than the process (the environment cache's file stream while the
 * machine is busy): the result must come only once the sink has every byte. A result that came when
 * the exec's stream ended, with bytes still held back by the sink's backpressure, stored cache
 * entries cut short (see docs/benchmarks.md).
 */
dockerTest(
  'execStream: a slow sink has every byte of the output when the result comes',
  async (docker, t) => {
    const container = await docker.createContainer(
      containerSpec({
        name: `ia-exec-stream-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
        image: 'issue-agent/base:latest',
        uid: 1000,
        gid: 1000,
        limits: DEFAULT_LIMITS,
        labels: { job: 'exec-stream', owner: testOwner('exec-stream') },
        hostsFile: await hostsMountFile(),
      }),
    );
    t.after(() => container.remove({ force: true }));
    await container.start();
    const total = 8 * 1024 * 1024;
    let received = 0;
    const sink = new Writable({
      highWaterMark: 16 * 1024,
      write(chunk: Buffer, _encoding, done) {
        received += chunk.length;
        setTimeout(done, 2);
      },
    });
    const r = await execStream(docker, container, ['head', '-c', String(total), '/dev/zero'], {
      user: '1000:1000',
      timeoutMs: 120_000,
      stdout: sink,
    });
    assert.equal(r.exitCode, 0, r.output);
    // The result promises that every byte was handed to the sink, not that the sink has processed
    // it: up to its highWaterMark may still sit in its own buffer, which is why the cache ends the
    // sink and waits for it. Ending it here counts exactly what was handed over: a byte still held
    // back in execStream's paused stream would never arrive, because an ending sink emits no
    // 'drain' to resume it.
    sink.end();
    await finished(sink);
    assert.equal(received, total, 'every byte reached the sink before the result');
  },
  { timeout: 180_000 },
);
