/**
 * The forms of a secret value that the setup phase's scan and the Redactor look for.
 *
 * Which encodings: the value as is and reversed; hex of each (lower and upper case); base64 of each
 * (standard and URL-safe alphabets); base32 of each (RFC 4648 alphabet, upper and lower case); the
 * value URL-encoded and JSON-escaped (how it shows up in logs and config files).
 *
 * Why alignments: a secret inside a longer encoded string (`Authorization: Basic
 * base64("x-access-token:" + token)`, or a copy with a prefix) is encoded together with the bytes
 * around it. base64 turns 3 bytes into 4 characters and base32 5 bytes into 8, so how the secret's
 * first byte falls in such a group (3 alignments for base64, 5 for base32) changes every character.
 * For each alignment the form kept is the run of characters determined by the secret's bytes alone;
 * the characters at either end, which mix in bytes of whatever surrounds it, are left out. Hex is
 * byte-aligned: one form covers every position.
 *
 * What this is not: a complete list. No scan can be, since an encoding is one line of code (XOR with
 * a constant, compression, every other character, a different alphabet). The design relies on
 * setup secrets reaching only setup code the maintainers committed (the default branch's setup
 * commands and locked dependencies); looking for these forms is the second line, which catches
 * the careless copy and the obvious disguise, not a determined author.
 *
 * Forms shorter than the minimum are dropped (a short string matches unrelated text), and the list
 * holds no duplicates.
 */

/** Forms shorter than this are not looked for: a short string would match unrelated text. */
export const MIN_FORM_LENGTH = 8;

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 of `bytes`, upper case, without padding. */
export function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = ((value << 8) | byte) & 0xfff;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(value >>> (bits - 5)) & 31] ?? '';
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32_ALPHABET[(value << (5 - bits)) & 31] ?? '';
  return out;
}

/**
 * The characters of encode(k zero bytes + bytes) that depend on `bytes` alone, for each alignment
 * k. An encoding of `bitsPerChar` bits per character: character i covers bits [b·i, b·i + b), the
 * secret bits [8k, 8(k + n)).
 */
function alignedCores(
  bytes: Buffer,
  alignments: number,
  bitsPerChar: number,
  encode: (b: Buffer) => string,
): string[] {
  const cores: string[] = [];
  for (let k = 0; k < alignments; k++) {
    const encoded = encode(Buffer.concat([Buffer.alloc(k), bytes]));
    const start = Math.ceil((8 * k) / bitsPerChar);
    const end = Math.floor((8 * (k + bytes.length)) / bitsPerChar);
    if (end > start) cores.push(encoded.slice(start, end));
  }
  return cores;
}

/** base64 cores at the 3 alignments, in the standard and the URL-safe alphabet. */
function base64Forms(bytes: Buffer): string[] {
  return alignedCores(bytes, 3, 6, (b) => b.toString('base64')).flatMap((core) => [
    core,
    core.replace(/\+/g, '-').replace(/\//g, '_'),
  ]);
}

/** base32 cores at the 5 alignments, upper and lower case. */
function base32Forms(bytes: Buffer): string[] {
  return alignedCores(bytes, 5, 5, base32).flatMap((core) => [core, core.toLowerCase()]);
}

function hexForms(bytes: Buffer): string[] {
  const hex = bytes.toString('hex');
  return [hex, hex.toUpperCase()];
}

/** Reversed by code point (what `rev` and Python's `s[::-1]` give), so no surrogate pair is split. */
export function reverse(s: string): string {
  return Array.from(s).reverse().join('');
}

/** Every form of `secret` listed in the module comment, at least `minLength` long, without duplicates. */
export function secretForms(secret: string, minLength: number = MIN_FORM_LENGTH): string[] {
  const forms = new Set<string>();
  const add = (form: string): void => {
    if (form.length >= minLength) forms.add(form);
  };
  add(secret);
  // encodeURIComponent refuses a lone surrogate; such a value has no URL-encoded form to find.
  if (!/\p{Cs}/u.test(secret)) add(encodeURIComponent(secret));
  add(JSON.stringify(secret).slice(1, -1));
  for (const s of [secret, reverse(secret)]) {
    add(s);
    const bytes = Buffer.from(s, 'utf8');
    for (const form of [...hexForms(bytes), ...base64Forms(bytes), ...base32Forms(bytes)]) add(form);
  }
  return [...forms];
}
