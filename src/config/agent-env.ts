import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import {
  GrantError,
  HOST_GRANTS_VARIABLE,
  parseHostGrants,
  parseRepoPatterns,
  SECRET_GRANT_SUFFIX,
  type RepositoryGrants,
} from './grants.js';
import { expandDeploymentMcp, mcpConfig, type McpConfig } from './mcp-config.js';
import type { Limits, ModelSetup } from '../events/schema.js';
import { ModelSetupError, resolveModelSetup, type ModelChoice } from '../model/capabilities.js';
import { providerPrices, type ModelPrice, type PriceTable } from '../model/pricing.js';
import {
  isRegionalEndpoint,
  ProviderConfigError,
  readProviderConfig,
  type ProviderConfig,
} from '../model/provider-config.js';
import { DEFAULT_SANDBOX_NICE, cpuSharesForNice, validNice } from '../sandbox/cpu-priority.js';

/** Settings of the agent core that come from the environment. The only reader of process.env. */
export interface AgentEnv {
  readonly anthropicApiKey: string | null;
  readonly anthropicBaseUrl: string | null;
  /** Where Claude is reached (`ISSUE_AGENT_MODEL_PROVIDER`, see model/providers.ts); default Anthropic's API. */
  readonly provider: ProviderConfig;
  readonly model: string;
  /**
   * Tools and thinking asked for (`ISSUE_AGENT_TOOLS`, `ISSUE_AGENT_THINKING_BUDGET`; null: the
   * model's default, see model/capabilities.ts). Checked against `model` when read; a run of another
   * model resolves it again (runModelSetup).
   */
  readonly modelChoice: ModelChoice;
  readonly prices: PriceTable;
  readonly limits: Limits;
  readonly modelMaxAttempts: number;
  readonly modelRetryBaseMs: number;
  readonly runsDir: string;
  readonly logLevel: string;
  /** PATH handed to local sandboxes (the only host variable they get). */
  readonly sandboxPath: string;
  /** HOME of this process, or null: an isolated local sandbox hides it (but what PATH needs). */
  readonly hostHome: string | null;
  /**
   * Docker sandbox sizes, bytes (unset: the sandbox's defaults, see container-spec.ts): the
   * workspace tmpfs (a job that fills it ends `failed`/`sandbox_disk_limit`) and the memory limit,
   * which covers processes and everything the tmpfs mounts hold.
   */
  readonly sandboxLimits: {
    readonly workspaceBytes?: number;
    readonly memoryBytes?: number;
    /** A container's CPU weight, from sandboxNice (see sandbox/cpu-priority.ts). */
    readonly cpuShares?: number;
  };
  /**
   * How much lower the sandboxes' CPU priority is than the process's (`ISSUE_AGENT_SANDBOX_NICE`,
   * a nice value 0–19, 0 for the same; default DEFAULT_SANDBOX_NICE): local sandboxes run under
   * `nice`, Docker containers get the matching CPU shares. See sandbox/cpu-priority.ts.
   */
  readonly sandboxNice: number;
  /**
   * Commits of history a Docker sandbox's workspace gets (`git log`, `git blame` reach this far),
   * null for all of it. `ISSUE_AGENT_WORKSPACE_HISTORY`: a number or `full`; default
   * DEFAULT_WORKSPACE_HISTORY. A repository's `history:` setting wins.
   */
  readonly workspaceHistory: number | null;
  /**
   * With the Docker sandbox and the isolated local one, the verdict's final run is made in a second
   * sandbox the agent never ran in, on the base commit plus the published change
   * (AgentDeps.verifier). `ISSUE_AGENT_VERIFY_FRESH=off` makes it in the agent's own sandbox: one
   * sandbox (and, without a cache hit, one setup) less per job, and a verdict a hostile agent can
   * forge. Absent: on.
   */
  readonly verifyFresh?: boolean;
  /**
   * MCP servers every job gets (`ISSUE_AGENT_MCP_CONFIG`, JSON in the `mcpServers` shape), or null,
   * with the values of the variables its headers name (secrets: redacted wherever a job writes).
   */
  readonly mcp: DeploymentMcp | null;
  /** How job environments are prepared (setup phase, egress, cache); see docs/environments.md. */
  readonly environment: EnvironmentSettings;
}

export interface DeploymentMcp {
  readonly config: McpConfig;
  readonly secrets: readonly string[];
}

