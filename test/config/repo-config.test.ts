import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parseRepoConfig, RepoConfigError } from '../../src/config/repo-config.js';

const defaults = { label: 'agent', handle: '@agent' };

/** The RepoConfigError that parsing `raw` throws (fails the test if it parses). */
function problems(raw: unknown): readonly string[] {
  try {
    parseRepoConfig(raw, defaults);
  } catch (error) {
    assert.ok(error instanceof RepoConfigError, String(error));
    return error.problems;
  }
  assert.fail(`${JSON.stringify(raw)} parsed`);
}

test('the default policy blocks .github/** and gitlinks', () => {
  const { policy } = parseRepoConfig(null, defaults);
  assert.equal(policy.allowWorkflowChanges, false);
  assert.equal(policy.allowGithubChanges, false);
  assert.equal(policy.allowGitlinks, false);
  assert.ok(Object.isFrozen(policy));
});

test('both can be allowed by a repository', () => {
  const { policy } = parseRepoConfig(
    { policy: { allowGithubChanges: true, allowGitlinks: true, blockedPaths: ['*.pem'] } },
    defaults,
  );
  assert.equal(policy.allowGithubChanges, true);
  assert.equal(policy.allowGitlinks, true);
  assert.deepEqual(policy.blockedPaths, ['*.pem']);
});

test('a misspelt key under policy: is an error that names the key and where it is', () => {
  const found = problems({ policy: { allowGitlink: true, blockedPath: ['secrets/'] } });
  assert.equal(found.length, 1, found.join('\n'));
  assert.match(found[0] ?? '', /^policy: /);
  assert.match(found[0] ?? '', /"allowGitlink"/);
  assert.match(found[0] ?? '', /"blockedPath"/);
  assert.throws(
    () => parseRepoConfig({ policy: { maxChangedLine: 10 } }, defaults),
    /policy: .*maxChangedLine/,
  );
});

test('unknown keys are errors at every level of the file', () => {
  assert.match(problems({ lable: 'x' })[0] ?? '', /lable/);
  assert.match(problems({ budgets: { maxStep: 3 } })[0] ?? '', /^budgets: .*maxStep/);
});

test('the environment keys default so that every existing file stays valid', () => {
  const config = parseRepoConfig({ label: 'fix-me', budgets: { maxSteps: 10 } }, defaults);
  assert.equal(config.setup, undefined, 'no setup: key means "detect"');
  assert.deepEqual(config.env, {});
  assert.deepEqual(config.setupSecrets, []);
  assert.deepEqual(config.runtime, {});
  assert.equal(config.image, undefined);
  assert.deepEqual(config.network, {});
  assert.equal(config.cache, true);
  assert.ok(Object.isFrozen(config.env));
});

test('a full environment section parses', () => {
  const config = parseRepoConfig(
    {
      setup: ['npm ci', 'npm run build'],
      env: { NODE_ENV: 'test', PATH: '/workspace/bin:/usr/bin:/bin', GIT_AUTHOR_NAME: 'CI', lower_case: '' },
      setupSecrets: ['NPM_TOKEN'],
      runtime: { node: 22, python: '3.12' },
      image: 'ghcr.io/example/issue-agent-go:1.23',
      network: { setup: ['proxy.golang.org', '*.example.org', '203.0.113.7', '[2001:db8::1]'], agent: [] },
      cache: false,
    },
    defaults,
  );
  assert.deepEqual(config.setup, ['npm ci', 'npm run build']);
  assert.equal(config.env['NODE_ENV'], 'test');
  assert.deepEqual(config.setupSecrets, ['NPM_TOKEN']);
  assert.deepEqual(config.runtime, { node: 22, python: '3.12' });
  assert.equal(config.cache, false);
  assert.equal(config.network.setup?.length, 4);
  assert.deepEqual(parseRepoConfig({ setup: [] }, defaults).setup, [], 'setup: [] turns setup off');
  assert.deepEqual(parseRepoConfig({ runtime: { node: '20.18.1' } }, defaults).runtime, { node: '20.18.1' });
});

test('a setup command YAML read as a mapping (it holds ": ") is named, with how to write it', () => {
  // `- echo "codegen: missing" >&2` parses as { 'echo "codegen': 'missing" >&2' }.
  const [problem] = problems({ setup: ['npm ci', { 'echo "codegen': 'missing" >&2' }] });
  assert.match(
    problem ?? '',
    /^setup\.1: a setup command must be a string; YAML read this one as a mapping .*quote the whole command/,
  );
  assert.match(problems({ setup: [7] })[0] ?? '', /^setup\.0: a setup command must be a string$/);
});

