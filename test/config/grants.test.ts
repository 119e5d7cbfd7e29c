import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, readAgentEnv } from '../../src/config/agent-env.js';
import {
  withoutSetupSecrets,
  grantedTo,
  hostCovers,
  repoMatches,
  ungranted,
  type RepositoryGrants,
} from '../../src/config/grants.js';
import { parseRepoConfig } from '../../src/config/repo-config.js';

const DEFAULTS = { label: 'agent', handle: '@agent' };

/** A deployment serving two teams: acme's registry token and host, and beta's. */
const DEPLOYMENT = {
  PATH: '/usr/bin',
  ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN: 'acme-npm-token-0123456789',
  ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN_REPOS: 'acme/*',
  ISSUE_AGENT_SETUP_SECRET_BETA_TOKEN: 'beta-token-0123456789',
  ISSUE_AGENT_SETUP_SECRET_BETA_TOKEN_REPOS: 'beta/web, beta/api',
  ISSUE_AGENT_EGRESS_REPO_HOSTS: 'npm.acme.example=acme/* *.beta.example=beta/web;pypi.shared.example=*',
};

function grantsOf(env: NodeJS.ProcessEnv): RepositoryGrants {
  const grants = readAgentEnv(env, { scoped: true }).environment.grants;
  assert.ok(grants !== null);
  return grants;
}

describe('grants: which repository may use which setup secret and egress host', () => {
  test('read from the deployment when scoped; a _REPOS variable is a grant, never a secret', () => {
    const settings = readAgentEnv(DEPLOYMENT, { scoped: true }).environment;
    assert.deepEqual(Object.keys(settings.setupSecrets).sort(), ['BETA_TOKEN', 'NPM_TOKEN']);
    assert.deepEqual(settings.grants?.secrets, {
      NPM_TOKEN: ['acme/*'],
      BETA_TOKEN: ['beta/web', 'beta/api'],
    });
    assert.deepEqual(settings.grants.hosts, [
      { host: 'npm.acme.example', repos: ['acme/*'] },
      { host: '*.beta.example', repos: ['beta/web'] },
      { host: 'pypi.shared.example', repos: ['*'] },
    ]);
    // The Action and the CLI: one repository, everything passed is its own; grants are not read.
    const open = readAgentEnv(DEPLOYMENT).environment;
    assert.equal(open.grants, null);
    assert.deepEqual(Object.keys(open.setupSecrets).sort(), ['BETA_TOKEN', 'NPM_TOKEN']);
  });

  test('a bad grant stops the worker at start, naming the variable', () => {
    const bad: [Record<string, string>, RegExp][] = [
      [
        { ISSUE_AGENT_SETUP_SECRET_X_REPOS: 'acme/*' },
        /ISSUE_AGENT_SETUP_SECRET_X_REPOS grants ISSUE_AGENT_SETUP_SECRET_X, which is not set/,
      ],
      [
        { ISSUE_AGENT_SETUP_SECRET_X: 'v', ISSUE_AGENT_SETUP_SECRET_X_REPOS: 'acme' },
        /"acme" is not owner\/name, owner\/\* or \*/,
      ],
      [
        { ISSUE_AGENT_SETUP_SECRET_X: 'v', ISSUE_AGENT_SETUP_SECRET_X_REPOS: 'acme/*;rm -rf' },
        /is not owner\/name/,
      ],
      [{ ISSUE_AGENT_EGRESS_REPO_HOSTS: 'npm.acme.example' }, /is not host=owner\/repo/],
      [
        { ISSUE_AGENT_EGRESS_REPO_HOSTS: '*.com=acme/*' },
        /ISSUE_AGENT_EGRESS_REPO_HOSTS: "\*\.com" is not a wildcard/,
      ],
      [{ ISSUE_AGENT_EGRESS_REPO_HOSTS: 'npm.acme.example=' }, /names no repository/],
    ];
    for (const [env, message] of bad) {
      assert.throws(
        () => readAgentEnv({ PATH: '/usr/bin', ...env }, { scoped: true }),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError);
          assert.match(e.message, message);
          return true;
        },
      );
    }
  });

  test("a repository naming another team's secret or host is refused; its own are not", () => {
    const grants = grantsOf(DEPLOYMENT);
    const config = parseRepoConfig(
      { setupSecrets: ['NPM_TOKEN'], network: { setup: ['npm.acme.example', 'pypi.shared.example'] } },
      DEFAULTS,
    );
    assert.deepEqual(ungranted(config, grants, 'acme/web'), []);
    assert.deepEqual(ungranted(config, grants, 'ACME/Web'), [], 'names compare without case');
    assert.deepEqual(ungranted(config, grants, 'beta/web'), [
      'setup secret NPM_TOKEN is not granted to beta/web (the deployment grants it with ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN_REPOS)',
      'network.setup host npm.acme.example is not granted to beta/web (the deployment grants hosts with ISSUE_AGENT_EGRESS_REPO_HOSTS)',
    ]);
    // beta/api has BETA_TOKEN but not beta.example's hosts; a secret the deployment does not hold
    // reads the same as one it holds for others.
    const beta = parseRepoConfig(
      { setupSecrets: ['BETA_TOKEN', 'NOT_HELD'], network: { agent: ['docs.beta.example'] } },
      DEFAULTS,
    );
    assert.deepEqual(ungranted(beta, grants, 'beta/web'), [
      'setup secret NOT_HELD is not granted to beta/web (the deployment grants it with ISSUE_AGENT_SETUP_SECRET_NOT_HELD_REPOS)',
    ]);
    assert.equal(ungranted(beta, grants, 'beta/api').length, 2);
    // A secret with no grant at all is granted to no repository.
    const noGrant = grantsOf({ PATH: '/usr/bin', ISSUE_AGENT_SETUP_SECRET_LONE: 'lone-value-0123' });
    assert.equal(
      ungranted(parseRepoConfig({ setupSecrets: ['LONE'] }, DEFAULTS), noGrant, 'acme/web').length,
      1,
    );
  });

  test("a job's settings hold only what its repository was granted (what an evaluation's checkouts are checked against)", () => {
    const settings = readAgentEnv(DEPLOYMENT, { scoped: true }).environment;
    const beta = grantedTo(settings, 'beta/web');
    assert.deepEqual(
      beta.setupSecrets,
      { BETA_TOKEN: 'beta-token-0123456789' },
      "acme's token is not in reach",
    );
    assert.ok(beta.grants !== null);
    const asks = (config: Record<string, unknown>): string[] =>
      ungranted(
        parseRepoConfig(config, DEFAULTS),
        beta.grants ?? { secrets: {}, hosts: [] },
        'this repository',
      );
    assert.deepEqual(
      asks({
        setupSecrets: ['BETA_TOKEN'],
        network: { setup: ['docs.beta.example', 'pypi.shared.example'] },
      }),
      [],
    );
    assert.equal(asks({ setupSecrets: ['NPM_TOKEN'] }).length, 1);
    assert.equal(asks({ network: { setup: ['npm.acme.example'] } }).length, 1);
    // Unscoped settings (the Action, the CLI) come back as they are.
    const open = readAgentEnv(DEPLOYMENT).environment;
    assert.equal(grantedTo(open, 'beta/web'), open);
  });

  test('host patterns: a wildcard no wider than the grant, names under it, the same IP', () => {
    assert.equal(hostCovers('*.beta.example', 'docs.beta.example'), true);
    assert.equal(hostCovers('*.beta.example', 'a.b.beta.example'), true);
    assert.equal(hostCovers('*.beta.example', '*.docs.beta.example'), true);
    assert.equal(hostCovers('*.beta.example', '*.beta.example'), true);
    assert.equal(hostCovers('*.beta.example', 'beta.example'), false);
    assert.equal(hostCovers('*.beta.example', '*.example'), false);
    assert.equal(hostCovers('docs.beta.example', '*.beta.example'), false);
    assert.equal(hostCovers('npm.acme.example', 'npm.acme.example.evil.test'), false);
    assert.equal(hostCovers('10.0.0.5', '10.0.0.5'), true);
    assert.equal(hostCovers('10.0.0.5', '10.0.0.6'), false);
  });

  test('repository patterns', () => {
    assert.equal(repoMatches('acme/web', ['*']), true);
    assert.equal(repoMatches('acme/web', ['acme/*']), true);
    assert.equal(repoMatches('acme/web', ['acme/web']), true);
    assert.equal(repoMatches('acme/web', ['acme/we']), false);
    assert.equal(repoMatches('acme/web', ['acm/*']), false);
    assert.equal(repoMatches('acme-2/web', ['acme/*']), false);
  });
});

