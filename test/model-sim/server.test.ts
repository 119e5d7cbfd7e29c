import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import Anthropic, {
  APIConnectionError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  OverloadedError,
  PermissionDeniedError,
  RateLimitError,
  ServiceUnavailableError,
} from '@anthropic-ai/sdk';
import type { MessageCreateParamsNonStreaming, Tool } from '@anthropic-ai/sdk/resources/messages/messages';
import { hang, httpError, dropConnection, reply } from '../../src/model-sim/replies.js';
import { scripted } from '../../src/model-sim/policies/scripted.js';
import { startModelSimulator, type ModelSimulator } from '../../src/model-sim/server.js';
import type { ApiErrorStatus, Policy } from '../../src/model-sim/types.js';
import { countTokens } from '../../src/model-sim/usage.js';

const API_KEY = 'sk-test-key';

async function start(t: TestContext, policy: Policy): Promise<{ sim: ModelSimulator; client: Anthropic }> {
  const sim = await startModelSimulator({ policy, apiKey: API_KEY });
  t.after(() => sim.close());
  return { sim, client: new Anthropic({ apiKey: API_KEY, baseURL: sim.url, maxRetries: 0 }) };
}

const tools: Tool[] = [
  {
    name: 'bash',
    description: 'Run a command.',
    input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  },
];

const params: MessageCreateParamsNonStreaming = {
  model: 'claude-sim',
  max_tokens: 1024,
  system: 'You fix bugs.',
  tools,
  messages: [{ role: 'user', content: 'The tests fail. Fix it.' }],
};

const awkwardInput = {
  command: 'grep -rn "a\\"b" src/ && echo \'done\'\n',
  note: 'ünïcödé — 😀 {not: json}',
  nested: { list: [1, 2.5, null, true, ''], empty: {} },
};

void test('create returns the scripted reply as a Message, with usage from the documented tokenizer', async (t) => {
  const { sim, client } = await start(
    t,
    scripted([reply().text('Let me look.').tool('bash', { command: 'ls' })]),
  );
  const message = await client.messages.create(params);

  assert.match(message.id, /^msg_[A-Za-z0-9]{24}$/);
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.model, 'claude-sim');
  assert.equal(message.stop_reason, 'tool_use');
  assert.equal(message.stop_sequence, null);
  const [text, tool] = message.content;
  assert.deepEqual(text, { type: 'text', text: 'Let me look.', citations: null });
  assert.equal(tool?.type, 'tool_use');
  assert.match(tool.id, /^toolu_/);
  assert.equal(tool.name, 'bash');
  assert.deepEqual(tool.input, { command: 'ls' });

  const { system, messages } = params;
  assert.equal(message.usage.input_tokens, countTokens(JSON.stringify({ system, tools, messages })));
  assert.equal(message.usage.output_tokens, countTokens(JSON.stringify(message.content)));
  assert.equal(message.usage.cache_creation_input_tokens, 0);
  assert.equal(message.usage.cache_read_input_tokens, 0);

  const [recorded] = sim.requests;
  assert.equal(sim.requests.length, 1);
  assert.deepEqual(recorded?.body, params);
  assert.equal(recorded.stream, false);
  assert.equal(recorded.status, 200);
  assert.equal(recorded.outcome, 'reply');
  assert.deepEqual(recorded.usage, message.usage);
  assert.equal(recorded.headers['authorization'], `Bearer ${API_KEY}`);
  assert.ok(recorded.headers['anthropic-version']);
});

void test('a stream finalises into the same message as the non-streaming answer', async (t) => {
  const answer = reply()
    .text('Running the failing test to see the error message in full.')
    .tool('bash', awkwardInput);
  const { client } = await start(t, scripted([answer, answer]));
  const plain = await client.messages.create(params);
  const streamed = await client.messages.stream(params).finalMessage();

  // The SDK's MessageStream adds parsed_output client-side; ids differ per response.
  const { id: plainId, ...plainRest } = plain;
  const { id: streamedId, parsed_output: parsed, ...streamedRest } = streamed;
  assert.notEqual(plainId, streamedId);
  assert.equal(parsed, null);
  assert.deepEqual(streamedRest, plainRest);
  const tool = streamed.content[1];
  assert.equal(tool?.type, 'tool_use');
  assert.deepEqual(tool.input, awkwardInput);
});

