import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REDACTED, Redactor } from '../../src/publish/redact.js';
import { base32 } from '../../src/secrets/forms.js';

const none = new Redactor([]);

// Tokens are assembled at run time so no scanner mistakes this file for a leak.
const tok = (prefix: string, body: string): string => `${prefix}${body}`;

test('GitHub tokens of every kind are redacted without being known', () => {
  const tokens = [
    tok('ghp_', 'aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5'),
    tok('gho_', '0123456789abcdefABCDEF0123456789abcd'),
    tok('ghu_', 'ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ'),
    tok('ghs_', 'installationTokenInstallationToken12'),
    tok('ghr_', 'refreshTokenRefreshTokenRefreshToken1'),
    tok('github_pat_', `11AAAAAAA0${'b'.repeat(12)}_${'C'.repeat(59)}`),
    tok('v1.', '0123456789abcdef0123456789abcdef01234567'),
  ];
  for (const t of tokens) {
    const out = none.redact(`token=${t} and "${t}", (${t})\n${t}`);
    assert.ok(!out.includes(t), t);
    assert.equal(out, `token=${REDACTED} and "${REDACTED}", (${REDACTED})\n${REDACTED}`);
  }
});

test('Anthropic keys, Authorization values, URL credentials and x-access-token are redacted', () => {
  const key = tok('sk-ant-', `api03-${'k'.repeat(93)}-AAAAAAAA`);
  assert.equal(none.redact(`ANTHROPIC_API_KEY=${key}`), `ANTHROPIC_API_KEY=${REDACTED}`);
  assert.equal(none.redact(`Authorization: Bearer abc.def.ghi`), `Authorization: Bearer ${REDACTED}`);
  assert.equal(none.redact(`authorization: token 0123456789`), `authorization: token ${REDACTED}`);
  assert.equal(none.redact(`-H 'Authorization:Basic dXNlcjpwYXNz'`), `-H 'Authorization:Basic ${REDACTED}'`);
  assert.equal(none.redact(`{"Authorization": "Bearer xyz"}`), `{"Authorization": "Bearer ${REDACTED}"}`);
  assert.equal(
    none.redact('Authorization: 0123456789abcdef0123456789'),
    `Authorization: ${REDACTED}`,
    'a bare credential-looking value',
  );
  assert.equal(
    none.redact('Authorization: required for this endpoint'),
    'Authorization: required for this endpoint',
  );
  assert.equal(
    none.redact('remote: https://x-access-token:opaque-value-1@github.com/o/r.git'),
    `remote: https://x-access-token:${REDACTED}@github.com/o/r.git`,
  );
  assert.equal(
    none.redact('x-access-token:opaque@github.com:o/r'),
    `x-access-token:${REDACTED}@github.com:o/r`,
  );
  assert.equal(none.redact('https://user:p4ss@host/x'), `https://user:${REDACTED}@host/x`);
  assert.equal(
    none.redact('mail me at a@b.com, see https://github.com/o/r'),
    'mail me at a@b.com, see https://github.com/o/r',
  );
});

test('private key blocks are redacted, also when their head or tail was cut away', () => {
  const body = [
    'MIIEowIBAAKCAQEAzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz',
    'YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=',
    '',
  ];
  const whole = [
    'before',
    '-----BEGIN OPENSSH PRIVATE KEY-----',
    ...body.slice(0, 2),
    '-----END OPENSSH PRIVATE KEY-----',
    'after',
  ].join('\n');
  assert.equal(none.redact(whole), `before\n${REDACTED}\nafter`);
  const noEnd = [
    'x',
    '-----BEGIN PRIVATE KEY-----',
    ...body.slice(0, 2),
    '[… 400 characters omitted …]',
    'tail',
  ].join('\n');
  assert.equal(none.redact(noEnd), `x\n${REDACTED}\n[… 400 characters omitted …]\ntail`);
  const noBegin = [
    '[… 400 characters omitted …]',
    ...body.slice(0, 2),
    '-----END EC PRIVATE KEY-----',
    'z',
  ].join('\n');
  assert.equal(none.redact(noBegin), `[… 400 characters omitted …]\n${REDACTED}\nz`);
  const encrypted = [
    '-----BEGIN ENCRYPTED PRIVATE KEY-----',
    'Proc-Type: 4,ENCRYPTED',
    '',
    body[0],
    '-----END ENCRYPTED PRIVATE KEY-----',
  ].join('\r\n');
  assert.equal(none.redact(encrypted), REDACTED);
  assert.equal(
    none.redact('-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----'),
    '-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----',
  );
});

