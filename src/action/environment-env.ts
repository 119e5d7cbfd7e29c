/**
 * The step's variables that configure the setup phase, passed to readAgentEnv as they are: the same
 * ISSUE_AGENT_* names a deployment of the App sets (see docs/environments.md and
 * docs/github-action.md), so a workflow sets them in the step's `env:`. Nothing else of the runner's
 * environment is passed: readAgentEnv would otherwise pick up settings the workflow never meant for
 * the action.
 */
const NAMES = [
  'ISSUE_AGENT_SETUP',
  'ISSUE_AGENT_SETUP_TIMEOUT_S',
  'ISSUE_AGENT_EGRESS_ALLOW_HOSTS',
  'ISSUE_AGENT_EGRESS_ALLOW_CIDRS',
  'ISSUE_AGENT_EXTRA_CA_CERTS',
  'ISSUE_AGENT_NPM_REGISTRY',
  'ISSUE_AGENT_PIP_INDEX_URL',
] as const;

const SECRET = /^ISSUE_AGENT_SETUP_SECRET_[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The setup phase's variables of the step, with the `setup` input (on/off) over ISSUE_AGENT_SETUP
 * when it is given. The environment cache is always off: a runner is used once (actions/cache in the
 * workflow is the place for a cache).
 */
export function environmentEnv(
  env: NodeJS.ProcessEnv,
  setupInput: 'on' | 'off' | null,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of NAMES) {
    const v = env[name];
    if (v !== undefined && v.trim() !== '') out[name] = v;
  }
  for (const [k, v] of Object.entries(env)) if (SECRET.test(k) && v !== undefined && v !== '') out[k] = v;
  if (setupInput !== null) out.ISSUE_AGENT_SETUP = setupInput;
  out.ISSUE_AGENT_ENV_CACHE = 'off';
  return out;
}

/** The setup secrets' values in the step's environment (masked in the job log before anything). */
export function setupSecretValues(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(env)
    .filter(([k, v]) => SECRET.test(k) && v !== undefined && v !== '')
    .map(([, v]) => v ?? '');
}
