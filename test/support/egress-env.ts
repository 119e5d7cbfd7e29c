import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { AddressPolicy } from '../../src/sandbox/egress/address-policy.js';

/**
 * What a deployment on this machine sets so that setup reaches the npm registry. Here the registry
 * sits behind an inspecting proxy: its name resolves to an address in a range the egress proxy
 * refuses by default (203.0.113.0/24, a documentation range), and TLS is re-signed by a CA in the
 * host's bundle. A corporate deployment is in the same position, so both are deployment settings
 * (ISSUE_AGENT_EGRESS_ALLOW_CIDRS, ISSUE_AGENT_EXTRA_CA_CERTS); the tests set them the same way.
 */
export async function registryDeployment(host = 'registry.npmjs.org'): Promise<{
  readonly allowCidrs: string[];
  readonly extraCaPem: string | null;
}> {
  const addresses = await lookup(host, { all: true }).catch(() => []);
  const allowCidrs = addresses
    .filter((a) => !new AddressPolicy().check(a.address).ok)
    .map((a) => (a.family === 6 ? `${a.address}/128` : `${a.address}/32`));
  const caFile = process.env.NODE_EXTRA_CA_CERTS;
  let extraCaPem: string | null = null;
  if (caFile !== undefined && caFile !== '') {
    try {
      extraCaPem = readFileSync(caFile, 'utf8');
    } catch {
      extraCaPem = null;
    }
  }
  return { allowCidrs, extraCaPem };
}

/** registryDeployment as the App's and the Action's environment variables. */
export async function registryDeploymentEnv(): Promise<Record<string, string>> {
  const d = await registryDeployment();
  return {
    ISSUE_AGENT_EGRESS_ALLOW_CIDRS: d.allowCidrs.join(','),
    ...(process.env.NODE_EXTRA_CA_CERTS === undefined
      ? {}
      : { ISSUE_AGENT_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS }),
  };
}
