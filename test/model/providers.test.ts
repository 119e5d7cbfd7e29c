import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError, readAgentEnv } from '../../src/config/agent-env.js';
import type { EventOf } from '../../src/events/schema.js';
import { oracle, startModelSimulator } from '../../src/model-sim/index.js';
import { findPrice } from '../../src/model/pricing.js';
import {
  providerModelId,
  providerSecrets,
  readProviderConfig,
  type ProviderConfig,
} from '../../src/model/provider-config.js';
import { createModel } from '../../src/model/providers.js';
import { startHarness } from '../support/agent-harness.js';
import { makeFixtureRepo } from '../support/fixture-repo.js';

const patch = (() => {
  const r = makeFixtureRepo('node-calc');
  r.cleanup();
  return r.patch;
})();

const AWS_KEY_ID = 'AKIASIMULATED0000001';

function bedrock(simUrl: string): ProviderConfig {
  return readProviderConfig({
    ISSUE_AGENT_MODEL_PROVIDER: 'bedrock',
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: AWS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: 'simulated-secret-access-key',
    ANTHROPIC_BEDROCK_BASE_URL: simUrl,
  });
}

test('Bedrock: the oracle resolves node-calc through the Bedrock SDK, SigV4-signed, streamed in AWS event-stream framing', async () => {
  const h = await startHarness({
    policy: oracle(patch),
    providerAuth: { awsAccessKeyId: AWS_KEY_ID },
    model: (url) =>
      createModel(bedrock(url), { model: 'claude-sonnet-4-6', baseBackoffMs: 10, maxAttempts: 2 }),
  });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.ok(h.sim.requests.length >= 2);
    for (const r of h.sim.requests) {
      assert.equal(r.provider, 'bedrock');
      assert.equal(r.status, 200);
      assert.equal(r.path, '/model/global.anthropic.claude-sonnet-4-6/invoke-with-response-stream');
      assert.match(
        String(r.headers.authorization),
        new RegExp(`^AWS4-HMAC-SHA256 Credential=${AWS_KEY_ID}/\\d{8}/eu-west-1/bedrock/aws4_request, `),
      );
      const body = r.body as Record<string, unknown>;
      // The 1.x SDKs move the API version header into the body (the sim also takes bedrock-2023-05-31).
      assert.match(String(body['anthropic_version']), /^\d{4}-\d{2}-\d{2}$/);
      assert.equal(r.headers['anthropic-version'], undefined);
      assert.equal('model' in body, false);
      assert.equal('stream' in body, false);
      // Prompt caching goes through Bedrock unchanged.
      assert.match(JSON.stringify(body['system']), /"cache_control":\{"type":"ephemeral"\}/);
    }
    // Cost accounting from the usage Bedrock's stream carried, at our name's price.
    const responses = h.store.events.filter(
      (e): e is EventOf<'model_response'> => e.kind === 'model_response',
    );
    assert.ok(responses.every((e) => e.usage.inputTokens > 0 && e.usd > 0));
  } finally {
    await h.close();
  }
});

test('Vertex: the oracle resolves node-calc through the Vertex SDK, with a token from google-auth-library’s own credential chain', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-vertex-'));
  const saved = process.env.GOOGLE_APPLICATION_CREDENTIALS;
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const h = await startHarness({
    policy: oracle(patch),
    providerAuth: { googleAccessToken: 'ya29.simulated-vertex' },
    model: (url) => {
      // A workload-identity credential file (ADC's GOOGLE_APPLICATION_CREDENTIALS) whose token
      // exchange goes to the simulator's STS endpoint: the real chain, no stub client. Set before
      // the client is made, which is when the SDK starts looking for credentials.
      writeFileSync(join(dir, 'subject-token'), 'simulated-oidc-token');
      writeFileSync(
        join(dir, 'credentials.json'),
        JSON.stringify({
          type: 'external_account',
          audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/p',
          subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
          token_url: `${url}/v1/token`,
          credential_source: { file: join(dir, 'subject-token') },
        }),
      );
      process.env.GOOGLE_APPLICATION_CREDENTIALS = join(dir, 'credentials.json');
      const config = readProviderConfig({
        ISSUE_AGENT_MODEL_PROVIDER: 'vertex',
        CLOUD_ML_REGION: 'us-east5',
        ANTHROPIC_VERTEX_PROJECT_ID: 'issue-agent-test',
        ANTHROPIC_VERTEX_BASE_URL: `${url}/v1`,
      });
      return createModel(config, { model: 'claude-sonnet-4-6', baseBackoffMs: 10, maxAttempts: 2 });
    },
  });
  try {
    const outcome = await h.run();
    assert.equal(outcome.outcome, 'resolved', outcome.reason);
    assert.ok(h.sim.requests.length >= 2);
    for (const r of h.sim.requests) {
      assert.equal(r.provider, 'vertex');
      assert.equal(r.status, 200);
      assert.equal(
        r.path,
        '/v1/projects/issue-agent-test/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-6:streamRawPredict',
      );
      assert.equal(r.headers.authorization, 'Bearer ya29.simulated-vertex');
      const body = r.body as Record<string, unknown>;
      assert.match(String(body['anthropic_version']), /^\d{4}-\d{2}-\d{2}$/);
      assert.equal(r.headers['anthropic-version'], undefined);
      assert.equal('model' in body, false);
    }
  } finally {
    if (saved === undefined) delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    else process.env.GOOGLE_APPLICATION_CREDENTIALS = saved;
    await h.close();
  }
});

