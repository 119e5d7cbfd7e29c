import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readAgentEnv } from '../../src/config/agent-env.js';
import { environmentEnv, setupSecretValues } from '../../src/action/environment-env.js';
import { ActionInputError, readInputs } from '../../src/action/inputs.js';

/**
 * How the Action configures the setup phase: the step's ISSUE_AGENT_* variables (the App's names)
 * and the `setup` input reach the agent's environment settings, and nothing else of the runner's
 * environment does. The phase itself, in the isolated local sandbox, is tested end to end in
 * test/sandbox/local-setup.test.ts.
 */
describe('the Action: setup settings', () => {
  const base = { 'INPUT_ANTHROPIC-API-KEY': 'k', 'INPUT_GITHUB-TOKEN': 't' };

  it('passes the step’s setup variables and secrets, and only those; the cache is off', () => {
    const step = {
      ISSUE_AGENT_EGRESS_ALLOW_HOSTS: 'npm.pkg.github.com, files.example.com',
      ISSUE_AGENT_EGRESS_ALLOW_CIDRS: '10.9.0.0/16',
      ISSUE_AGENT_NPM_REGISTRY: 'https://npm.example.com/',
      ISSUE_AGENT_SETUP_TIMEOUT_S: '120',
      ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN: 'npm_secret_value_123',
      ISSUE_AGENT_SETUP_SECRET_EMPTY: '',
      ISSUE_AGENT_RUNS_DIR: '/somewhere',
      ISSUE_AGENT_ENV_CACHE: 'on',
      AWS_SECRET_ACCESS_KEY: 'nope',
    };
    const picked = environmentEnv(step, null);
    assert.deepEqual(Object.keys(picked).sort(), [
      'ISSUE_AGENT_EGRESS_ALLOW_CIDRS',
      'ISSUE_AGENT_EGRESS_ALLOW_HOSTS',
      'ISSUE_AGENT_ENV_CACHE',
      'ISSUE_AGENT_NPM_REGISTRY',
      'ISSUE_AGENT_SETUP_SECRET_NPM_TOKEN',
      'ISSUE_AGENT_SETUP_TIMEOUT_S',
    ]);
    const settings = readAgentEnv({ PATH: '/usr/bin', ...picked }).environment;
    assert.equal(settings.setupEnabled, true);
    assert.deepEqual(settings.allowHosts, ['npm.pkg.github.com', 'files.example.com']);
    assert.deepEqual(settings.allowCidrs, ['10.9.0.0/16']);
    assert.equal(settings.npmRegistry, 'https://npm.example.com/');
    assert.equal(settings.setupTimeoutMs, 120_000);
    assert.deepEqual(settings.setupSecrets, { NPM_TOKEN: 'npm_secret_value_123' });
    assert.equal(settings.cacheDir, null);
    assert.deepEqual(setupSecretValues(step), ['npm_secret_value_123']);
  });

  it('the `setup` input (on/off) wins over ISSUE_AGENT_SETUP; default on', () => {
    assert.equal(readInputs(base).setup, null);
    assert.equal(readInputs({ ...base, INPUT_SETUP: 'OFF' }).setup, 'off');
    const off = environmentEnv({ ISSUE_AGENT_SETUP: 'on' }, 'off');
    assert.equal(readAgentEnv(off).environment.setupEnabled, false);
    const stepOff = environmentEnv({ ISSUE_AGENT_SETUP: 'off' }, null);
    assert.equal(readAgentEnv(stepOff).environment.setupEnabled, false);
    assert.equal(readAgentEnv(environmentEnv({}, null)).environment.setupEnabled, true);
    assert.throws(
      () => readInputs({ ...base, INPUT_SETUP: 'maybe' }),
      (e: unknown) => e instanceof ActionInputError && /^setup:/m.test(e.problems.join('\n')),
    );
  });
});
