import assert from 'node:assert/strict';
import { test } from 'node:test';
import type Docker from 'dockerode';
import { LABEL_OWNER, LABEL_SANDBOX } from '../../../src/sandbox/docker/owner.js';
import { reapOrphans } from '../../../src/sandbox/docker/reap.js';

/** An engine with one orphan (no owner) whose removal answers `status`. */
function engineAnswering(status: number): Docker {
  const orphan = {
    Id: 'c0ffee',
    Created: 0,
    Labels: { [LABEL_SANDBOX]: '1', [LABEL_OWNER]: '' },
  };
  const fake = {
    listContainers: () => Promise.resolve([orphan]),
    getContainer: () => ({
      remove: () =>
        Promise.reject(
          Object.assign(new Error(`(HTTP code ${status}) removal of container c0ffee`), {
            statusCode: status,
          }),
        ),
    }),
  };
  return fake as unknown as Docker;
}

test("a container someone else is removing (409) or removed (404) does not stop a worker's reap", async () => {
  for (const status of [404, 409]) {
    const r = await reapOrphans(engineAnswering(status), { self: 'another-owner' });
    assert.deepEqual(r, { removed: [], kept: 0 }, String(status));
  }
  await assert.rejects(reapOrphans(engineAnswering(500), { self: 'another-owner' }), /HTTP code 500/);
});
