import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, readAgentEnv } from '../../src/config/agent-env.js';

void test('ISSUE_AGENT_VERIFY_FRESH: on unless set to off; anything else is refused with its form', () => {
  assert.equal(readAgentEnv({ PATH: '/usr/bin' }).verifyFresh, true);
  assert.equal(readAgentEnv({ PATH: '/usr/bin', ISSUE_AGENT_VERIFY_FRESH: 'OFF' }).verifyFresh, false);
  assert.equal(readAgentEnv({ PATH: '/usr/bin', ISSUE_AGENT_VERIFY_FRESH: 'on' }).verifyFresh, true);
  assert.throws(
    () => readAgentEnv({ PATH: '/usr/bin', ISSUE_AGENT_VERIFY_FRESH: 'no' }),
    (e: unknown) => e instanceof ConfigError && /ISSUE_AGENT_VERIFY_FRESH must be on or off/.test(e.message),
  );
});

void test('ISSUE_AGENT_SANDBOX_NICE: 10 by default, the matching container CPU shares; 0 to 19 only', () => {
  const plain = readAgentEnv({ PATH: '/usr/bin' });
  assert.equal(plain.sandboxNice, 10);
  assert.equal(plain.sandboxLimits.cpuShares, 110);
  const same = readAgentEnv({ PATH: '/usr/bin', ISSUE_AGENT_SANDBOX_NICE: '0' });
  assert.equal(same.sandboxNice, 0);
  assert.equal(same.sandboxLimits.cpuShares, 1024, "the engine's default weight");
  assert.equal(
    readAgentEnv({ PATH: '/usr/bin', ISSUE_AGENT_SANDBOX_NICE: '19' }).sandboxLimits.cpuShares,
    15,
  );
  for (const bad of ['20', '-1', '5.5', 'low'])
    assert.throws(
      () => readAgentEnv({ PATH: '/usr/bin', ISSUE_AGENT_SANDBOX_NICE: bad }),
      (e: unknown) =>
        e instanceof ConfigError && /ISSUE_AGENT_SANDBOX_NICE must be a nice value/.test(e.message),
      bad,
    );
});