/** Deployment-wide settings of the setup phase. */
export interface EnvironmentSettings {
  /** `ISSUE_AGENT_SETUP=off` turns setup off everywhere (repositories get no dependencies). */
  readonly setupEnabled: boolean;
  /** Hosts every repository's setup may reach, beside its ecosystem's registries. */
  readonly allowHosts: readonly string[];
  /** Otherwise refused address ranges the proxy may connect to (a mirror on a private network). */
  readonly allowCidrs: readonly string[];
  /** PEM text of extra CA certificates for TLS clients in the sandbox (a corporate proxy's CA). */
  readonly extraCaPem: string | null;
  /** A registry mirror for npm (`npm_config_registry`) and an index for pip (`PIP_INDEX_URL`). */
  readonly npmRegistry: string | null;
  readonly pipIndexUrl: string | null;
  /** Secrets a repository may name in `setupSecrets` (from `ISSUE_AGENT_SETUP_SECRET_<NAME>`). */
  readonly setupSecrets: Readonly<Record<string, string>>;
  /**
   * Which repositories may use which setup secret and add which egress host (see grants.ts), for
   * the App's workers; null where the one repository a run is for may use all of them (the Action,
   * the CLI).
   */
  readonly grants: RepositoryGrants | null;
  /** Where prepared environments are kept (null: caching off), and their total size cap. */
  readonly cacheDir: string | null;
  readonly cacheMaxBytes: number;
  /**
   * How long an environment nothing pins (a package.json without a lockfile) is reused before setup
   * runs again (`ISSUE_AGENT_ENV_CACHE_UNPINNED_HOURS`, default 24): entries of one window of this
   * length share a key, so one is at most this old.
   */
  readonly cacheUnpinnedMs: number;
  /** Bound on each setup command. */
  readonly setupTimeoutMs: number;
}

export const DEFAULT_MODEL = 'claude-sonnet-4-6';

/** See AgentEnv.workspaceHistory and docs/benchmarks.md (the mirror) for the measurements. */
export const DEFAULT_WORKSPACE_HISTORY = 50;

export const DEFAULT_LIMITS: Limits = Object.freeze({
  maxSteps: 60,
  maxTokens: 4_000_000,
  maxUsd: 5,
  maxWallMs: 45 * 60_000,
  contextTokens: 150_000,
  commandTimeoutMs: 120_000,
  testTimeoutMs: 15 * 60_000,
  testMemoryBytes: 4 * 1024 ** 3,
  observationChars: 16_000,
  maxOutputTokens: 8_192,
});

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

const price = z.object({
  input: z.number(),
  output: z.number(),
  cacheWrite: z.number(),
  cacheRead: z.number(),
});
const positive = z.coerce.number().positive();

