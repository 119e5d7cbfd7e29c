import type { EnvironmentRecord } from '../events/schema.js';
import {
  codeSpan,
  fenced,
  formatDuration,
  neutralizeInline,
  tableCell,
  truncateEnd,
  truncateMiddle,
} from './markdown.js';

type Redact = (text: string) => string;

const CACHE_WORDS: Record<EnvironmentRecord['setup']['cache']['status'], string> = {
  hit: 'reused a cached environment (setup skipped)',
  stored: 'kept for later jobs',
  miss: 'not cached',
  disabled: 'cache off',
  'not-stored': 'not cached',
};

function runtimes(rec: EnvironmentRecord, redact: Redact): string {
  return rec.runtimes
    .map((r) => `${r.language} ${r.version} (from ${neutralizeInline(truncateEnd(redact(r.source), 120))})`)
    .join(', ');
}

/** One short paragraph for the progress comment: what the environment is, what ran and why. */
export function describeEnvironment(rec: EnvironmentRecord, redact: Redact = (t) => t): string {
  const parts = [`**Environment:** ${codeSpan(truncateEnd(redact(rec.image), 200))}`];
  const rt = runtimes(rec, redact);
  if (rt !== '') parts.push(rt);
  const setup = rec.setup;
  if (setup.cache.status === 'hit') {
    parts.push(`setup skipped: ${CACHE_WORDS.hit}`);
  } else if (setup.commands.length === 0) {
    parts.push(`no setup — ${neutralizeInline(truncateEnd(redact(setup.reason), 300))}`);
  } else {
    const ran = setup.commands.filter((c) => c.attempts > 0);
    parts.push(
      `setup ${ran.map((c) => codeSpan(truncateEnd(redact(c.command), 120))).join(', ')} (${neutralizeInline(truncateEnd(redact(setup.reason), 300))}) in ${formatDuration(setup.durationMs)}`,
    );
  }
  const untrusted = untrustedLine(rec, redact);
  if (untrusted !== null && setup.cache.status !== 'hit') parts.push(untrusted);
  const denied = rec.egress.setup?.denied ?? [];
  if (denied.length > 0) {
    parts.push(
      `blocked hosts: ${denied
        .slice(0, 5)
        .map((d) => codeSpan(truncateEnd(redact(d.host), 100)))
        .join(', ')}${denied.length > 5 ? ', …' : ''}`,
    );
  }
  return parts.join(' · ');
}

/**
 * What setup went without on a tree that is not trusted (environment/setup-trust.ts), and why, in
 * one clause; null when it ran as committed.
 */
function untrustedLine(rec: EnvironmentRecord, redact: Redact): string | null {
  const trust = rec.setup.trust;
  if (trust === undefined || (trust.trusted && trust.withheld.length === 0)) return null;
  const what = [
    ...(trust.withheld.length > 0
      ? [`without the setup secrets ${trust.withheld.map((n) => codeSpan(n)).join(', ')}`]
      : []),
    ...(trust.scriptsOff ? ['with install scripts off'] : []),
  ];
  if (what.length === 0) return null;
  return `setup ran ${what.join(' and ')}: ${neutralizeInline(truncateEnd(redact(trust.reason), 400))}`;
}

/** The output of the setup command that failed (or the last one), for a failure's details. */
export function failedSetupOutput(rec: EnvironmentRecord): string {
  const failed = [...rec.setup.commands].reverse().find((c) => c.attempts > 0 && c.exitCode !== 0);
  const c = failed ?? [...rec.setup.commands].reverse().find((x) => x.attempts > 0);
  return c === undefined ? '' : `$ ${c.command}\n${c.output}`;
}

