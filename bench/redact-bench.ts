/**
 * `npm run bench -- --redact`: the redactor over text it sees on every step (command output), with
 * no secret in it (the usual case) and dense with secrets (40,000 occurrences), and over text the
 * neutralisers have been through (a zero-width joiner after `@` and `#`: what is redacted again
 * before posting). Medians of 5.
 */
import { performance } from 'node:perf_hooks';
import { Redactor } from '../src/publish/redact.js';

export function redactBench(): void {
  const secrets = [`ghs_${'a'.repeat(36)}`, `sk-ant-${'b'.repeat(40)}`, 'x-access-token-secret-value-123'];
  const line = 'PASS src/some/test/file.test.js (12 ms) lorem ipsum dolor sit amet\n';
  const texts = {
    'clean output, 10 MB': line.repeat(150_000),
    '40,000 secrets in 2.5 MB': `${line}${secrets[0]} ${secrets[1]}\n`.repeat(20_000),
    'neutralised text (30,000 joiners), 1.2 MB': `@\u200Duser see #\u200D12 ${line}`.repeat(15_000),
  };
  const r = new Redactor(secrets);
  console.log('| text | redact (median of 5) |\n| --- | --- |');
  for (const [name, text] of Object.entries(texts)) {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      r.redact(text);
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    console.log(`| ${name} | ${(times[2] ?? NaN).toFixed(1)} ms |`);
  }
}
