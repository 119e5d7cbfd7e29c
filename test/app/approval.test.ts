import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import {
  APPROVAL_TTL_SECONDS,
  APPROVE,
  bodyDigest,
  claimRequest,
  storeRequest,
  usedBy,
  waitingRequests,
} from '../../src/app/approval.js';
import { coverage } from '../../src/app/approve-request.js';
import type { Trigger } from '../../src/queue/trigger.js';
import { redisSkipReason, startRedis } from '../support/redis-server.js';

function request(body: string, id = 99): Trigger {
  return {
    v: 1,
    kind: 'mention',
    deliveryId: 'outsider-1',
    installationId: 5,
    repo: { id: 7, owner: 'acme', name: 'calc', private: false },
    issue: { number: 3, title: 'Bug', state: 'open', isPullRequest: false, body: 'text' },
    sender: { login: 'otto', id: 42, type: 'User' },
    comment: { id, body, createdAt: '2026-01-01T10:00:00Z' },
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

void test('what an approval covers: the text as it read when the approve comment was created, to the second', () => {
  const delivered = bodyDigest('@agent fix it');
  const at = '2026-01-01T10:00:10Z';
  const state = (body: string, createdAt: string, updatedAt: string | null) => ({
    body,
    createdAt,
    updatedAt,
  });
  const rows: [string, ReturnType<typeof state>, ReturnType<typeof coverage>][] = [
    [
      'unedited',
      state('@agent fix it', '2026-01-01T10:00:00Z', '2026-01-01T10:00:00Z'),
      { kind: 'covered', editedBefore: false },
    ],
    [
      'edited before',
      state('@agent fix it well', '2026-01-01T10:00:00Z', '2026-01-01T10:00:09Z'),
      { kind: 'covered', editedBefore: true },
    ],
    [
      'edited after',
      state('@agent curl | sh', '2026-01-01T10:00:00Z', '2026-01-01T10:00:11Z'),
      { kind: 'edited_after' },
    ],
    [
      'edited in the same second',
      state('@agent curl | sh', '2026-01-01T10:00:00Z', '2026-01-01T10:00:10Z'),
      { kind: 'edited_after' },
    ],
    // An edit GitHub did not date (its updated_at unchanged) is never taken as seen.
    [
      'changed without a dated edit',
      state('@agent curl | sh', '2026-01-01T10:00:00Z', null),
      { kind: 'edited_after' },
    ],
    [
      'posted after',
      state('@agent fix it', '2026-01-01T10:00:11Z', '2026-01-01T10:00:11Z'),
      { kind: 'posted_after' },
    ],
    [
      'posted in the same second',
      state('@agent fix it', '2026-01-01T10:00:10Z', '2026-01-01T10:00:10Z'),
      { kind: 'posted_after' },
    ],
    ['an unreadable date', state('@agent fix it', 'yesterday', 'yesterday'), { kind: 'posted_after' }],
  ];
  for (const [name, now, expected] of rows) assert.deepEqual(coverage(now, delivered, at), expected, name);
});

void test(
  'waiting requests: one per comment, expiring with their time (`approvalDays`); each is approved once (the same approval again gets it, another does not)',
  { skip: redisSkipReason() },
  async (t) => {
    const redis = await privateRedis(t);
    assert.deepEqual(await waitingRequests(redis, 'p', 'r7-i3'), []);
    await storeRequest(redis, 'p', 'r7-i3', { trigger: request('@agent fix it'), answers: null });
    const ttl = await redis.ttl('p:approvals:r7-i3');
    assert.ok(ttl > APPROVAL_TTL_SECONDS - 10 && ttl <= APPROVAL_TTL_SECONDS, String(ttl));
    // An intake retry stores the same comment again; a second request is another entry.
    await storeRequest(redis, 'p', 'r7-i3', { trigger: request('@agent fix it'), answers: null });
    await storeRequest(redis, 'p', 'r7-i3', { trigger: request('@agent other', 100), answers: 'job-1' });
    const waiting = await waitingRequests(redis, 'p', 'r7-i3');
    assert.deepEqual(
      waiting.map((w) => [w.trigger.comment?.id, w.digest, w.answers]),
      [
        [99, bodyDigest('@agent fix it'), null],
        [100, bodyDigest('@agent other'), 'job-1'],
      ],
    );
    // Another conversation holds its own.
    assert.deepEqual(await waitingRequests(redis, 'p', 'r7-i4'), []);

    const approved = { deliveryId: 'approve-1', body: '@agent fix it', digest: bodyDigest('@agent fix it') };
    assert.equal(await claimRequest(redis, 'p', 'r7-i3', 99, approved), true);
    assert.equal(
      await claimRequest(redis, 'p', 'r7-i3', 99, approved),
      true,
      'an intake retry of that approval',
    );
    assert.equal(
      await claimRequest(redis, 'p', 'r7-i3', 99, { ...approved, deliveryId: 'approve-2' }),
      false,
    );
    assert.deepEqual(await usedBy(redis, 'p', 'r7-i3', 99), approved, 'the text it approved is kept');
    assert.equal(await usedBy(redis, 'p', 'r7-i3', 100), null);
    const used = await redis.pttl('p:approval-used:r7-i3:99');
    assert.ok(used > (await redis.pttl('p:approvals:r7-i3')), 'the mark outlives the requests');

    // Expiry: one second, to see it go (the list keeps the longest time of its entries).
    await storeRequest(redis, 'p', 'r7-i5', { trigger: request('@agent fix it'), answers: null }, 1);
    for (let i = 0; i < 100 && (await redis.exists('p:approvals:r7-i5')) === 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(await waitingRequests(redis, 'p', 'r7-i5'), []);
    // An entry past its own time is gone even while the list lives on for a newer one.
    await storeRequest(
      redis,
      'p',
      'r7-i6',
      { trigger: request('@agent old'), answers: null },
      600,
      Date.now() - 601_000,
    );
    await storeRequest(redis, 'p', 'r7-i6', { trigger: request('@agent new', 101), answers: null }, 600);
    assert.deepEqual(
      (await waitingRequests(redis, 'p', 'r7-i6')).map((w) => w.trigger.comment?.id),
      [101],
    );
  },
);
