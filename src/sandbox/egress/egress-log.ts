/**
 * One request through the proxy, emitted once, when its connection ends. It names the host and
 * port only: never a URL, its userinfo, path or query, nor any header, so credentials a client
 * puts there cannot reach a log or a trajectory.
 */
export interface EgressLogEntry {
  /** When the request arrived (ISO 8601). */
  readonly time: string;
  /** `CONNECT`, `GET`, `HEAD`, another method that was refused, or `''` when none could be parsed. */
  readonly method: string;
  /** The normalized host (`''` when the request could not be parsed). */
  readonly host: string;
  readonly port: number;
  /** Whether the policy let the request through (a failed connect is still `true`). */
  readonly allowed: boolean;
  /** Why it was refused, or why an allowed request ended abnormally. */
  readonly reason?: string;
  /** The status the client got: the proxy's own, or the origin's for a forwarded GET. */
  readonly status?: number;
  /** The checked address the proxy connected to. */
  readonly address?: string;
  /** Payload bytes client → origin (tunnel bytes, or the forwarded request head). */
  readonly bytesUp: number;
  /** Payload bytes origin → client (tunnel bytes, or the origin's response as read). */
  readonly bytesDown: number;
  readonly durationMs: number;
}

export interface DeniedHost {
  readonly host: string;
  readonly ports: readonly number[];
  readonly count: number;
  /** The last reason this host was refused for. */
  readonly reason: string;
}

export interface EgressTotals {
  readonly requests: number;
  readonly allowed: number;
  readonly denied: number;
  readonly bytesUp: number;
  readonly bytesDown: number;
  /** Refused requests with a host that did not fit in the bounded denied-host table. */
  readonly deniedUntracked: number;
}

/**
 * Keeps totals and a summary of refused hosts, for the caller to report (e.g. "the setup phase tried
 * to reach these hosts"). The table is bounded: a sandbox can make up any number of names.
 */
export class EgressLog {
  private requests = 0;
  private allowedCount = 0;
  private deniedCount = 0;
  private up = 0;
  private down = 0;
  private untracked = 0;
  private readonly denied = new Map<string, { ports: Set<number>; count: number; reason: string }>();

  constructor(private readonly maxDeniedHosts = 256) {}

  /** Records an entry; true when it is the first refusal of its host (worth a log line of its own). */
  record(entry: EgressLogEntry): boolean {
    this.requests++;
    this.up += entry.bytesUp;
    this.down += entry.bytesDown;
    if (entry.allowed) {
      this.allowedCount++;
      return false;
    }
    this.deniedCount++;
    // A request too malformed to name a host counts, but has no row.
    if (entry.host === '') return false;
    const reason = entry.reason ?? 'refused';
    const seen = this.denied.get(entry.host);
    if (seen !== undefined) {
      seen.count++;
      seen.reason = reason;
      if (seen.ports.size < 16) seen.ports.add(entry.port);
      return false;
    }
    if (this.denied.size < this.maxDeniedHosts) {
      this.denied.set(entry.host, { ports: new Set([entry.port]), count: 1, reason });
      return true;
    }
    this.untracked++;
    return false;
  }

  totals(): EgressTotals {
    return {
      requests: this.requests,
      allowed: this.allowedCount,
      denied: this.deniedCount,
      bytesUp: this.up,
      bytesDown: this.down,
      deniedUntracked: this.untracked,
    };
  }

  /** Refused hosts, most refused first. */
  deniedHosts(): readonly DeniedHost[] {
    return [...this.denied.entries()]
      .map(([host, d]) => ({
        host,
        ports: [...d.ports].sort((a, b) => a - b),
        count: d.count,
        reason: d.reason,
      }))
      .sort((a, b) => b.count - a.count || a.host.localeCompare(b.host));
  }
}