void test('the event stream has the API event order, names matching types, and chunked deltas', async (t) => {
  const { sim } = await start(
    t,
    scripted([reply().text('Some text that spans more than one chunk.').tool('bash', awkwardInput)]),
  );
  const res = await fetch(`${sim.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': API_KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ ...params, stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  assert.match(res.headers.get('request-id') ?? '', /^req_/);
  const raw = await res.text();
  const events = raw
    .split('\n\n')
    .filter((chunk) => chunk !== '')
    .map((chunk) => {
      const match = /^event: (\w+)\ndata: (.*)$/.exec(chunk);
      assert.ok(match, `malformed event: ${chunk}`);
      const data = JSON.parse(match[2] ?? '') as { type: string; delta?: { partial_json?: string } };
      assert.equal(data.type, match[1]);
      return data;
    });

  const names = events.map((e) => e.type).filter((name, i, all) => name !== all[i - 1]);
  assert.deepEqual(names, [
    'message_start',
    'content_block_start',
    'ping',
    'content_block_delta',
    'content_block_stop',
    'content_block_start',
    'content_block_delta',
    'content_block_stop',
    'message_delta',
    'message_stop',
  ]);
  const textDeltas = events.filter(
    (e) => e.type === 'content_block_delta' && e.delta?.partial_json === undefined,
  );
  assert.ok(textDeltas.length > 1, 'text arrives in several text_delta chunks');
  const jsonChunks = events.flatMap((e) =>
    e.delta?.partial_json === undefined ? [] : [e.delta.partial_json],
  );
  assert.ok(jsonChunks.filter((chunk) => chunk !== '').length >= 3, 'tool input arrives in several chunks');
  assert.deepEqual(JSON.parse(jsonChunks.join('')), awkwardInput);
  assert.equal(sim.requests[0]?.stream, true);
});

void test('cache_control breakpoints: written once, then read, and a moved breakpoint reads the old prefix', async (t) => {
  const answer = reply().text('ok');
  const { sim, client } = await start(t, scripted([answer, answer, answer]));
  const system = [
    {
      type: 'text' as const,
      text: 'A long system prompt. '.repeat(50),
      cache_control: { type: 'ephemeral' as const },
    },
  ];
  const first = { ...params, system, messages: [{ role: 'user' as const, content: 'Fix the bug.' }] };

  const written = (await client.messages.create(first)).usage;
  assert.equal(written.cache_read_input_tokens, 0);
  assert.ok((written.cache_creation_input_tokens ?? 0) > 250);

  const read = (await client.messages.create(first)).usage;
  assert.equal(read.cache_read_input_tokens, written.cache_creation_input_tokens);
  assert.equal(read.cache_creation_input_tokens, 0);
  assert.equal(read.input_tokens, written.input_tokens);

  const longer = {
    ...first,
    messages: [
      ...first.messages,
      { role: 'assistant' as const, content: 'ok' },
      {
        role: 'user' as const,
        content: [{ type: 'text' as const, text: 'Go on.', cache_control: { type: 'ephemeral' as const } }],
      },
    ],
  };
  const extended = (await client.messages.create(longer)).usage;
  assert.equal(extended.cache_read_input_tokens, written.cache_creation_input_tokens);
  assert.ok((extended.cache_creation_input_tokens ?? 0) > 0);
  const total = countTokens(JSON.stringify({ system, tools, messages: longer.messages }));
  assert.equal(
    extended.input_tokens +
      (extended.cache_creation_input_tokens ?? 0) +
      (extended.cache_read_input_tokens ?? 0),
    total,
  );
  assert.deepEqual(sim.requests[2]?.usage, extended);
});

const faults: {
  status: ApiErrorStatus;
  errorClass: new (...args: never[]) => APIError;
  type: string;
}[] = [
  { status: 400, errorClass: BadRequestError, type: 'invalid_request_error' },
  { status: 401, errorClass: AuthenticationError, type: 'authentication_error' },
  { status: 403, errorClass: PermissionDeniedError, type: 'permission_error' },
  { status: 429, errorClass: RateLimitError, type: 'rate_limit_error' },
  { status: 500, errorClass: InternalServerError, type: 'api_error' },
  { status: 503, errorClass: ServiceUnavailableError, type: 'api_error' },
  { status: 529, errorClass: OverloadedError, type: 'overloaded_error' },
];

void test('each injected fault surfaces as the SDK error class, then the policy answers', async (t) => {
  const { sim, client } = await start(t, scripted([reply().text('recovered')]));
  sim.injectFaults(
    ...faults.map(({ status }) =>
      status === 429 || status === 529 ? httpError(status, { retryAfterSeconds: 7 }) : httpError(status),
    ),
  );
  for (const { status, errorClass, type } of faults) {
    const error = await client.messages.create(params).then(
      () => assert.fail(`expected a ${status}`),
      (e: unknown) => e,
    );
    assert.ok(error instanceof errorClass, `${status} → ${errorClass.name}`);
    assert.equal(error.status, status);
    assert.equal(error.type, type);
    assert.match(error.requestID ?? '', /^req_/);
    assert.deepEqual(error.error, {
      type: 'error',
      error: { type, message: error.apiMessage },
      request_id: error.requestID,
    });
    assert.equal(error.headers?.get('retry-after') ?? null, status === 429 || status === 529 ? '7' : null);
    assert.equal(error.headers?.get('x-should-retry') ?? null, null);
  }
  const message = await client.messages.create(params);
  assert.deepEqual(message.content, [{ type: 'text', text: 'recovered', citations: null }]);
  assert.deepEqual(
    sim.requests.map((r) => r.status),
    [...faults.map((f) => f.status), 200],
  );
});

void test('the SDK retries 429 and 529 after retry-after, and the wire shows each attempt', async (t) => {
  const { sim } = await start(t, scripted([reply().text('third time lucky')]));
  const client = new Anthropic({ apiKey: API_KEY, baseURL: sim.url, maxRetries: 2 });
  sim.injectFaults(
    httpError(429, { retryAfterSeconds: 0.01, message: 'slow down' }),
    httpError(529, { retryAfterSeconds: 0.01 }),
  );
  const message = await client.messages.create(params);
  assert.equal(message.content[0]?.type === 'text' && message.content[0].text, 'third time lucky');
  assert.deepEqual(
    sim.requests.map((r) => [r.status, r.headers['x-stainless-retry-count']]),
    [
      [429, '0'],
      [529, '1'],
      [200, '2'],
    ],
  );
});

void test('a hung request is ended by the client AbortSignal', async (t) => {
  const { sim, client } = await start(t, scripted([reply().text('after the hang')]));
  sim.injectFaults(hang());
  const controller = new AbortController();
  const pending = client.messages.create(params, { signal: controller.signal });
  await sim.waitForRequests(1);
  assert.equal(sim.requests[0]?.outcome, 'hang');
  controller.abort();
  await assert.rejects(pending, APIUserAbortError);
  const message = await client.messages.create(params);
  assert.equal(message.stop_reason, 'end_turn');
});

void test('close() ends a hung streaming request, and a dropped connection is a connection error', async (t) => {
  const { sim, client } = await start(t, scripted([]));
  sim.injectFaults(dropConnection());
  await assert.rejects(client.messages.create(params), APIConnectionError);
  assert.equal(sim.requests[0]?.outcome, 'dropped');

  sim.injectFaults(hang());
  const pending = client.messages.stream(params).finalMessage();
  await sim.waitForRequests(2);
  await sim.close();
  await assert.rejects(pending, APIConnectionError);
});

void test('a wrong or missing key gets 401; x-api-key is accepted like Authorization: Bearer', async (t) => {
  const { sim } = await start(t, scripted([reply().text('hi')]));
  const wrong = new Anthropic({ apiKey: 'sk-wrong', baseURL: sim.url, maxRetries: 0 });
  await assert.rejects(wrong.messages.create(params), (e: unknown) => {
    assert.ok(e instanceof AuthenticationError);
    assert.equal(e.apiMessage, 'invalid x-api-key');
    return true;
  });
  const res = await post(sim, { ...params }, { 'x-api-key': API_KEY });
  assert.equal(res.status, 200);
  assert.equal(sim.requests[0]?.status, 401);
});

void test('invalid requests get the API 400 and are recorded; the policy is not asked', async (t) => {
  let asked = 0;
  const { sim, client } = await start(t, () => {
    asked++;
    return reply().text('unreachable');
  });
  const toolUse = { type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } };
  const result = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' });
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['missing model', { ...params, model: undefined }, /^model:/],
    ['zero max_tokens', { ...params, max_tokens: 0 }, /^max_tokens:/],
    ['no messages', { ...params, messages: [] }, /at least one message/],
    ['assistant first', { ...params, messages: [{ role: 'assistant', content: 'hi' }] }, /first message/],
    ['two users in a row', { ...params, messages: [params.messages[0], params.messages[0]] }, /alternate/],
    [
      'empty text',
      { ...params, messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] },
      /non-empty/,
    ],
    [
      'tool_use without result',
      {
        ...params,
        messages: [
          params.messages[0],
          { role: 'assistant', content: [toolUse] },
          { role: 'user', content: 'and?' },
        ],
      },
      /^messages\.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1/,
    ],
    [
      'unknown tool_use_id',
      {
        ...params,
        messages: [
          params.messages[0],
          { role: 'assistant', content: [toolUse] },
          { role: 'user', content: [result('toolu_1'), result('toolu_2')] },
        ],
      },
      /^messages\.2\.content: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2/,
    ],
    ['tool without schema', { ...params, tools: [{ name: 'bash' }] }, /^tools\.0\.input_schema/],
    ['system not text', { ...params, system: [{ type: 'image' }] }, /^system\.0/],
  ];
  for (const [name, body, message] of cases) {
    const res = await post(sim, body);
    assert.equal(res.status, 400, name);
    const error = (await res.json()) as {
      type: string;
      error: { type: string; message: string };
      request_id: string;
    };
    assert.equal(error.type, 'error');
    assert.equal(error.error.type, 'invalid_request_error', name);
    assert.match(error.error.message, message, name);
    assert.equal(error.request_id, res.headers.get('request-id'));
  }
  const noVersion = await post(sim, params, { 'anthropic-version': '' });
  assert.equal(noVersion.status, 400);

  const sdkError = await client.messages
    .create({ ...params, messages: [{ role: 'assistant', content: 'hi' }] })
    .catch((e: unknown) => e);
  assert.ok(sdkError instanceof BadRequestError);
  assert.equal(asked, 0);
  assert.equal(sim.requests.length, cases.length + 2);
  assert.ok(sim.requests.every((r) => r.status === 400 && r.outcome === 'error'));
});

void test('a valid tool_use → tool_result conversation passes validation', async (t) => {
  const { client } = await start(t, scripted([reply().text('done')]));
  const message = await client.messages.create({
    ...params,
    messages: [
      params.messages[0] ?? { role: 'user', content: '' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Look:' },
          { type: 'tool_use', id: 'toolu_a', name: 'bash', input: {} },
        ],
      },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'file.txt', is_error: false }],
      },
    ],
  });
  assert.equal(message.stop_reason, 'end_turn');
});

void test('a script that runs out answers a 500 saying so; a throwing policy answers a 500', async (t) => {
  const { sim, client } = await start(t, scripted([reply().text('only one')]));
  await client.messages.create(params);
  await assert.rejects(client.messages.create(params), (e: unknown) => {
    assert.ok(e instanceof InternalServerError);
    assert.match(e.apiMessage ?? '', /script ran out: request #2 but only 1 scripted step/);
    return true;
  });
  sim.setPolicy(() => {
    throw new Error('policy bug');
  });
  await assert.rejects(client.messages.create(params), /model simulator policy threw: policy bug/);
});

void test('scripted steps may be functions of the request; setPolicy restarts the request count', async (t) => {
  const { sim, client } = await start(
    t,
    scripted([(req) => reply().text(`you said ${String(req.messages.length)}`)]),
  );
  const first = await client.messages.create(params);
  assert.deepEqual(first.content, [{ type: 'text', text: 'you said 1', citations: null }]);
  sim.setPolicy(scripted([reply().text('fresh')]));
  const second = await client.messages.create(params);
  assert.deepEqual(second.content, [{ type: 'text', text: 'fresh', citations: null }]);
});

void test('GET /health answers 200, unknown routes a 404 API error, waitForRequests times out clearly', async (t) => {
  const { sim } = await start(t, scripted([]));
  assert.equal((await fetch(`${sim.url}/health`)).status, 200);
  const missing = await fetch(`${sim.url}/v1/complete`, { method: 'POST', body: '{}' });
  assert.equal(missing.status, 404);
  const body = (await missing.json()) as { error: { type: string } };
  assert.equal(body.error.type, 'not_found_error');
  assert.equal(sim.requests.length, 1);
  await assert.rejects(sim.waitForRequests(2, 20), /expected 2 requests within 20 ms, got 1/);
});

async function post(
  sim: ModelSimulator,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  const merged = Object.entries({
    'content-type': 'application/json',
    'anthropic-version': '2023-06-01',
    authorization: `Bearer ${API_KEY}`,
    ...headers,
  }).filter(([, value]) => value !== '');
  return fetch(`${sim.url}/v1/messages`, { method: 'POST', headers: merged, body: JSON.stringify(body) });
}