function num(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const parsed = positive.safeParse(raw);
  if (!parsed.success) throw new ConfigError(`${name} must be a positive number, got "${raw}"`);
  return parsed.data;
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Parses the environment once into a frozen object; tests pass their own env. */
export interface ReadAgentEnvOptions {
  /**
   * Setup secrets and a repository's extra egress hosts are granted per repository (the App's
   * workers, which serve every repository the App is installed on): `_REPOS` variables and
   * ISSUE_AGENT_EGRESS_REPO_HOSTS are read and every job is checked against them. Default: false.
   */
  readonly scoped?: boolean;
}

export function readAgentEnv(
  env: NodeJS.ProcessEnv = process.env,
  options: ReadAgentEnvOptions = {},
): AgentEnv {
  const provider = readProvider(env);
  const model = nonEmpty(env.ISSUE_AGENT_MODEL) ?? DEFAULT_MODEL;
  let prices: PriceTable = providerPrices(
    provider.kind !== 'anthropic' && isRegionalEndpoint(provider, provider.modelId ?? 'global.'),
  );
  if (env.ISSUE_AGENT_PRICES !== undefined && env.ISSUE_AGENT_PRICES !== '') {
    let json: unknown;
    try {
      json = JSON.parse(env.ISSUE_AGENT_PRICES);
    } catch {
      throw new ConfigError(
        'ISSUE_AGENT_PRICES must be JSON: {"model": {"input": 3, "output": 15, "cacheWrite": 3.75, "cacheRead": 0.3}}',
      );
    }
    const parsed = z.record(z.string(), price).safeParse(json);
    if (!parsed.success) throw new ConfigError(`ISSUE_AGENT_PRICES: ${parsed.error.message}`);
    prices = { ...prices, ...(parsed.data as Record<string, ModelPrice>) };
  }
  const minutes = num(env, 'ISSUE_AGENT_MAX_MINUTES');
  const limits: Limits = {
    ...DEFAULT_LIMITS,
    ...defined('maxSteps', num(env, 'ISSUE_AGENT_MAX_STEPS')),
    ...defined('maxUsd', num(env, 'ISSUE_AGENT_MAX_USD')),
    ...defined('maxTokens', num(env, 'ISSUE_AGENT_MAX_TOKENS')),
    ...defined('maxWallMs', minutes === undefined ? undefined : Math.round(minutes * 60_000)),
    ...defined('contextTokens', num(env, 'ISSUE_AGENT_CONTEXT_TOKENS')),
    ...defined('commandTimeoutMs', seconds(num(env, 'ISSUE_AGENT_COMMAND_TIMEOUT_S'))),
    ...defined('testTimeoutMs', seconds(num(env, 'ISSUE_AGENT_TEST_TIMEOUT_S'))),
    ...defined('testMemoryBytes', mib(num(env, 'ISSUE_AGENT_TEST_MEMORY_MB'))),
    ...condenser(env.ISSUE_AGENT_CONDENSER, provider),
  };
  const sandboxNice = niceValue(env.ISSUE_AGENT_SANDBOX_NICE);
  const modelChoice = readModelChoice(env);
  runModelSetup(model, modelChoice, limits);
  const state =
    env.XDG_STATE_HOME !== undefined && env.XDG_STATE_HOME !== ''
      ? env.XDG_STATE_HOME
      : join(homedir(), '.local', 'state');
  return deepFreeze({
    anthropicApiKey: nonEmpty(env.ANTHROPIC_API_KEY),
    anthropicBaseUrl: nonEmpty(env.ANTHROPIC_BASE_URL),
    provider,
    model,
    modelChoice,
    prices,
    limits,
    modelMaxAttempts: num(env, 'ISSUE_AGENT_MODEL_MAX_ATTEMPTS') ?? 6,
    modelRetryBaseMs: num(env, 'ISSUE_AGENT_MODEL_RETRY_BASE_MS') ?? 1000,
    runsDir: nonEmpty(env.ISSUE_AGENT_RUNS_DIR) ?? join(state, 'issue-agent', 'runs'),
    logLevel: nonEmpty(env.ISSUE_AGENT_LOG_LEVEL) ?? 'warn',
    sandboxPath: nonEmpty(env.PATH) ?? '/usr/local/bin:/usr/bin:/bin',
    hostHome: nonEmpty(env.HOME),
    sandboxLimits: {
      ...optionalBytes('workspaceBytes', mib(num(env, 'ISSUE_AGENT_SANDBOX_WORKSPACE_MB'))),
      ...optionalBytes('memoryBytes', mib(num(env, 'ISSUE_AGENT_SANDBOX_MEMORY_MB'))),
      cpuShares: cpuSharesForNice(sandboxNice),
    },
    sandboxNice,
    workspaceHistory: workspaceHistory(env.ISSUE_AGENT_WORKSPACE_HISTORY),
    verifyFresh: onOff(env, 'ISSUE_AGENT_VERIFY_FRESH', true),
    mcp: readMcp(env),
    environment: readEnvironmentSettings(env, state, options.scoped === true),
  });
}

function readProvider(env: NodeJS.ProcessEnv): ProviderConfig {
  try {
    return readProviderConfig(env);
  } catch (error) {
    if (error instanceof ProviderConfigError) throw new ConfigError(error.message);
    throw error;
  }
}

function readModelChoice(env: NodeJS.ProcessEnv): ModelChoice {
  const tools = nonEmpty(env.ISSUE_AGENT_TOOLS)?.toLowerCase() ?? null;
  if (tools !== null && tools !== 'native' && tools !== 'schema') {
    throw new ConfigError(
      `ISSUE_AGENT_TOOLS must be native (Anthropic's text editor and bash tools) or schema (the harness's own), got "${tools}"`,
    );
  }
  const budgetText = nonEmpty(env.ISSUE_AGENT_THINKING_BUDGET);
  let thinkingBudget: number | null = null;
  if (budgetText !== null) {
    if (!/^[0-9]{1,7}$/.test(budgetText))
      throw new ConfigError(
        `ISSUE_AGENT_THINKING_BUDGET must be a number of tokens (0: off), got "${budgetText}"`,
      );
    thinkingBudget = Number(budgetText);
  }
  return { tools, thinkingBudget };
}

/**
 * The tools and thinking of a run of `model` under these settings (model/capabilities.ts); a
 * choice the API would refuse is a ConfigError.
 */
export function runModelSetup(
  model: string,
  choice: ModelChoice,
  limits: Pick<Limits, 'maxOutputTokens'>,
): ModelSetup {
  try {
    return resolveModelSetup(model, choice, limits.maxOutputTokens);
  } catch (error) {
    if (error instanceof ModelSetupError) throw new ConfigError(error.message);
    throw error;
  }
}

function readMcp(env: NodeJS.ProcessEnv): DeploymentMcp | null {
  const text = nonEmpty(env.ISSUE_AGENT_MCP_CONFIG);
  if (text === null) return null;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError('ISSUE_AGENT_MCP_CONFIG must be JSON: {"mcpServers": {"name": {"command": "…"}}}');
  }
  const parsed = mcpConfig.safeParse(json);
  if (!parsed.success) throw new ConfigError(`ISSUE_AGENT_MCP_CONFIG: ${parsed.error.message}`);
  const expanded = expandDeploymentMcp(parsed.data, env);
  if (expanded.missing.length > 0) {
    throw new ConfigError(`ISSUE_AGENT_MCP_CONFIG names unset variables: ${expanded.missing.join(', ')}`);
  }
  return { config: expanded.config, secrets: expanded.secrets };
}

