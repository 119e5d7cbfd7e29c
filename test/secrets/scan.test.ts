import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { reverse } from '../../src/secrets/forms.js';
import {
  hideNeedles,
  scanHolders,
  scanNeedles,
  SCAN_FOUND,
  SECRET_SCAN_SCRIPT,
} from '../../src/secrets/scan.js';

const KEY = [
  '-----BEGIN TEST KEY-----',
  'MIIEowIBAAKCAQEAzzzz0123456789abcd',
  'tail',
  '-----END TEST KEY-----',
  '',
].join('\n');

test('the needles: every line of every form, long enough, none with a newline', () => {
  const needles = scanNeedles([KEY, 'npm_token_0123456789', 'abc']);
  for (const n of needles) {
    assert.ok(!n.includes('\n'), n);
    assert.ok(n.length >= 4, n);
  }
  // Each line of the key, as before forms, and reversed where that is long enough; the whole key encoded.
  for (const line of ['MIIEowIBAAKCAQEAzzzz0123456789abcd', '-----END TEST KEY-----']) {
    assert.ok(needles.includes(line), line);
    assert.ok(needles.includes(reverse(line)), `${line} reversed`);
  }
  assert.ok(needles.includes('tail') && !needles.includes('liat'), 'a short line: as is only');
  assert.ok(needles.includes(Buffer.from(KEY).toString('hex')));
  assert.ok(needles.includes('npm_token_0123456789') && needles.includes('9876543210_nekot_mpn'));
  assert.ok(!needles.includes('abc'), 'too short');
  assert.equal(new Set(needles).size, needles.length);
});

test('the scan script (on the host, `own`): a line of a multi-line secret, a reversed copy, a name, a link, an unreadable file; nothing in a clean folder', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ia-scan-'));
  t.after(() => {
    chmodSync(join(dir, 'locked'), 0o700);
    rmSync(dir, { recursive: true, force: true });
  });
  const secret = 'npm_scan_secret_0123456789';
  writeFileSync(join(dir, 'one-line-of-the-key'), 'x\nMIIEowIBAAKCAQEAzzzz0123456789abcd\ny');
  writeFileSync(join(dir, 'reversed'), reverse(secret));
  writeFileSync(join(dir, 'clean'), 'nothing to see');
  mkdirSync(join(dir, Buffer.from(secret).toString('hex')));
  writeFileSync(join(dir, Buffer.from(secret).toString('hex'), 'inner'), 'x');
  symlinkSync(`/nowhere/${secret}`, join(dir, 'link'));
  mkdirSync(join(dir, 'locked'));
  chmodSync(join(dir, 'locked'), 0);
  // No short line here: the script also reads every process's environment on this host.
  const needles = scanNeedles([KEY.replace('tail\n', ''), secret]);
  const run = (...folders: string[]) =>
    spawnSync('bash', ['-c', SECRET_SCAN_SCRIPT, 'ia-scan', 'own', ...folders], {
      input: `${needles.join('\n')}\n`,
    });
  const r = run(dir, join(dir, 'missing'));
  assert.equal(r.status, SCAN_FOUND, r.stderr.toString());
  const holders = scanHolders(r.stdout.toString(), needles).sort();
  assert.deepEqual(holders, [
    `${dir}/[a setup secret] (its name)`,
    `${dir}/link -> /nowhere/[a setup secret] (a link)`,
    `${dir}/locked (not readable by the sandbox user)`,
    `${dir}/one-line-of-the-key`,
    `${dir}/reversed`,
  ]);
  const clean = mkdtempSync(join(dir, 'clean-'));
  writeFileSync(join(clean, 'file'), 'nothing');
  const none = run(clean);
  assert.equal(none.status, 0, none.stderr.toString());
  assert.equal(none.stdout.toString(), '');
});

test('the places named: values hidden, a folder named by a value stands for what it holds, a cut in the output loses only the records beside it', () => {
  const secret = 'npm_named_secret_0123';
  const needles = scanNeedles([secret]);
  const output = [
    `N/tmp/${secret}`,
    `N/tmp/${secret}/inner`,
    `C/tmp/${secret}/inner`,
    `C/work/a`,
    `L/work/l -> /x/${reverse(secret)}y`,
    'E42',
    '',
  ].join('\0');
  assert.deepEqual(scanHolders(output, needles), [
    '/tmp/[a setup secret] (its name)',
    '/work/a',
    '/work/l -> /x/[a setup secret]y (a link)',
    'environ:42',
  ]);
  // The kept head ends inside a record (a piece of the value), the tail starts inside one.
  const cut = `C/work/a\0N/tmp/${secret.slice(0, 6)}\n[… 999 bytes of output omitted …]\n${secret.slice(6)}\0C/work/b\0`;
  assert.deepEqual(scanHolders(cut, needles), ['/work/a', '…', '/work/b']);
  assert.equal(
    hideNeedles(`a ${secret} b ${reverse(secret)}`, needles),
    'a [a setup secret] b [a setup secret]',
  );
});
