import { canonicalIp } from './address-policy.js';
import { EgressProxyError } from './errors.js';

/** A request target's host, normalized: a DNS name (lowercase, no trailing dot) or an IP literal. */
export type TargetHost =
  { readonly kind: 'name'; readonly name: string } | { readonly kind: 'ip'; readonly address: string };

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
/**
 * The last label of a name must start with a letter (every TLD does). This rules out the numeric
 * forms the system resolver would read as an address (`2130706433`, `0x7f.1`, `010.0.0.1`), so a
 * name can only become an address through DNS, where the result is checked.
 */
const LAST_LABEL = /^[a-z]/;

/** Validates and normalizes a host as it appears in a request (brackets already removed). */
export function parseTargetHost(raw: string): TargetHost | null {
  const ip = canonicalIp(raw);
  if (ip !== null) return { kind: 'ip', address: ip };
  let name = raw.toLowerCase();
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name.length === 0 || name.length > 253) return null;
  const labels = name.split('.');
  if (!labels.every((l) => LABEL.test(l))) return null;
  if (!LAST_LABEL.test(labels[labels.length - 1] ?? '')) return null;
  return { kind: 'name', name };
}

/** `host:port` or `[v6]:port` (CONNECT's authority-form). Userinfo is not part of this form. */
export function parseAuthority(target: string): { host: TargetHost; port: number } | null {
  const m = /^(?:\[([^\]]{1,64})\]|([^:[\]@/]{1,253})):(\d{1,5})$/.exec(target);
  if (m === null) return null;
  const port = parsePort(m[3] ?? '');
  const hostText = m[1] ?? m[2] ?? '';
  const host = parseTargetHost(hostText);
  if (port === null || host === null) return null;
  // Brackets hold an IPv6 literal (IPv4-mapped ones included) and nothing else; an unbracketed host
  // cannot contain a colon (the pattern ensures it).
  if (m[1] !== undefined && (host.kind !== 'ip' || !hostText.includes(':'))) return null;
  return { host, port };
}

export function parsePort(text: string): number | null {
  if (!/^\d{1,5}$/.test(text)) return null;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : null;
}

/** How a host appears in logs and reasons: the name, or the literal (IPv6 in brackets). */
export function hostLabel(host: TargetHost): string {
  if (host.kind === 'name') return host.name;
  return host.address.includes(':') ? `[${host.address}]` : host.address;
}

/**
 * Host patterns: an exact name (`registry.npmjs.org`), a wildcard (`*.example.org`, which matches
 * subdomains at any depth but not `example.org` itself), or an exact IP literal. A wildcard needs at
 * least two labels after `*.` so that a whole TLD (`*.org`) cannot be opened by accident.
 */
export class HostAllowlist {
  private readonly exact = new Set<string>();
  private readonly suffixes: string[] = [];

  constructor(patterns: readonly string[]) {
    for (const raw of patterns) {
      const pattern = raw.trim();
      if (pattern.startsWith('*.')) {
        const base = parseTargetHost(pattern.slice(2));
        if (base?.kind !== 'name' || !base.name.includes('.')) {
          throw new EgressProxyError(
            'invalid_option',
            `allowHosts: "${raw}" is not a wildcard of the form *.domain.tld`,
          );
        }
        this.suffixes.push(`.${base.name}`);
        continue;
      }
      const host = parseTargetHost(pattern.startsWith('[') ? pattern.replace(/^\[|\]$/g, '') : pattern);
      if (host === null) {
        throw new EgressProxyError('invalid_option', `allowHosts: "${raw}" is not a host name or IP address`);
      }
      this.exact.add(host.kind === 'name' ? host.name : host.address);
    }
  }

  allows(host: TargetHost): boolean {
    if (host.kind === 'ip') return this.exact.has(host.address);
    if (this.exact.has(host.name)) return true;
    return this.suffixes.some((s) => host.name.endsWith(s));
  }
}