test('a head that is not the base branch’s: withoutSetupSecrets leaves no setup secret, keeps the egress grants', () => {
  const env = readAgentEnv({ ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN: 'npm-secret-value' });
  assert.deepEqual(Object.keys(env.environment.setupSecrets), ['NPM_TOKEN']);
  const none = withoutSetupSecrets(grantedTo(env.environment, 'acme/calc'));
  assert.deepEqual(none.setupSecrets, {});
  assert.doesNotMatch(JSON.stringify(none), /npm-secret-value/);
  // The grant itself stays (a worker's scoped settings): a config naming the secret is no config
  // error, its setup just gets no value.
  const scoped = readAgentEnv(
    {
      ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN: 'npm-secret-value',
      ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN_REPOS: 'acme/calc',
    },
    { scoped: true },
  ).environment;
  const kept = withoutSetupSecrets(grantedTo(scoped, 'acme/calc'));
  assert.deepEqual(kept.setupSecrets, {});
  assert.doesNotMatch(JSON.stringify(kept), /npm-secret-value/);
  assert.ok(kept.grants !== null);
  assert.deepEqual(ungranted({ setupSecrets: ['NPM_TOKEN'] }, kept.grants, 'this repository'), []);
  assert.equal(
    none.grants?.hosts.length ?? 0,
    (grantedTo(env.environment, 'acme/calc').grants?.hosts ?? []).length,
  );
});