/** The pull request's "Environment" section. */
export function renderEnvironment(rec: EnvironmentRecord, redact: Redact = (t) => t): string {
  const out: string[] = [];
  out.push(`Image ${codeSpan(truncateEnd(redact(rec.image), 200))}.`);
  if (rec.runtimes.length > 0) {
    out.push('');
    out.push('| Runtime | Version | Chosen from |');
    out.push('| --- | --- | --- |');
    for (const r of rec.runtimes) {
      const note = r.note === undefined ? '' : ` — ${neutralizeInline(truncateEnd(redact(r.note), 200))}`;
      out.push(
        `| ${r.language} | ${tableCell(r.version)} | ${tableCell(neutralizeInline(truncateEnd(redact(r.source), 150)) + note)} |`,
      );
    }
  }
  out.push('');
  const setup = rec.setup;
  out.push(`**Setup:** ${neutralizeInline(truncateEnd(redact(setup.reason), 600))}.`);
  if (setup.commands.length > 0 && setup.cache.status !== 'hit') {
    out.push('');
    out.push('| Command | Why | Result | Time |');
    out.push('| --- | --- | --- | ---: |');
    for (const c of setup.commands) {
      const result =
        c.attempts === 0
          ? 'not run'
          : c.timedOut
            ? '⛔ timed out'
            : c.exitCode === 0
              ? `✅ exit 0${c.attempts > 1 ? ` (attempt ${c.attempts})` : ''}`
              : `❌ exit ${c.exitCode === null ? '?' : c.exitCode}`;
      out.push(
        `| ${tableCell(codeSpan(truncateEnd(redact(c.command), 200)))} | ${tableCell(neutralizeInline(truncateEnd(redact(c.reason), 200)))} | ${result} | ${c.attempts === 0 ? '—' : formatDuration(c.durationMs)} |`,
      );
    }
  }
  out.push('');
  out.push(
    `Cache: ${CACHE_WORDS[setup.cache.status]}${setup.cache.note === undefined ? '' : ` (${neutralizeInline(truncateEnd(redact(setup.cache.note), 200))})`}.`,
  );
  if (setup.secrets.length > 0)
    out.push(`Setup secrets provided: ${setup.secrets.map((s) => codeSpan(s)).join(', ')} (setup only).`);
  const untrusted = untrustedLine(rec, redact);
  if (untrusted !== null && setup.cache.status !== 'hit') {
    out.push(
      `${untrusted.charAt(0).toUpperCase()}${untrusted.slice(1)}. Only setup whose inputs are the base branch's gets the setup secrets and runs install scripts.`,
    );
  }
  const eg = rec.egress.setup;
  if (eg !== null) {
    const hostList = (hosts: readonly string[]): string =>
      hosts.map((h) => codeSpan(truncateEnd(redact(h), 100))).join(', ');
    // The hosts reached, from the recorded requests (the first MAX_LOGGED_REQUESTS), beside what was allowed.
    const reached = [...new Set(eg.requests.filter((r) => r.allowed).map((r) => r.host))];
    out.push(
      `Network during setup: ${eg.totals.allowed} request(s) through the egress proxy${reached.length === 0 ? '' : `, to ${hostList(reached)}`} (allowlist: ${eg.allowHosts.length === 0 ? 'empty' : hostList(eg.allowHosts)}); ${eg.totals.denied} refused.`,
    );
    if (eg.denied.length > 0) {
      out.push('');
      out.push(
        'Hosts the setup tried to reach that are not allowlisted (add them to `network.setup` if they are needed):',
      );
      out.push('');
      for (const d of eg.denied.slice(0, 20)) {
        out.push(
          `- ${codeSpan(truncateEnd(redact(d.host), 150))} port ${d.ports.join(', ')} — ${d.count}× (${neutralizeInline(truncateEnd(redact(d.reason), 150))})`,
        );
      }
      if (eg.denied.length > 20) out.push(`- … and ${eg.denied.length - 20} more`);
    }
  }
  out.push(
    rec.egress.agentAllowHosts.length === 0
      ? 'The agent worked with no network.'
      : `The agent could reach: ${rec.egress.agentAllowHosts.map((h) => codeSpan(truncateEnd(redact(h), 100))).join(', ')}.`,
  );
  return out.join('\n');
}

/** A failed setup's output for a comment (head and tail). */
export function setupOutputBlock(text: string, redact: Redact = (t) => t): string {
  return fenced(truncateMiddle(redact(text), 6000));
}
