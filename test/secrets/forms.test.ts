import assert from 'node:assert/strict';
import { test } from 'node:test';
import { base32, MIN_FORM_LENGTH, reverse, secretForms } from '../../src/secrets/forms.js';

const SECRETS = [
  'npm_AbCdEf0123456789xyz',
  'p@ss/word+"quoted"=1\\?',
  'pässwörd-ünïcode-✓-🔑-key',
  'line-one-of-a-key\nline-two-of-a-key\n',
];

/** Bytes around the secret: every length from 0 to 14 covers each base64 (3) and base32 (5) alignment. */
const AROUND = Array.from({ length: 15 }, (_, n) => Buffer.from('xyzw!~\u00e9ab'.repeat(2)).subarray(0, n));

const ENCODINGS: Record<string, (b: Buffer) => string> = {
  hex: (b) => b.toString('hex'),
  HEX: (b) => b.toString('hex').toUpperCase(),
  base64: (b) => b.toString('base64'),
  'base64 without padding': (b) => b.toString('base64').replace(/=+$/, ''),
  base64url: (b) => b.toString('base64url'),
  BASE32: (b) => base32(b),
  base32: (b) => base32(b).toLowerCase(),
};

function found(forms: readonly string[], blob: string): string | undefined {
  return forms.find((f) => blob.includes(f));
}

test('base32 is RFC 4648 (the test vectors, without padding)', () => {
  const vectors: Record<string, string> = {
    '': '',
    f: 'MY',
    fo: 'MZXQ',
    foo: 'MZXW6',
    foob: 'MZXW6YQ',
    fooba: 'MZXW6YTB',
    foobar: 'MZXW6YTBOI',
  };
  for (const [input, output] of Object.entries(vectors)) assert.equal(base32(Buffer.from(input)), output);
});

test('each encoding of the value and of its reverse, inside a longer blob at every alignment, holds one of the forms', () => {
  for (const secret of SECRETS) {
    const forms = secretForms(secret);
    for (const [which, s] of [
      ['value', secret],
      ['reverse', reverse(secret)],
    ] as const) {
      const bytes = Buffer.from(s, 'utf8');
      for (const [name, encode] of Object.entries(ENCODINGS)) {
        for (const before of AROUND) {
          for (const after of AROUND.slice(0, 6)) {
            const blob = encode(Buffer.concat([before, bytes, after]));
            assert.ok(
              found(forms, blob) !== undefined,
              `${name} of the ${which} of ${JSON.stringify(secret)} with ${before.length} byte(s) before and ${after.length} after: ${blob}`,
            );
          }
        }
      }
      // As is, in text.
      assert.ok(found(forms, `xx${s}yy`) !== undefined, `the ${which} as is`);
    }
    assert.ok(found(forms, `u=${encodeURIComponent(secret)}&v=1`) !== undefined, 'URL-encoded');
    assert.ok(found(forms, JSON.stringify({ token: secret })) !== undefined, 'JSON-escaped');
  }
});

test('an encoding holds the form of its own alignment, not another: each form is needed', () => {
  // Over every prefix length, base64(prefix + secret) holds 3 different forms (one per length mod 3)
  // and base32 5 (mod 5): dropping any of them would miss the copies at that alignment.
  const secret = 'npm_AbCdEf0123456789xyz';
  const forms = secretForms(secret);
  const expected: Record<string, number> = { base64: 3, base64url: 3, BASE32: 5, base32: 5 };
  for (const [name, count] of Object.entries(expected)) {
    const encode = ENCODINGS[name];
    assert.ok(encode !== undefined);
    const hits = new Set(
      AROUND.map((before) => found(forms, encode(Buffer.concat([before, Buffer.from(secret)])))),
    );
    assert.equal(hits.size, count, name);
    assert.ok(!hits.has(undefined), name);
  }
});

test('forms shorter than the minimum are dropped, the rest kept once', () => {
  assert.equal(MIN_FORM_LENGTH, 8);
  // "abc": its hex is 6 characters, its base32 5: nothing is long enough.
  assert.deepEqual(secretForms('abc'), []);
  const forms = secretForms('abcd', 4);
  assert.ok(forms.includes('abcd') && forms.includes('dcba') && forms.includes('61626364'));
  for (const f of secretForms('abcdefgh')) assert.ok(f.length >= MIN_FORM_LENGTH, f);
  // A palindrome's reverse is itself; the URL-encoded and JSON forms of plain text are the value.
  const palindrome = secretForms('abcdeffedcba');
  assert.equal(new Set(palindrome).size, palindrome.length);
  assert.equal(palindrome.filter((f) => f === 'abcdeffedcba').length, 1);
  // A lone surrogate has no URL-encoded form; the rest are still there.
  assert.ok(secretForms('secret-\ud800-value').includes('secret-\ud800-value'));
});
