import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { EnvironmentSettings } from '../config/agent-env.js';
import type { EgressPhaseRecord } from '../events/schema.js';
import { EGRESS_SOCKET_NAME } from '../sandbox/docker/setup-phase.js';
import { holdPath, releasePath } from '../sandbox/held-paths.js';
import { EgressLog } from '../sandbox/egress/egress-log.js';
import { startEgressProxy, type EgressLogEntry, type EgressProxy } from '../sandbox/egress/egress-proxy.js';

/** Requests kept per phase in the trajectory (the totals and the refused hosts are always complete). */
export const MAX_LOGGED_REQUESTS = 200;

/** Ports the proxy lets setup reach when no mirror adds one: HTTPS and HTTP. */
export const DEFAULT_EGRESS_PORTS: readonly number[] = [443, 80];

/** The deployment's package mirrors, as setup sees them. */
export interface Mirrors {
  /** Points npm and pip at the mirrors (npm_config_registry, PIP_INDEX_URL). */
  readonly env: Readonly<Record<string, string>>;
  /** The mirrors' hosts, which setup may reach besides the plan's. */
  readonly hosts: readonly string[];
  /** DEFAULT_EGRESS_PORTS and the mirrors' own ports (a mirror on :8080 is reachable on :8080 only). */
  readonly ports: readonly number[];
}

/**
 * What the mirror settings (ISSUE_AGENT_NPM_REGISTRY, ISSUE_AGENT_PIP_INDEX_URL) open: their hosts
 * and ports for setup, and the variables that send the package managers there. The settings were
 * checked as URLs when read; one that does not parse opens nothing.
 */
export function mirrorsOf(settings: Pick<EnvironmentSettings, 'npmRegistry' | 'pipIndexUrl'>): Mirrors {
  const hosts: string[] = [];
  const ports = new Set(DEFAULT_EGRESS_PORTS);
  for (const u of [settings.npmRegistry, settings.pipIndexUrl]) {
    if (u === null) continue;
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      continue;
    }
    hosts.push(url.hostname);
    ports.add(url.port !== '' ? Number(url.port) : url.protocol === 'http:' ? 80 : 443);
  }
  return {
    env: {
      ...(settings.npmRegistry === null ? {} : { npm_config_registry: settings.npmRegistry }),
      ...(settings.pipIndexUrl === null ? {} : { PIP_INDEX_URL: settings.pipIndexUrl }),
    },
    hosts: [...new Set(hosts)],
    ports: [...ports],
  };
}

/** One egress session: a proxy on a socket in a directory made for one sandbox. */
export interface EgressSession {
  /** The directory to bind-mount into the sandbox (it holds only the socket). */
  readonly dir: string;
  readonly proxy: EgressProxy;
  /** Every request, in the order they ended (at most MAX_LOGGED_REQUESTS; `dropped` counts the rest). */
  readonly requests: EgressLogEntry[];
  dropped: number;
  /** Totals and refused hosts over the session (both proxies, when reopened). */
  readonly log: EgressLog;
  /** Replaces the proxy by one with another allowlist, on the same socket (the mount stays valid). */
  reopen(allowHosts: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export interface EgressSessionOptions {
  readonly allowHosts: readonly string[];
  /** Otherwise refused addresses to allow (a registry mirror on a private network). */
  readonly allowCidrs: readonly string[];
  /** Destination ports, in every phase of the session (default DEFAULT_EGRESS_PORTS). */
  readonly allowedPorts?: readonly number[] | undefined;
  readonly logger?: Logger | undefined;
  readonly onRequest?: ((entry: EgressLogEntry) => void) | undefined;
}

/**
 * Starts a proxy for one sandbox. Layout: `<tmp>/ia-egress-XXXX/` (0700, this process only) holds
 * `s/` (0755), which holds the socket (0666). Only `s/` is mounted into the container, read-only:
 * no other process on the host can reach the socket (the parent is private), and the container,
 * whose user may not be this one, can connect but not create, rename or remove anything there.
 */
export async function startEgressSession(options: EgressSessionOptions): Promise<EgressSession> {
  const parent = holdPath(await mkdtemp(join(tmpdir(), 'ia-egress-')));
  await chmod(parent, 0o700);
  const dir = join(parent, 's');
  await mkdir(dir, { mode: 0o755 });
  await chmod(dir, 0o755);
  const requests: EgressLogEntry[] = [];
  const log = new EgressLog();
  const session = { dir, requests, dropped: 0, log };
  const start = (allowHosts: readonly string[]): Promise<EgressProxy> =>
    startEgressProxy({
      socketPath: join(dir, EGRESS_SOCKET_NAME),
      socketMode: 0o666,
      allowHosts,
      allowPrivate: options.allowCidrs,
      allowedPorts: options.allowedPorts ?? DEFAULT_EGRESS_PORTS,
      logger: options.logger,
      onRequest: (entry) => {
        log.record(entry);
        if (requests.length < MAX_LOGGED_REQUESTS) requests.push(entry);
        else session.dropped += 1;
        options.onRequest?.(entry);
      },
    });
  let proxy: EgressProxy;
  try {
    proxy = await start(options.allowHosts);
  } catch (error) {
    await rm(parent, { recursive: true, force: true });
    releasePath(parent);
    throw error;
  }
  let closing: Promise<void> | null = null;
  const result: EgressSession = Object.assign(session, {
    get proxy(): EgressProxy {
      return proxy;
    },
    async reopen(allowHosts: readonly string[]): Promise<void> {
      await proxy.close();
      proxy = await start(allowHosts);
    },
    close(): Promise<void> {
      closing ??= (async () => {
        await proxy.close();
        await rm(parent, { recursive: true, force: true });
        releasePath(parent);
      })();
      return closing;
    },
  });
  return result;
}

/** What the trajectory records of an egress session: the allowed hosts, each request, the denials, the totals. */
export function egressRecord(session: EgressSession, allowHosts: readonly string[]): EgressPhaseRecord {
  const t = session.log.totals();
  return {
    allowHosts: [...allowHosts],
    requests: session.requests.map((r) => ({
      time: r.time,
      method: r.method,
      host: r.host,
      port: r.port,
      allowed: r.allowed,
      ...(r.reason === undefined ? {} : { reason: r.reason }),
      ...(r.status === undefined ? {} : { status: r.status }),
      bytesUp: r.bytesUp,
      bytesDown: r.bytesDown,
      durationMs: r.durationMs,
    })),
    dropped: session.dropped,
    denied: session.log.deniedHosts().map((d) => ({
      host: d.host,
      ports: [...d.ports],
      count: d.count,
      reason: d.reason,
    })),
    totals: {
      requests: t.requests,
      allowed: t.allowed,
      denied: t.denied,
      bytesUp: t.bytesUp,
      bytesDown: t.bytesDown,
    },
  };
}
