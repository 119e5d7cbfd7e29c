import { EgressProxyError } from './errors.js';

/**
 * Why an address is refused. Everything that is not plain global unicast falls into one of these:
 * the proxy must never become a way from the sandbox into the host, its network, a cloud metadata
 * service, or anything else that trusts "internal" traffic.
 */
export type AddressCategory =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'cgnat'
  | 'link-local'
  | 'unique-local'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'benchmarking'
  | 'transition'
  | 'reserved'
  | 'malformed';

export type AddressVerdict =
  | {
      readonly ok: true;
      /** The address to connect to: dotted IPv4 (IPv4-mapped IPv6 unwrapped) or canonical IPv6. */
      readonly address: string;
      readonly family: 4 | 6;
    }
  | { readonly ok: false; readonly address: string; readonly category: AddressCategory };

/** A parsed address: 4 bytes (IPv4) or 16 (IPv6). */
type Bytes = Uint8Array;

interface Cidr {
  readonly bytes: Bytes;
  readonly prefix: number;
}

interface Rule extends Cidr {
  readonly category: AddressCategory;
}

/** Strict dotted-quad decimal only: no octal, hex, short or leading-zero forms (inet_aton reads those). */
export function parseIPv4(text: string): Bytes | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (m === null) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = m[i + 1] ?? '';
    if (part.length > 1 && part.startsWith('0')) return null;
    const n = Number(part);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

