import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { oracle } from '../../src/model-sim/index.js';
import { labelledIssue, startStack } from '../support/pipeline.js';
import { redisSkipReason } from '../support/redis-server.js';

const OWNER = 'acme';
const REPO = 'calc';
/** A 1×1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

interface Block {
  readonly type: string;
  readonly text?: string;
  readonly source?: { readonly type: string; readonly media_type: string; readonly data: string };
}

/**
 * Issue 36, must-show 3, through the whole App: an issue of a private repository whose body links
 * two user attachments, one uploaded and one that does not exist. The worker fetches them with the
 * installation's token (the simulator serves an attachment only with a token that can read the
 * repository, by a redirect to a signed URL); the model's first request carries the one that exists
 * as an image block after the task text, and names the missing one; so does the PR.
 */
test(
  'App: the images an issue links reach the model as image blocks; one that cannot be fetched is named to the model and in the PR',
  { skip: redisSkipReason(), timeout: 300_000 },
  async (t) => {
    const stack = await startStack({
      owner: OWNER,
      repo: REPO,
      private: true,
      maintainer: { login: 'maria', permission: 'maintain' },
      modelKey: 'sk-ant-issue-images-0123456789abcdef',
      policy: (fixture) => oracle(fixture.patch),
    });
    t.after(() => stack.stop());
    const { sim, model, pipeline } = stack;
    const shown = sim.addAttachment(OWNER, REPO, { bytes: PNG, contentType: 'image/png', uploader: 'maria' });
    const missing = `${sim.url}/user-attachments/assets/${randomUUID()}`;
    // Without a token the simulator, as GitHub, does not say the attachment exists.
    assert.equal((await fetch(shown, { redirect: 'manual' })).status, 404);

    await labelledIssue(stack, {
      title: 'Average rounds wrong',
      body: `average([1, 2, 2]) should be 1.67, see:\n\n![result](${shown})\n\n<img width="400" alt="old" src="${missing}" />`,
    });
    await sim.waitFor(
      () => sim.pulls(OWNER, REPO).length > 0,
      240_000,
      () => `a PR\n${pipeline.logs()}`,
    );

    // The model's first request: the task text, then exactly the one image that exists.
    const first = model.requests.find((r) => r.path.endsWith('/messages') && r.status === 200);
    assert.ok(first, 'a model request');
    const body = first.body as { messages: { role: string; content: Block[] }[] };
    const content = body.messages[0]?.content ?? [];
    assert.equal(content[0]?.type, 'text');
    const images = content.filter((b) => b.type === 'image');
    assert.equal(images.length, 1, JSON.stringify(content.map((b) => b.type)));
    assert.deepEqual(images[0]?.source, {
      type: 'base64',
      media_type: 'image/png',
      data: PNG.toString('base64'),
    });
    assert.equal(content[1]?.type, 'image', 'the image follows the task text');
    const text = content.find((b) => b.type === 'text')?.text ?? '';
    assert.ok(text.includes(`An image could not be loaded: ${missing} (HTTP 404)`), text);
    assert.ok(text.includes(`follows this message, in this order: ${shown}`), text);

    // Fetched with the installation's token, which the signed URL never got.
    // (The test's own request without a token, above, is left out.)
    const assetGets = sim.requests.filter(
      (r) => r.path.startsWith('/user-attachments/assets/') && r.headers.authorization !== undefined,
    );
    assert.deepEqual(
      assetGets.map((r) => r.path).sort(),
      [new URL(shown).pathname, new URL(missing).pathname].sort(),
    );
    for (const r of assetGets) assert.match(r.headers.authorization ?? '', /^token ghs_/);
    const signed = sim.requests.filter((r) => r.path.startsWith('/_private-user-images/'));
    assert.equal(signed.length, 1);
    assert.equal(signed[0]?.headers.authorization, undefined);

    const pr = sim.pulls(OWNER, REPO)[0];
    assert.ok(pr);
    assert.ok(pr.body.includes('### Images'), pr.body);
    assert.ok(pr.body.includes(`An image could not be loaded: \`${missing}\` (HTTP 404)`), pr.body);
  },
);
