import { HostAllowlist, parseTargetHost } from '../sandbox/egress/host-allowlist.js';

/**
 * Which repositories may use what a deployment holds, for an App installed on many repositories
 * (many teams): a setup secret reaches only the setup of the repositories it was granted to, and a
 * repository may add to its egress allowlists (`network.setup`, `network.agent`) only hosts granted
 * to it. Without grants, one repository's `.github/issue-agent.yml` could name another team's
 * registry token, or open its setup to a host of its choosing.
 *
 * Grants are names and patterns, never secrets: they are read where the secrets are (the worker)
 * and checked before anything of the job runs. The Action and the CLI have no grants to check: a
 * workflow or a person passes only what the one repository they run on may have.
 */
export interface RepositoryGrants {
  /** Setup secret name → the repository patterns it is granted to. */
  readonly secrets: Readonly<Record<string, readonly string[]>>;
  /** Host patterns a repository may add to its allowlists, each with the repositories it is granted to. */
  readonly hosts: readonly { readonly host: string; readonly repos: readonly string[] }[];
}

/** The variable that grants a setup secret: `ISSUE_AGENT_SETUP_SECRET_<NAME>_REPOS`. */
export const SECRET_GRANT_SUFFIX = '_REPOS';
/** The variable that grants extra egress hosts: `host=owner/*,owner/repo host2=owner2/*`. */
export const HOST_GRANTS_VARIABLE = 'ISSUE_AGENT_EGRESS_REPO_HOSTS';

/** `*` (every repository), `owner/*`, or `owner/name`, as GitHub spells names. */
const REPO_PATTERN = /^(?:\*|[A-Za-z0-9-]{1,39}\/(?:\*|[A-Za-z0-9._-]{1,100}))$/;

export class GrantError extends Error {
  override readonly name = 'GrantError';
}

/** A comma-separated list of repository patterns; throws GrantError naming `where` on a bad one. */
export function parseRepoPatterns(text: string, where: string): string[] {
  const patterns = text
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (patterns.length === 0) throw new GrantError(`${where} names no repository (owner/name, owner/* or *)`);
  for (const p of patterns) {
    if (!REPO_PATTERN.test(p)) {
      throw new GrantError(`${where}: "${p.slice(0, 80)}" is not owner/name, owner/* or *`);
    }
  }
  return patterns;
}

/** `ISSUE_AGENT_EGRESS_REPO_HOSTS`: grants separated by spaces or semicolons, each `host=repos`. */
export function parseHostGrants(text: string | undefined): RepositoryGrants['hosts'] {
  const out: { host: string; repos: string[] }[] = [];
  for (const item of (text ?? '').split(/[\s;]+/).filter((x) => x !== '')) {
    const eq = item.indexOf('=');
    if (eq <= 0) {
      throw new GrantError(`${HOST_GRANTS_VARIABLE}: "${item.slice(0, 80)}" is not host=owner/repo,owner/*`);
    }
    const host = item.slice(0, eq);
    try {
      new HostAllowlist([host]);
    } catch (error) {
      throw new GrantError(
        `${HOST_GRANTS_VARIABLE}: ${error instanceof Error ? error.message.replace(/^allowHosts: /, '') : String(error)}`,
      );
    }
    out.push({ host, repos: parseRepoPatterns(item.slice(eq + 1), `${HOST_GRANTS_VARIABLE} (${host})`) });
  }
  return out;
}

/** Whether `repository` (`owner/name`) matches one of the patterns (compared without regard to case). */
export function repoMatches(repository: string, patterns: readonly string[]): boolean {
  const repo = repository.toLowerCase();
  const owner = repo.slice(0, repo.indexOf('/'));
  return patterns.some((raw) => {
    const p = raw.toLowerCase();
    return p === '*' || p === repo || p === `${owner}/*`;
  });
}

/**
 * Whether a granted host pattern covers a repository's entry: an exact name the pattern allows, or
 * a wildcard no wider than the granted one (`*.a.example.com` under `*.example.com`), or the same IP.
 */