/** RFC 4291 text forms, with `::` and a trailing dotted quad. Zone ids (`%eth0`) are refused. */
export function parseIPv6(text: string): Bytes | null {
  if (text.length > 45 || !/^[0-9a-fA-F:.]+$/.test(text)) return null;
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groups = (half: string | undefined): number[] | null => {
    if (half === undefined || half === '') return [];
    const out: number[] = [];
    const parts = half.split(':');
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i] ?? '';
      if (i === parts.length - 1 && part.includes('.')) {
        const v4 = parseIPv4(part);
        if (v4 === null) return null;
        out.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return null;
        out.push(parseInt(part, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  if (head === null || tail === null) return null;
  // A dotted quad may only end the address.
  if (halves.length === 2 && (halves[0] ?? '').includes('.')) return null;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const all = [...head, ...new Array<number>(missing).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  return out;
}

function formatIPv4(b: Bytes): string {
  return `${b[0] ?? 0}.${b[1] ?? 0}.${b[2] ?? 0}.${b[3] ?? 0}`;
}

/** Canonical IPv6 text (RFC 5952: lowercase, longest zero run compressed). */
function formatIPv6(b: Bytes): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push(((b[2 * i] ?? 0) << 8) | (b[2 * i + 1] ?? 0));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestLen < 2) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

function matches(addr: Bytes, cidr: Cidr): boolean {
  if (addr.length !== cidr.bytes.length) return false;
  const full = cidr.prefix >> 3;
  for (let i = 0; i < full; i++) if (addr[i] !== cidr.bytes[i]) return false;
  const rest = cidr.prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return ((addr[full] ?? 0) & mask) === ((cidr.bytes[full] ?? 0) & mask);
}

function parseCidr(text: string): Cidr | null {
  const slash = text.lastIndexOf('/');
  const addrText = slash === -1 ? text : text.slice(0, slash);
  const bytes = parseIPv4(addrText) ?? parseIPv6(addrText);
  if (bytes === null) return null;
  const max = bytes.length * 8;
  let prefix = max;
  if (slash !== -1) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return null;
    prefix = Number(p);
    if (prefix > max) return null;
  }
  return { bytes, prefix };
}

function rule(text: string, category: AddressCategory): Rule {
  const cidr = parseCidr(text);
  if (cidr === null) throw new Error(`bad built-in range ${text}`);
  return { ...cidr, category };
}

/**
 * IPv4 ranges that are not global unicast (IANA special-purpose registry). First match wins, so the
 * broadcast address is named before 240/4 holds it.
 */
const V4_RULES: readonly Rule[] = [
  rule('0.0.0.0/8', 'unspecified'),
  rule('10.0.0.0/8', 'private'),
  rule('100.64.0.0/10', 'cgnat'),
  rule('127.0.0.0/8', 'loopback'),
  rule('169.254.0.0/16', 'link-local'),
  rule('172.16.0.0/12', 'private'),
  rule('192.0.0.0/24', 'reserved'),
  rule('192.0.2.0/24', 'documentation'),
  rule('192.88.99.0/24', 'transition'),
  rule('192.168.0.0/16', 'private'),
  rule('198.18.0.0/15', 'benchmarking'),
  rule('198.51.100.0/24', 'documentation'),
  rule('203.0.113.0/24', 'documentation'),
  rule('224.0.0.0/4', 'multicast'),
  rule('255.255.255.255/32', 'broadcast'),
  rule('240.0.0.0/4', 'reserved'),
];

/**
 * IPv6 ranges refused inside global unicast (2000::/3); anything outside 2000::/3 is refused too,
 * which covers ::1, ::, fc00::/7, fe80::/10, fec0::/10, ff00::/8, 100::/64 and IPv4-compatible and
 * translated forms. IPv4-mapped (::ffff:0:0/96) and NAT64 (64:ff9b::/96) addresses are judged by
 * the IPv4 address they carry. 6to4 and Teredo carry an IPv4 address too but reach it through
 * relays the host does not control: refused outright.
 */
const V6_RULES: readonly Rule[] = [
  rule('::/128', 'unspecified'),
  rule('::1/128', 'loopback'),
  rule('::/96', 'transition'),
  rule('64:ff9b:1::/48', 'transition'),
  rule('100::/64', 'reserved'),
  rule('2001:db8::/32', 'documentation'),
  rule('2001::/23', 'reserved'),
  rule('2002::/16', 'transition'),
  rule('3fff::/20', 'documentation'),
  rule('fc00::/7', 'unique-local'),
  rule('fe80::/10', 'link-local'),
  rule('fec0::/10', 'private'),
  rule('ff00::/8', 'multicast'),
];
const V6_GLOBAL_UNICAST = rule('2000::/3', 'reserved');
const V4_MAPPED = rule('::ffff:0:0/96', 'reserved');
const NAT64 = rule('64:ff9b::/96', 'transition');

/** Connecting to these is never meaningful for TCP egress (0.0.0.0 even reaches the host itself). */
const NEVER_OPENED: ReadonlySet<AddressCategory> = new Set(['unspecified', 'multicast', 'broadcast']);

/**
 * The address check run on every IP literal and every resolved address. `allowPrivate` opens given
 * ranges (CIDRs) of otherwise refused addresses, e.g. a registry mirror on the host's network, or
 * loopback in tests; it never opens unspecified, multicast or broadcast addresses.
 */
export class AddressPolicy {
  private readonly opened: readonly Cidr[];

  constructor(allowPrivate: readonly string[] = []) {
    this.opened = allowPrivate.map((text) => {
      const cidr = parseCidr(text.trim());
      if (cidr === null) {
        throw new EgressProxyError('invalid_option', `allowPrivate: "${text}" is not an IP address or CIDR`);
      }
      if (cidr.bytes.length === 16 && cidr.prefix >= 96 && matches(cidr.bytes, V4_MAPPED)) {
        throw new EgressProxyError(
          'invalid_option',
          `allowPrivate: "${text}" is an IPv4-mapped range; give IPv4 ranges in dotted form`,
        );
      }
      return cidr;
    });
  }

  check(text: string): AddressVerdict {
    const v4 = parseIPv4(text);
    if (v4 !== null) return this.checkV4(v4);
    const v6 = parseIPv6(text);
    if (v6 === null) return { ok: false, address: text.slice(0, 64), category: 'malformed' };
    if (matches(v6, V4_MAPPED)) return this.checkV4(v6.slice(12));
    const address = formatIPv6(v6);
    if (matches(v6, NAT64)) {
      const inner = this.checkV4(v6.slice(12));
      return inner.ok ? { ok: true, address, family: 6 } : { ...inner, address };
    }
    const category = V6_RULES.find((r) => matches(v6, r))?.category;
    if (category !== undefined) return this.verdict(v6, address, 6, category);
    if (!matches(v6, V6_GLOBAL_UNICAST)) return this.verdict(v6, address, 6, 'reserved');
    return { ok: true, address, family: 6 };
  }

  private checkV4(v4: Bytes): AddressVerdict {
    const address = formatIPv4(v4);
    const category = V4_RULES.find((r) => matches(v4, r))?.category;
    if (category === undefined) return { ok: true, address, family: 4 };
    return this.verdict(v4, address, 4, category);
  }

  private verdict(bytes: Bytes, address: string, family: 4 | 6, category: AddressCategory): AddressVerdict {
    if (!NEVER_OPENED.has(category) && this.opened.some((c) => matches(bytes, c))) {
      return { ok: true, address, family };
    }
    return { ok: false, address, category };
  }
}

/**
 * The canonical text of an IP literal (dotted IPv4, IPv4-mapped unwrapped, RFC 5952 IPv6), or null
 * when `text` is not one. Allowlist entries and requested literals compare in this form.
 */
export function canonicalIp(text: string): string | null {
  const v4 = parseIPv4(text);
  if (v4 !== null) return formatIPv4(v4);
  const v6 = parseIPv6(text);
  if (v6 === null) return null;
  return matches(v6, V4_MAPPED) ? formatIPv4(v6.slice(12)) : formatIPv6(v6);
}
