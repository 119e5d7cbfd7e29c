import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { APPROVAL_TTL_SECONDS, APPROVE, storeRequest, takeRequest } from '../../src/app/approval.js';
import type { Trigger } from '../../src/app/triggers.js';
import { redisSkipReason, startRedis } from '../support/redis-server.js';

function request(body: string): Trigger {
  return {
    v: 1,
    kind: 'mention',
    deliveryId: 'outsider-1',
    installationId: 5,
    repo: { id: 7, owner: 'acme', name: 'calc', private: false },
    issue: { number: 3, title: 'Bug', state: 'open', isPullRequest: false, body: 'text' },
    sender: { login: 'otto', id: 42, type: 'User' },
    comment: { id: 99, body },
    receivedAt: new Date().toISOString(),
  };
}

/** A private Redis server for one test, stopped after it. */
async function privateRedis(t: TestContext): Promise<Redis> {
  const server = await startRedis();
  const redis = new Redis(server.url);
  t.after(async () => {
    redis.disconnect();
    await server.stop();
  });
  return redis;
}

void test('approve: the word first; anything after it is for people', () => {
  assert.ok(APPROVE.test('approve'));
  assert.ok(APPROVE.test('Approve, thanks'));
  assert.ok(!APPROVE.test('approved'));
  assert.ok(!APPROVE.test('please approve'));
});

void test(
  'a waiting request: taken once per approval (the same delivery again gets it, another approval does not), replaced by a newer one, expiring in 7 days',
  { skip: redisSkipReason() },
  async (t) => {
    const redis = await privateRedis(t);
    assert.deepEqual(await takeRequest(redis, 'p', 'r7-i3', 'approve-1'), { kind: 'none' });
    await storeRequest(redis, 'p', 'r7-i3', request('@agent fix it'));
    const ttl = await redis.ttl('p:approval:r7-i3');
    assert.ok(ttl > APPROVAL_TTL_SECONDS - 10 && ttl <= APPROVAL_TTL_SECONDS, String(ttl));
    const first = await takeRequest(redis, 'p', 'r7-i3', 'approve-1');
    assert.ok(first.kind === 'approved');
    assert.equal(first.request.comment?.body, '@agent fix it');
    // An intake retry of the same approval, and a second approval.
    assert.equal((await takeRequest(redis, 'p', 'r7-i3', 'approve-1')).kind, 'approved');
    assert.deepEqual(await takeRequest(redis, 'p', 'r7-i3', 'approve-2'), { kind: 'used' });
    // Another conversation is another request.
    assert.deepEqual(await takeRequest(redis, 'p', 'r7-i4', 'approve-2'), { kind: 'none' });
    // A newer request from an outsider waits again, and can be approved.
    await storeRequest(redis, 'p', 'r7-i3', request('@agent fix it differently'));
    const again = await takeRequest(redis, 'p', 'r7-i3', 'approve-3');
    assert.equal(again.kind === 'approved' ? again.request.comment?.body : '', '@agent fix it differently');
  },
);

void test(
  'a waiting request expires after its time (`approvalDays`): an approval then finds nothing',
  { skip: redisSkipReason() },
  async (t) => {
    const redis = await privateRedis(t);
    await storeRequest(redis, 'p', 'r7-i5', request('@agent fix it'), 3 * 86_400);
    const ttl = await redis.ttl('p:approval:r7-i5');
    assert.ok(ttl > 3 * 86_400 - 10 && ttl <= 3 * 86_400, String(ttl));
    // One second, to see it expire.
    await storeRequest(redis, 'p', 'r7-i5', request('@agent fix it'), 1);
    for (let i = 0; i < 100 && (await redis.exists('p:approval:r7-i5')) === 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(await takeRequest(redis, 'p', 'r7-i5', 'approve-late'), { kind: 'none' });
    // A used mark lasts as long as its request could: it does not outlive it.
    await storeRequest(redis, 'p', 'r7-i6', request('@agent fix it'), 600);
    assert.equal((await takeRequest(redis, 'p', 'r7-i6', 'approve-1')).kind, 'approved');
    const used = await redis.pttl('p:approval-used:r7-i6');
    assert.ok(used > 600_000 && used <= 601_000, `${used} ms: a second beyond its request`);
    // A request without an expiry (set by hand): the mark falls back to the default wait, not to nothing.
    await storeRequest(redis, 'p', 'r7-i7', request('@agent fix it'));
    await redis.persist('p:approval:r7-i7');
    assert.equal((await takeRequest(redis, 'p', 'r7-i7', 'approve-1')).kind, 'approved');
    assert.ok((await redis.ttl('p:approval-used:r7-i7')) > APPROVAL_TTL_SECONDS - 10);
    assert.deepEqual(await takeRequest(redis, 'p', 'r7-i7', 'approve-2'), { kind: 'used' });
  },
);