test('variables that steer the shell, the loader, the proxy or the harness are refused', () => {
  for (const name of [
    'HOME',
    'USER',
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'LD_AUDIT',
    'BASH_ENV',
    'ENV',
    'PROMPT_COMMAND',
    'SHELLOPTS',
    'BASHOPTS',
    'IFS',
    'HTTPS_PROXY',
    'https_proxy',
    'Http_Proxy',
    'NO_PROXY',
    'all_proxy',
    'npm_config_proxy',
    'PIP_PROXY',
    'yarn_https_proxy',
    'ISSUE_AGENT_MODEL',
    'GIT_DIR',
    'GIT_CONFIG_PARAMETERS',
    // The harness's shells: their own variables, the cwd they report, read's timeout, POSIX mode.
    '__ia_n',
    '__IA_CMD',
    'PWD',
    'OLDPWD',
    'TMOUT',
    'POSIXLY_CORRECT',
  ]) {
    const found = problems({ env: { [name]: 'x' } });
    assert.equal(found.length, 1, `${name}: ${found.join('; ')}`);
    assert.match(found[0] ?? '', new RegExp(`^env: .*${name}`), name);
    assert.match(problems({ setupSecrets: [name] })[0] ?? '', /^setupSecrets\.0: /, name);
  }
  for (const name of ['1ABC', 'A-B', 'A B', '', 'X=Y']) {
    assert.match(problems({ env: { [name]: 'x' } })[0] ?? '', /is not a variable name/, JSON.stringify(name));
  }
});

test('env values are strings; every problem of the section is listed at once', () => {
  const found = problems({ env: { PORT: 8080, HOME: '/tmp' } });
  assert.equal(found.length, 2, found.join('\n'));
  assert.ok(found.some((p) => /^env\.PORT: .*quote numbers/.test(p)));
  assert.ok(found.some((p) => /^env: HOME is set by the harness/.test(p)));
});

test('setupSecrets: no repeats, and not also a plain variable', () => {
  assert.match(problems({ setupSecrets: ['TOKEN', 'TOKEN'] })[0] ?? '', /named twice/);
  assert.match(
    problems({ setupSecrets: ['TOKEN'], env: { TOKEN: 'x' } })[0] ?? '',
    /^setupSecrets: TOKEN is both a secret and a plain variable/,
  );
});

test('setup commands are non-empty strings', () => {
  assert.match(problems({ setup: ['  '] })[0] ?? '', /^setup\.0: .*empty/);
  assert.match(problems({ setup: 'npm ci' })[0] ?? '', /^setup: /);
});

test('runtime: versions, with YAML numbers that lose digits refused', () => {
  assert.match(problems({ runtime: { python: 3.1 } })[0] ?? '', /^runtime\.python: quote the Python version/);
  assert.match(problems({ runtime: { python: '3.12; id' } })[0] ?? '', /^runtime\.python: /);
  assert.match(problems({ runtime: { node: 20.5 } })[0] ?? '', /^runtime\.node: /);
  assert.match(problems({ runtime: { node: 'lts && id' } })[0] ?? '', /^runtime\.node: /);
  assert.match(problems({ runtime: { ruby: '3.3' } })[0] ?? '', /^runtime: .*ruby/);
});

test('image: a Docker reference, nothing else', () => {
  for (const ok of [
    'node:22',
    'issue-agent/base',
    'ghcr.io/org/team/img:v1.2.3',
    'localhost:5000/img',
    `registry.example.org/img@sha256:${'a'.repeat(64)}`,
  ]) {
    assert.equal(parseRepoConfig({ image: ok }, defaults).image, ok);
  }
  for (const bad of ['', 'Img', '--privileged', 'img:tag:more', 'img; id', 'a b', 'img@sha256:xyz']) {
    assert.match(problems({ image: bad })[0] ?? '', /^image: /, bad);
  }
});

test('network: host names, *.domain.tld wildcards or IP literals; unknown phases refused', () => {
  for (const bad of ['*.org', '*', 'http://example.org', 'example.org:443', 'a b', ' example.org', '1.2.3']) {
    assert.match(problems({ network: { setup: [bad] } })[0] ?? '', /^network\.setup\.0: /, bad);
  }
  assert.match(problems({ network: { agent: ['exa mple.org'] } })[0] ?? '', /^network\.agent\.0: /);
  assert.match(problems({ network: { test: [] } })[0] ?? '', /^network: .*test/);
  assert.match(problems({ cache: 'yes' })[0] ?? '', /^cache: /);
});

test('mcp: and history: as a repository writes them; bad ones are refused with the path named', () => {
  const raw = parseYaml(
    [
      'history: full',
      'mcp:',
      '  mcpServers:',
      '    docs:',
      '      command: node',
      '      args: [tools/docs.js]',
      '      env: { DOCS_DIR: docs }',
      '      tools: [search_docs]',
      '    hosted:',
      '      url: https://mcp.example.org/sse',
    ].join('\n'),
  ) as unknown;
  const c = parseRepoConfig(raw, defaults);
  assert.equal(c.history, 'full');
  assert.deepEqual(c.mcp?.mcpServers.docs, {
    command: 'node',
    args: ['tools/docs.js'],
    env: { DOCS_DIR: 'docs' },
    tools: ['search_docs'],
  });
  assert.throws(
    () => parseRepoConfig({ mcp: { mcpServers: { 'bad name!': { command: 'x' } } } }, defaults),
    /mcp\.mcpServers/,
  );
  assert.throws(
    () => parseRepoConfig({ mcp: { mcpServers: { a: { command: 'x', shell: true } } } }, defaults),
    /mcp/,
  );
  assert.throws(() => parseRepoConfig({ history: 0 }, defaults), /history/);
});