function onOff(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const v = nonEmpty(env[name])?.toLowerCase() ?? null;
  if (v === null) return fallback;
  if (v === 'on') return true;
  if (v === 'off') return false;
  throw new ConfigError(`${name} must be on or off`);
}

function niceValue(v: string | undefined): number {
  const text = nonEmpty(v);
  if (text === null) return DEFAULT_SANDBOX_NICE;
  const n = /^[0-9]{1,2}$/.test(text) ? Number(text) : NaN;
  if (!validNice(n))
    throw new ConfigError(
      `ISSUE_AGENT_SANDBOX_NICE must be a nice value from 0 (the worker's CPU priority) to 19 (the lowest), got "${text}"`,
    );
  return n;
}

function workspaceHistory(v: string | undefined): number | null {
  const text = nonEmpty(v);
  if (text === null) return DEFAULT_WORKSPACE_HISTORY;
  if (text.toLowerCase() === 'full') return null;
  if (!/^[1-9][0-9]{0,6}$/.test(text))
    throw new ConfigError('ISSUE_AGENT_WORKSPACE_HISTORY must be a number of commits (1 or more) or `full`');
  return Number(text);
}

function list(v: string | undefined): string[] {
  return (v ?? '')
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

function url(env: NodeJS.ProcessEnv, name: string): string | null {
  const v = nonEmpty(env[name]);
  if (v === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(`${name} must be a URL, e.g. https://registry.example.com/`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new ConfigError(`${name} must be an http(s) URL`);
  }
  return v;
}

function readEnvironmentSettings(
  env: NodeJS.ProcessEnv,
  state: string,
  scoped: boolean,
): EnvironmentSettings {
  const setup = (nonEmpty(env.ISSUE_AGENT_SETUP) ?? 'on').toLowerCase();
  if (!['on', 'off'].includes(setup)) throw new ConfigError('ISSUE_AGENT_SETUP must be on or off');
  const caPath = nonEmpty(env.ISSUE_AGENT_EXTRA_CA_CERTS);
  let extraCaPem: string | null = null;
  if (caPath !== null) {
    try {
      extraCaPem = readFileSync(caPath, 'utf8');
    } catch (error) {
      throw new ConfigError(
        `ISSUE_AGENT_EXTRA_CA_CERTS: cannot read ${caPath}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    if (!extraCaPem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new ConfigError(`ISSUE_AGENT_EXTRA_CA_CERTS: ${caPath} holds no PEM certificate`);
    }
  }
  const { setupSecrets, grants } = readSetupSecrets(env, scoped);
  const cache = (nonEmpty(env.ISSUE_AGENT_ENV_CACHE) ?? 'on').toLowerCase();
  if (!['on', 'off'].includes(cache)) throw new ConfigError('ISSUE_AGENT_ENV_CACHE must be on or off');
  return {
    setupEnabled: setup === 'on',
    allowHosts: list(env.ISSUE_AGENT_EGRESS_ALLOW_HOSTS),
    allowCidrs: list(env.ISSUE_AGENT_EGRESS_ALLOW_CIDRS),
    extraCaPem,
    npmRegistry: url(env, 'ISSUE_AGENT_NPM_REGISTRY'),
    pipIndexUrl: url(env, 'ISSUE_AGENT_PIP_INDEX_URL'),
    setupSecrets,
    grants,
    cacheDir:
      cache === 'off'
        ? null
        : (nonEmpty(env.ISSUE_AGENT_ENV_CACHE_DIR) ?? join(state, 'issue-agent', 'env-cache')),
    cacheMaxBytes: mib(num(env, 'ISSUE_AGENT_ENV_CACHE_MB')) ?? 10 * 1024 ** 3,
    cacheUnpinnedMs: hours(num(env, 'ISSUE_AGENT_ENV_CACHE_UNPINNED_HOURS')) ?? 24 * 3_600_000,
    setupTimeoutMs: seconds(num(env, 'ISSUE_AGENT_SETUP_TIMEOUT_S')) ?? 15 * 60_000,
  };
}

/**
 * `ISSUE_AGENT_SETUP_SECRET_<NAME>` and, when scoped, who may use each: a name ending in `_REPOS`
 * is the grant of the secret before it (so no secret's own name ends so), and
 * ISSUE_AGENT_EGRESS_REPO_HOSTS the hosts repositories may add. Unscoped, grants are not read.
 */
function readSetupSecrets(
  env: NodeJS.ProcessEnv,
  scoped: boolean,
): { setupSecrets: Record<string, string>; grants: RepositoryGrants | null } {
  const setupSecrets: Record<string, string> = {};
  const secretGrants: Record<string, string[]> = {};
  const grantTexts: [string, string][] = [];
  for (const [k, v] of Object.entries(env)) {
    const m = /^ISSUE_AGENT_SETUP_SECRET_([A-Za-z_][A-Za-z0-9_]*)$/.exec(k);
    if (m?.[1] === undefined || v === undefined || v === '') continue;
    if (m[1].endsWith(SECRET_GRANT_SUFFIX)) grantTexts.push([m[1].slice(0, -SECRET_GRANT_SUFFIX.length), v]);
    else setupSecrets[m[1]] = v;
  }
  if (!scoped) return { setupSecrets, grants: null };
  try {
    for (const [name, text] of grantTexts) {
      const variable = `ISSUE_AGENT_SETUP_SECRET_${name}${SECRET_GRANT_SUFFIX}`;
      if (setupSecrets[name] === undefined) {
        throw new GrantError(`${variable} grants ISSUE_AGENT_SETUP_SECRET_${name}, which is not set`);
      }
      secretGrants[name] = parseRepoPatterns(text, variable);
    }
    return {
      setupSecrets,
      grants: { secrets: secretGrants, hosts: parseHostGrants(env[HOST_GRANTS_VARIABLE]) },
    };
  } catch (error) {
    if (error instanceof GrantError) throw new ConfigError(error.message);
    throw error;
  }
}

function optionalBytes<K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [key]: value } as Partial<Record<K, number>>);
}

function nonEmpty(v: string | undefined): string | null {
  return v === undefined || v.trim() === '' ? null : v;
}

function seconds(v: number | undefined): number | undefined {
  return v === undefined ? undefined : Math.round(v * 1000);
}

function hours(v: number | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!(v > 0)) throw new ConfigError('ISSUE_AGENT_ENV_CACHE_UNPINNED_HOURS must be more than 0');
  return Math.round(v * 3_600_000);
}

function mib(v: number | undefined): number | undefined {
  return v === undefined ? undefined : Math.round(v * 1024 * 1024);
}

/**
 * `ISSUE_AGENT_CONDENSER`: `summary` (the model writes a structured summary of the condensed turns;
 * the default), `lines` (one line per action, no model call) or `server` (the Messages API clears
 * old tool results itself, a beta only Anthropic's own API is known to take here). See
 * docs/context.md.
 */
function condenser(v: string | undefined, provider: ProviderConfig): Pick<Limits, 'condenser'> {
  const text = nonEmpty(v)?.toLowerCase() ?? null;
  if (text === null) return {};
  if (text === 'server' && provider.kind !== 'anthropic') {
    throw new ConfigError(
      `ISSUE_AGENT_CONDENSER=server needs Anthropic's API: server-side context management (the context-management-2025-06-27 beta) is not offered through ${provider.kind === 'bedrock' ? 'Amazon Bedrock' : 'Google Vertex AI'} by this harness; use summary or lines with ISSUE_AGENT_MODEL_PROVIDER=${provider.kind}`,
    );
  }
  if (text === 'summary' || text === 'lines' || text === 'server') return { condenser: text };
  throw new ConfigError(`ISSUE_AGENT_CONDENSER must be summary, lines or server, got "${v ?? ''}"`);
}

function defined(key: keyof Limits, value: number | undefined): Partial<Limits> {
  return value === undefined ? {} : { [key]: key === 'maxUsd' ? value : Math.round(value) };
}