export function hostCovers(granted: string, entry: string): boolean {
  if (entry.startsWith('*.')) {
    if (!granted.startsWith('*.')) return false;
    const g = granted.slice(1).toLowerCase();
    const e = entry.slice(1).toLowerCase();
    return e === g || e.endsWith(g);
  }
  const host = parseTargetHost(entry.startsWith('[') ? entry.replace(/^\[|\]$/g, '') : entry);
  if (host === null) return false;
  try {
    return new HostAllowlist([granted]).allows(host);
  } catch {
    return false;
  }
}

/**
 * What a repository's config asks for that the deployment did not grant to it, one line each; empty
 * when everything is granted. A secret the deployment does not hold reads the same as one it holds
 * for others: a repository learns nothing of other teams' secrets.
 */
export function ungranted(
  config: {
    readonly setupSecrets?: readonly string[] | undefined;
    readonly network?:
      | { readonly setup?: readonly string[] | undefined; readonly agent?: readonly string[] | undefined }
      | undefined;
  },
  grants: RepositoryGrants,
  repository: string,
): string[] {
  const problems: string[] = [];
  for (const name of config.setupSecrets ?? []) {
    const repos = Object.hasOwn(grants.secrets, name) ? grants.secrets[name] : undefined;
    if (repos === undefined || !repoMatches(repository, repos)) {
      problems.push(
        `setup secret ${name} is not granted to ${repository} (the deployment grants it with ISSUE_AGENT_SETUP_SECRET_${name}${SECRET_GRANT_SUFFIX})`,
      );
    }
  }
  const mine = grants.hosts.filter((g) => repoMatches(repository, g.repos));
  for (const [key, entries] of [
    ['network.setup', config.network?.setup ?? []],
    ['network.agent', config.network?.agent ?? []],
  ] as const) {
    for (const entry of entries) {
      if (!mine.some((g) => hostCovers(g.host, entry))) {
        problems.push(
          `${key} host ${entry} is not granted to ${repository} (the deployment grants hosts with ${HOST_GRANTS_VARIABLE})`,
        );
      }
    }
  }
  return problems;
}

/**
 * The deployment's settings as one repository may use them: only the setup secrets granted to it,
 * and grants narrowed to what it holds (each then granted to any repository, so a check of a config
 * read later, e.g. from an evaluation's checkout, needs no name). Unscoped settings come back as
 * they are. What a job of `repository` is given, so that no later step can hand it another
 * repository's secret by mistake.
 */
export function grantedTo<
  T extends {
    readonly setupSecrets: Readonly<Record<string, string>>;
    readonly grants: RepositoryGrants | null;
  },
>(settings: T, repository: string): T {
  const grants = settings.grants;
  if (grants === null) return settings;
  const names = Object.keys(settings.setupSecrets).filter((name) => {
    const repos = Object.hasOwn(grants.secrets, name) ? grants.secrets[name] : undefined;
    return repos !== undefined && repoMatches(repository, repos);
  });
  return {
    ...settings,
    setupSecrets: Object.fromEntries(names.map((n) => [n, settings.setupSecrets[n] ?? ''])),
    grants: {
      secrets: Object.fromEntries(names.map((n) => [n, ['*']])),
      hosts: grants.hosts
        .filter((g) => repoMatches(repository, g.repos))
        .map((g) => ({ host: g.host, repos: ['*'] })),
    },
  };
}

/**
 * The settings with no setup secret at all: for `@agent review` and `@agent verify`, which set up a
 * pull request's merge base and apply its head afterwards (eval/grade.ts). They provision like the
 * CLI (execution/provision.ts plans a tree as the user's own checkout, which setup-trust.ts trusts),
 * while the worker's own jobs give setup secrets only to a tree whose setup files are the base
 * branch's tip (setup-trust.ts); a merge base is older history, so it gets none either.
 */
export function withoutSetupSecrets<
  T extends {
    readonly setupSecrets: Readonly<Record<string, string>>;
    readonly grants: RepositoryGrants | null;
  },
>(settings: T): T {
  // The grants (names only) stay: a tree whose config names a secret granted to its repository is
  // no config error here; setup runs with the secret not provided (said in the record), as a
  // deployment without it would.
  return { ...settings, setupSecrets: {} };
}
