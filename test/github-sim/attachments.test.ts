import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { fetchIssueImages } from '../../src/github/issue-images.js';
import { startGitHubSimulator, type GitHubSim } from '../support/github-sim/index.js';
import { installationToken, makeSourceRepo, type TempDir } from './helpers.js';

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

describe('github-sim: user attachments', () => {
  let sim: GitHubSim;
  let src: TempDir;
  let token: string;
  before(async () => {
    sim = await startGitHubSimulator();
    src = await makeSourceRepo({ 'README.md': 'hi\n' });
    await sim.createRepo({ owner: 'acme', name: 'secret', sourceDir: src.dir, private: true });
    await sim.createRepo({ owner: 'acme', name: 'open', sourceDir: src.dir });
    token = (await installationToken(sim)).token;
  });
  after(async () => {
    await sim.close();
    src.cleanup();
  });

  it("a private repository's attachment: 404 without a token, else a redirect to a signed URL that needs none", async () => {
    const url = sim.addAttachment('acme', 'secret', {
      bytes: PNG,
      contentType: 'image/png',
      uploader: 'maria',
    });
    assert.match(url, new RegExp(`^${sim.url}/user-attachments/assets/[0-9a-f-]{36}$`));
    assert.equal((await fetch(url, { redirect: 'manual' })).status, 404);
    assert.equal(
      (await fetch(url, { redirect: 'manual', headers: { authorization: 'token ghs_notatoken' } })).status,
      404,
    );
    const found = await fetch(url, { redirect: 'manual', headers: { authorization: `token ${token}` } });
    assert.equal(found.status, 302);
    const location = found.headers.get('location') ?? '';
    assert.match(location, /\/_private-user-images\/\d+\/\d+-[0-9a-f-]{36}\.png\?jwt=/);
    const bytes = await fetch(location);
    assert.equal(bytes.status, 200);
    assert.equal(bytes.headers.get('content-type'), 'image/png');
    assert.deepEqual(Buffer.from(await bytes.arrayBuffer()), PNG);
    // The signed URL is bound to its asset.
    assert.equal((await fetch(location.replace(/-[0-9a-f-]{36}\./, `-${randomUUID()}.`))).status, 404);
    const missing = `${sim.url}/user-attachments/assets/${randomUUID()}`;
    assert.equal(
      (await fetch(missing, { redirect: 'manual', headers: { authorization: `token ${token}` } })).status,
      404,
    );
  });

  it("a public repository's attachment needs no token", async () => {
    const url = sim.addAttachment('acme', 'open', {
      bytes: PNG,
      contentType: 'image/png',
      uploader: 'maria',
    });
    assert.equal((await fetch(url, { redirect: 'manual' })).status, 302);
  });

  it('fetchIssueImages: the token goes to the attachment URL, never to the signed URL; a missing one is named', async () => {
    const url = sim.addAttachment('acme', 'secret', {
      bytes: PNG,
      contentType: 'image/png',
      uploader: 'maria',
    });
    const fake = sim.addAttachment('acme', 'secret', {
      bytes: Buffer.from('<svg/>'),
      contentType: 'image/png',
      uploader: 'maria',
    });
    const missing = `${sim.url}/user-attachments/assets/${randomUUID()}`;
    const from = sim.requests.length;
    const got = await fetchIssueImages([url, fake, missing], { token });
    assert.deepEqual(
      got.images.map((i) => [i.url, i.mediaType, i.data]),
      [[url, 'image/png', PNG.toString('base64')]],
    );
    assert.deepEqual(got.unavailable, [
      { url: fake, reason: 'not a PNG, JPEG, GIF or WebP image' },
      { url: missing, reason: 'HTTP 404' },
    ]);
    const seen = sim.requests.slice(from);
    for (const r of seen) {
      if (r.path.startsWith('/user-attachments/')) assert.equal(r.headers.authorization, `token ${token}`);
      else assert.equal(r.headers.authorization, undefined, r.path);
    }
    assert.equal(seen.filter((r) => r.path.startsWith('/_private-user-images/')).length, 2);
  });
});
