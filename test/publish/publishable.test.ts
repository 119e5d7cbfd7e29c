import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { neutralizeProse, ZWJ } from '../../src/publish/markdown.js';
import { githubHosts, hostsIn, publishable } from '../../src/publish/publishable.js';
import { REDACTED, Redactor } from '../../src/publish/redact.js';
import { activeMarkdown } from '../support/inert-markdown.js';

// Assembled at run time so no scanner mistakes this file for a leak.
const CANARY = ['canary', 'secret', '0123456789'].join('-');
const GHP = ['ghp', 'aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5'].join('_');
const audience = {
  redactor: new Redactor([CANARY]),
  trustedHosts: ['github.com', 'runs.example:8443'],
};
const post = (text: string): string => publishable(text, audience);

const EVIL = [
  'Done. @someone please merge, cc @acme/security-team.',
  '<img src=x onerror=alert(1)> <details open><summary>x</summary>',
  '[click](http://evil.example/login) ![pixel](https://evil.example/p.png)',
  '<https://evil.example/auto> https://evil.example/bare www.evil.example ftp://evil.example/f',
  '&#64;someone &#x40;other &commat;third &#104;ttps://evil.example',
  `key ${CANARY} and ${GHP}`,
  '[ref]: https://evil.example/ref',
].join('\n\n');

describe('publishable', () => {
  it('leaves no mention, raw HTML, foreign link, image, autolink, character reference or secret', () => {
    assert.ok(activeMarkdown(EVIL, [CANARY, GHP]).length >= 15, 'the check sees what is active');
    const out = post(EVIL);
    assert.deepEqual(activeMarkdown(out, [CANARY, GHP]), []);
    assert.ok(out.includes(REDACTED));
    // The words are still there to read.
    assert.equal(
      out.replace(new RegExp(ZWJ, 'g'), '').replace(/&amp;/g, '&'),
      EVIL.replace(CANARY, REDACTED).replace(GHP, REDACTED),
    );
  });

  it('judges a destination as a browser would', () => {
    for (const link of [
      '[x](//evil.example/a)',
      '[x](javascript:alert(1))',
      '[x](https://github.com@evil.example/)',
      '[x](http:\\\\evil.example)',
      '[x](<https://evil.example/a b>)',
      '[x](https:&#47;&#47;evil.example)',
      '[x](ht&Tab;tps://evil.example)',
      '[x](mailto:a@b.example)',
      '[x]: https://evil.example',
    ]) {
      const out = post(link);
      assert.ok(out.startsWith(`[x]${ZWJ}`), `${link} → ${out}`);
    }
  });

  it("keeps links to GitHub, the run pages and relative ones, and the App's layout and markers", () => {
    const text = [
      '<!-- issue-agent:progress job=r1-i2-d3 -->',
      '**Issue Agent**',
      '[#9](https://github.com/octo/repo/pull/9) · https://github.com/octo/repo · [details](https://runs.example:8443/runs/1)',
      '[the file](src/a.ts) [anchor](#outcome) ![shot](/octo/repo/raw/main/s.png)',
      '<details>\n<summary>Trajectory</summary>\n\nstep\n\n</details>',
      '<sub>job `r1-i2-d3`</sub>',
      'Fixes #12',
      '<!-- issue-agent:rounds r1-i2-d3,r1-i2-d4 -->',
      '',
    ].join('\n');
    assert.equal(post(text), text);
  });

  it('neutralises a marker anywhere but the first and last line, and layout tags with attributes', () => {
    const out = post('first\n<!-- issue-agent:rounds r9-i9-x -->\n<details open>\n<sub title="x">\nlast');
    assert.ok(!out.includes('<!--'));
    assert.ok(out.includes(`<${ZWJ}details open>`));
    assert.ok(out.includes(`<${ZWJ}sub title`));
  });

  it('leaves code as it is', () => {
    const text = [
      'Run `curl http://evil.example/@x <b>` then:',
      '',
      '```sh',
      '<img src=x> @someone [a](http://evil.example) &#64;',
      '```',
      '',
      '> ```js',
      '> const at = "@user <b>";',
      '> ```',
    ].join('\n');
    assert.equal(post(text), text);
  });

  it('is idempotent, also over what the renderers already neutralised', () => {
    for (const text of [EVIL, neutralizeProse(EVIL), `${post(EVIL)}\n\n${neutralizeProse(EVIL)}`]) {
      const once = post(text);
      assert.equal(post(once), once);
    }
  });

  it('redacts a secret that neutralising split with joiners', () => {
    const secret = 'pa@ss<word>#1234-http://x';
    const redactor = new Redactor([secret]);
    const split = neutralizeProse(`the key is ${secret}.`);
    assert.ok(!split.includes(secret), 'the neutraliser did split it');
    assert.equal(redactor.redact(split).includes('word'), false);
    assert.ok(redactor.containsKnownSecret(split));
    const out = publishable(`the key is ${secret}.`, { redactor, trustedHosts: [] });
    assert.equal(out, `the key is ${REDACTED}.`);
  });

  it('knows GitHub hosts from the API URL, and the hosts of URLs in a text', () => {
    assert.deepEqual(githubHosts('https://api.github.com'), ['github.com', 'api.github.com']);
    assert.deepEqual(githubHosts('https://ghe.example/api/v3'), ['ghe.example']);
    assert.deepEqual(githubHosts('http://127.0.0.1:3000'), ['127.0.0.1:3000']);
    assert.deepEqual(githubHosts('not a url'), []);
    assert.deepEqual(hostsIn('see https://Runs.example/x (or http://a.example:81).'), [
      'runs.example',
      'a.example:81',
    ]);
    assert.deepEqual(hostsIn(null), []);
  });
});