test('the simulator refuses what Bedrock and Vertex would: no signature, a body naming the model, the wrong version', async () => {
  const sim = await startModelSimulator({ policy: oracle(patch) });
  try {
    const post = async (path: string, headers: Record<string, string>, body: unknown): Promise<number> =>
      (
        await fetch(`${sim.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify(body),
        })
      ).status;
    const messages = [{ role: 'user', content: 'hi' }];
    const sig = {
      authorization: `AWS4-HMAC-SHA256 Credential=${AWS_KEY_ID}/20261205/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'a'.repeat(64)}`,
      'x-amz-date': '20261205T000000Z',
    };
    const ok = { anthropic_version: 'bedrock-2023-05-31', max_tokens: 10, messages };
    assert.equal(await post('/model/m/invoke', {}, ok), 403);
    assert.equal(await post('/model/m/invoke', sig, { ...ok, model: 'm' }), 400);
    assert.equal(await post('/model/m/invoke', sig, { ...ok, anthropic_version: 'vertex-2023-10-16' }), 400);
    assert.equal(await post('/model/m/invoke', sig, { ...ok, anthropic_version: undefined }), 400);
    assert.equal(await post('/model/m/invoke', sig, ok), 200);
    const vertexPath = '/v1/projects/p/locations/global/publishers/anthropic/models/m:rawPredict';
    const vertex = { anthropic_version: 'vertex-2023-10-16', max_tokens: 10, messages };
    assert.equal(await post(vertexPath, {}, vertex), 401);
    assert.equal(await post(vertexPath, { authorization: 'Bearer t' }, { ...vertex, model: 'm' }), 400);
    assert.equal(await post(vertexPath, { authorization: 'Bearer t' }, vertex), 200);
  } finally {
    await sim.close();
  }
});

test('provider config: clear errors, mapped model ids with an override, per-endpoint prices, secrets to redact', () => {
  assert.throws(
    () => readAgentEnv({ ISSUE_AGENT_MODEL_PROVIDER: 'azure' }),
    (e: unknown) => e instanceof ConfigError && /must be one of anthropic, bedrock, vertex/.test(e.message),
  );
  assert.throws(
    () => readAgentEnv({ ISSUE_AGENT_MODEL_PROVIDER: 'bedrock' }),
    (e: unknown) => e instanceof ConfigError && /AWS_REGION is required/.test(e.message),
  );
  assert.throws(
    () =>
      readAgentEnv({
        ISSUE_AGENT_MODEL_PROVIDER: 'bedrock',
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'A',
      }),
    (e: unknown) => e instanceof ConfigError && /AWS_SECRET_ACCESS_KEY is required/.test(e.message),
  );
  assert.throws(
    () => readAgentEnv({ ISSUE_AGENT_MODEL_PROVIDER: 'vertex', CLOUD_ML_REGION: 'global' }),
    (e: unknown) => e instanceof ConfigError && /ANTHROPIC_VERTEX_PROJECT_ID is required/.test(e.message),
  );

  const b = readProviderConfig({ ISSUE_AGENT_MODEL_PROVIDER: 'bedrock', AWS_REGION: 'us-east-1' });
  assert.equal(providerModelId(b, 'claude-opus-4-5'), 'global.anthropic.claude-opus-4-5-20251101-v1:0');
  const v = readProviderConfig({
    ISSUE_AGENT_MODEL_PROVIDER: 'vertex',
    CLOUD_ML_REGION: 'global',
    GOOGLE_CLOUD_PROJECT: 'p',
  });
  assert.equal(providerModelId(v, 'claude-sonnet-4-5-20250929'), 'claude-sonnet-4-5@20250929');
  const pinned = readProviderConfig({
    ISSUE_AGENT_MODEL_PROVIDER: 'bedrock',
    AWS_REGION: 'eu-west-1',
    ISSUE_AGENT_PROVIDER_MODEL_ID: 'eu.anthropic.claude-sonnet-4-5-20250929-v1:0',
  });
  assert.equal(providerModelId(pinned, 'claude-sonnet-4-5'), 'eu.anthropic.claude-sonnet-4-5-20250929-v1:0');

  // List prices at global endpoints; 10% more at a regional one, for Claude 4.5 and later only.
  const list = readAgentEnv({
    ISSUE_AGENT_MODEL_PROVIDER: 'vertex',
    CLOUD_ML_REGION: 'global',
    GOOGLE_CLOUD_PROJECT: 'p',
  });
  const regional = readAgentEnv({
    ISSUE_AGENT_MODEL_PROVIDER: 'vertex',
    CLOUD_ML_REGION: 'us-east5',
    GOOGLE_CLOUD_PROJECT: 'p',
  });
  assert.equal(findPrice(list.prices, 'claude-sonnet-4-6')?.input, 3);
  assert.equal(findPrice(regional.prices, 'claude-sonnet-4-6')?.input, 3 * 1.1);
  assert.equal(findPrice(regional.prices, 'claude-sonnet-4-20250514')?.input, 3);
  const pinnedEnv = readAgentEnv({
    ISSUE_AGENT_MODEL_PROVIDER: 'bedrock',
    AWS_REGION: 'eu-west-1',
    ISSUE_AGENT_PROVIDER_MODEL_ID: 'eu.anthropic.claude-sonnet-4-5-20250929-v1:0',
  });
  assert.equal(findPrice(pinnedEnv.prices, 'claude-sonnet-4-5')?.output, 15 * 1.1);

  assert.deepEqual(
    providerSecrets(
      readProviderConfig({
        ISSUE_AGENT_MODEL_PROVIDER: 'bedrock',
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'AKIA1',
        AWS_SECRET_ACCESS_KEY: 'secret',
        AWS_SESSION_TOKEN: 'session',
      }),
    ),
    ['secret', 'session'],
  );
});
