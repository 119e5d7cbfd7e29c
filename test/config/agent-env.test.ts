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