test('a known secret is redacted raw, URL-encoded, JSON-escaped and base64-encoded at any offset', () => {
  const secret = 'p@ss/word+"quoted"=1';
  const r = new Redactor([secret]);
  assert.equal(r.redact(`a ${secret} b`), `a ${REDACTED} b`);
  assert.equal(r.redact(`u=${encodeURIComponent(secret)}&x`), `u=${REDACTED}&x`);
  assert.equal(r.redact(JSON.stringify({ k: secret })), `{"k":"${REDACTED}"}`);
  for (const prefix of ['', 'a', 'ab', 'x-access-token:']) {
    const b64 = Buffer.from(`${prefix}${secret}`).toString('base64');
    for (const form of [b64, b64.replace(/\+/g, '-').replace(/\//g, '_')]) {
      const out = r.redact(`Authorization-ish ${form}`);
      assert.ok(out.includes(REDACTED), `base64 with prefix "${prefix}": ${out}`);
      // What is left of the encoded form is at most a few characters either side.
      assert.ok(out.replace(REDACTED, '').length <= 'Authorization-ish '.length + 26, out);
    }
  }
});

test('short secrets are ignored, longer secrets win over shorter ones, other text is untouched', () => {
  const r = new Redactor(['abc', '', 'secret-one', 'secret-one-and-more']);
  assert.equal(r.redact('abc abc'), 'abc abc');
  assert.equal(r.redact('x secret-one-and-more y secret-one z'), `x ${REDACTED} y ${REDACTED} z`);
  const prose = 'The parser failed on `input[0]` — see src/parse.ts:3. Tokens: 1,234. ghp is a prefix.';
  assert.equal(r.redact(prose), prose);
});

test('redactDeep redacts strings and keys in nested values, keeps other values and cycles', () => {
  const secret = 'deep-secret-value';
  const r = new Redactor([secret]);
  type Node = { name: string; list: unknown[]; n: number; self?: Node; at: Date; [k: string]: unknown };
  const at = new Date(0);
  const value: Node = {
    name: `x ${secret}`,
    list: [secret, 1, null, { [secret]: true, t: tok('ghp_', 'a'.repeat(36)) }],
    n: 3,
    at,
  };
  value.self = value;
  const out = r.redactDeep(value);
  assert.notEqual(out, value);
  assert.equal(out.name, `x ${REDACTED}`);
  assert.deepEqual(out.list.slice(0, 3), [REDACTED, 1, null]);
  assert.deepEqual(out.list[3], { [REDACTED]: true, t: REDACTED });
  assert.equal(out.n, 3);
  assert.equal(out.at, at);
  assert.equal(out.self, out, 'a cycle maps to the copy');
  assert.equal(value.name, `x ${secret}`, 'the input is not changed');
  const proto = r.redactDeep(JSON.parse('{"__proto__": {"polluted": "deep-secret-value"}}') as object);
  assert.deepEqual(Object.keys(proto), ['__proto__']);
  assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  assert.equal(r.redactDeep('plain'), 'plain');
  assert.equal(r.redactDeep(42), 42);
});

test('redaction is linear on large inputs', () => {
  const big = `${'A'.repeat(64)}\n`.repeat(100_000) + 'ghp_'.repeat(10_000) + 'x'.repeat(1_000_000);
  const started = performance.now();
  new Redactor(['some-known-secret']).redact(`-----BEGIN PRIVATE KEY-----\n${big}`);
  new Redactor(['some-known-secret']).redact(`${big}-----END PRIVATE KEY-----`);
  assert.ok(performance.now() - started < 5000);
});

test('containsKnownSecret finds the known secrets in any encoding, and nothing else', () => {
  const token = 'ghs_knownKNOWNknown0123456789abcdefghij';
  const r = new Redactor([token, 'sk-ant-known-model-key-0123456789']);
  assert.equal(r.containsKnownSecret(`+const t = "${token}";`), true);
  assert.equal(r.containsKnownSecret(`+${Buffer.from(`x-access-token:${token}`).toString('base64')}`), true);
  assert.equal(r.containsKnownSecret('+key=sk-ant-known-model-key-0123456789'), true);
  // Token-shaped text that is not one of ours (a fixture in a test, say) is not a reason to refuse.
  assert.equal(r.containsKnownSecret('+const sample = "ghs_0000000000000000000000000000000000000";'), false);
  assert.equal(r.containsKnownSecret('+ordinary change'), false);
  assert.equal(new Redactor([]).containsKnownSecret(token), false);
});

test('a known secret that contains another is redacted whole, in any order given, joiners or not', () => {
  const inner = 'inner-secret-0123456789abcdef';
  const outer = `outer-prefix-${inner}-outer-suffix`;
  for (const secrets of [
    [inner, outer],
    [outer, inner],
  ]) {
    const r = new Redactor(secrets);
    assert.equal(r.redact(`a ${outer} b ${inner} c`), `a ${REDACTED} b ${REDACTED} c`);
    const joined = Array.from(outer).join('\u200D');
    assert.equal(r.redact(`[${joined}]`), `[${REDACTED}]`);
    // The same needles again (another redactor of the process): the same answers.
    assert.equal(new Redactor(secrets).containsKnownSecret(`x${inner}x`), true);
  }
});

test('two known secrets that overlap in the text go whole: no piece of either is left', () => {
  // One's end is the other's start: redacting one first used to leave the rest of the other.
  const a = 'first-secret-0123-shared-part';
  const b = 'shared-part-4567-second-secret';
  for (const secrets of [
    [a, b],
    [b, a],
  ]) {
    const r = new Redactor(secrets);
    assert.equal(r.redact(`x first-secret-0123-shared-part-4567-second-secret y`), `x ${REDACTED} y`);
  }
  // Occurrences of one secret that overlap each other ("abab" twice in "ababab").
  const periodic = 'k3y-k3y-k3y-k3y';
  assert.equal(new Redactor([periodic]).redact(`<${periodic}-k3y>`), `<${REDACTED}>`);
  // Secrets side by side become one mark; apart, two.
  assert.equal(new Redactor([a, b]).redact(`${a}${b}`), REDACTED);
  assert.equal(new Redactor([a, b]).redact(`${a} ${b}`), `${REDACTED} ${REDACTED}`);
});

test('a known secret reversed, in hex or in base32 (inside a longer encoded string too) is redacted', () => {
  const secret = 'npm_SetupSecret0123456789';
  const r = new Redactor([secret]);
  const reversed = Array.from(secret).reverse().join('');
  const hex = Buffer.from(secret).toString('hex');
  const revHex = Buffer.from(reversed).toString('hex').toUpperCase();
  const b32 = base32(Buffer.from(`x${secret}yz`));
  const revB32 = base32(Buffer.from(`ab${reversed}`)).toLowerCase();
  const revB64 = Buffer.from(`k=${reversed}`).toString('base64');
  for (const [name, copy] of Object.entries({ reversed, hex, revHex, b32, revB32, revB64 })) {
    const out = r.redact(`cat leak.txt\n${copy}\ndone`);
    assert.ok(out.includes(REDACTED), `${name}: ${out}`);
    // What is left of an encoded string is the few characters that mix in its neighbours' bytes.
    assert.ok(out.length <= `cat leak.txt\n\ndone`.length + REDACTED.length + 8, `${name}: ${out}`);
    assert.equal(r.containsKnownSecret(`+${copy}`), true, name);
    // Neutralised text (a joiner after each character) too.
    const joined = Array.from(copy).join('\u200D');
    assert.ok(r.redact(`<${joined}>`).includes(REDACTED), `${name} with joiners`);
  }
  assert.equal(r.redact('cat leak.txt\nnothing here\n'), 'cat leak.txt\nnothing here\n');
});

test('joiners around and inside a secret: the span redacted is the secret with its inner joiners, nothing else', () => {
  const secret = 'joined-secret-value';
  const r = new Redactor([secret]);
  const joined = `a\u200D\u200D${Array.from(secret).join('\u200D\u200D')}\u200Db`;
  assert.equal(r.redact(joined), `a\u200D\u200D${REDACTED}\u200Db`);
  assert.equal(r.redact(`\u200D${secret}`), `\u200D${REDACTED}`);
});
