import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { buildMessages } from '../../src/agent/conversation.js';
import { loadTaskImages } from '../../src/agent/task-images.js';
import { FileRunStorage, PgRunStorage, type RunStorage } from '../../src/events/run-storage.js';
import { renderPullRequest } from '../../src/publish/pr-body.js';
import { Redactor } from '../../src/publish/redact.js';
import {
  attachTaskImages,
  fetchTaskImages,
  reattachTaskImages,
  taskImageFields,
  type TaskImages,
} from '../../src/worker/stages/prepare.js';
import { installationToken, makeSourceRepo, type TempDir } from '../github-sim/helpers.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { postgresSkipReason, startPostgres, type TestPostgres } from '../support/postgres-server.js';
import { EventLog, makeBase } from '../publish/event-log.js';

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const GIF = Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1');
const log = pino({ level: 'silent' });

describe('a new run: the images its texts link, fetched, kept with the run, sent again on resume', () => {
  let sim: GitHubSim;
  let src: TempDir;
  let token: string;
  before(async () => {
    sim = await startGitHubSimulator();
    src = await makeSourceRepo({ 'README.md': 'hi\n' });
    await sim.createRepo({ owner: 'acme', name: 'app', sourceDir: src.dir, private: true });
    token = (await installationToken(sim)).token;
  });
  after(async () => {
    await sim.close();
    src.cleanup();
  });

  async function fetchBoth(): Promise<{ fetched: TaskImages; png: string; gif: string; missing: string }> {
    const png = sim.addAttachment('acme', 'app', { bytes: PNG, contentType: 'image/png', uploader: 'maria' });
    // Served as PNG, sniffed as the GIF it is.
    const gif = sim.addAttachment('acme', 'app', { bytes: GIF, contentType: 'image/png', uploader: 'maria' });
    const missing = `${sim.url}/user-attachments/assets/${randomUUID()}`;
    const ctx = { tokens: { get: () => Promise.resolve({ token }), issued: [token] }, log };
    const fetched = await fetchTaskImages(
      ctx,
      [
        `![a](${png}) and ![gone](${missing}) and elsewhere https://example.com/user-attachments/assets/${randomUUID()}`,
        `@agent look at ${gif} and ${png}`,
      ],
      sim.url,
    );
    return { fetched, png, gif, missing };
  }

  it('fetches from the issue and the request, in order, once each; names the missing one', async () => {
    const { fetched, png, gif, missing } = await fetchBoth();
    assert.deepEqual(
      fetched.images.map((i) => [i.url, i.mediaType]),
      [
        [png, 'image/png'],
        [gif, 'image/gif'],
      ],
    );
    assert.deepEqual(fetched.unavailable, [{ url: missing, reason: 'HTTP 404' }]);
    assert.deepEqual(taskImageFields(fetched), {
      images: [
        { url: png, mediaType: 'image/png', file: 'files/task-image-1.png', bytes: PNG.length },
        { url: gif, mediaType: 'image/gif', file: 'files/task-image-2.gif', bytes: GIF.length },
      ],
      unavailableImages: [{ url: missing, reason: 'HTTP 404' }],
    });
    assert.deepEqual(taskImageFields({ images: [], unavailable: [] }), {});
  });

  async function roundTrip(storage: RunStorage, runId: string): Promise<void> {
    const { fetched, missing } = await fetchBoth();
    const base = makeBase({ task: { ...makeBase().task, ...taskImageFields(fetched) } });
    const store = await storage.create(runId, base);
    await attachTaskImages(store, fetched);
    const sent = buildMessages(store.base, [], await loadTaskImages(store));
    // Another worker, later: the same first message from the run's files, with nothing fetched.
    const before = sim.requests.length;
    const reopened = await storage.open(runId);
    assert.ok(reopened);
    const again = buildMessages(reopened.base, [], await loadTaskImages(reopened));
    assert.deepEqual(again, sent);
    assert.equal(sim.requests.length, before);
    const first = again[0];
    assert.ok(first?.role === 'user');
    assert.deepEqual(
      first.content.map((b) => (b.type === 'image' ? b.source.data : b.type)),
      ['text', PNG.toString('base64'), GIF.toString('base64')],
    );
    // The PR names the image that could not be loaded.
    const pr = renderPullRequest({
      base: reopened.base,
      events: new EventLog().events,
      issue: { number: 7, title: 'x' },
      trajectoryLink: 'https://agent.example/runs/1',
      redactor: new Redactor([token]),
    });
    assert.ok(pr.body.includes(`- An image could not be loaded: \`${missing}\` (HTTP 404)`), pr.body);
  }

  it('the file store keeps the images as the run’s files', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'task-images-'));
    try {
      await roundTrip(new FileRunStorage(dir), 'job-1');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a run whose worker died before attaching its images, with no event yet, gets them fetched again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'task-images-'));
    try {
      const storage = new FileRunStorage(dir);
      const { fetched } = await fetchBoth();
      const store = await storage.create(
        'job-3',
        makeBase({ task: { ...makeBase().task, ...taskImageFields(fetched) } }),
      );
      assert.deepEqual(await loadTaskImages(store), []);
      const ctx = { tokens: { get: () => Promise.resolve({ token }), issued: [token] }, log };
      await reattachTaskImages(ctx, store);
      const blocks = await loadTaskImages(store);
      assert.deepEqual(
        blocks.map((b) => b.source.data),
        [PNG.toString('base64'), GIF.toString('base64')],
      );
      // Nothing is fetched once they are there.
      const before = sim.requests.length;
      await reattachTaskImages(ctx, store);
      assert.equal(sim.requests.length, before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('PostgreSQL', { skip: postgresSkipReason() }, () => {
    let pg: TestPostgres;
    let storage: PgRunStorage;
    before(async () => {
      pg = await startPostgres();
      storage = await PgRunStorage.connect(pg.url);
    });
    after(async () => {
      await storage.close();
      await pg.stop();
    });
    it('the PostgreSQL store keeps the images as the run’s files', async () => {
      await roundTrip(storage, 'job-2');
    });
  });
});
