/**
 * Webhook payloads start from a real example in @octokit/webhooks-examples and get the simulator's
 * state for every object it models; deliveries are signed and POSTed as GitHub's Hookshot does.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { WebhookEvent } from './types.js';

interface WebhookDefinition {
  readonly name: string;
  readonly actions: readonly string[];
  readonly examples: readonly Record<string, unknown>[];
}

const require = createRequire(import.meta.url);
let definitions: readonly WebhookDefinition[] | undefined;

function loadDefinitions(): readonly WebhookDefinition[] {
  // The package's main entry is api.github.com/index.json: one definition per event with its examples.
  definitions ??= require('@octokit/webhooks-examples') as WebhookDefinition[];
  return definitions;
}

/**
 * The example a payload starts from: among the event's examples with this action, the one an app
 * would receive (it has `installation`) and that belongs to a user account (no `organization`),
 * first in the package's order on ties. An action GitHub sends but the package has no example for
 * starts from the event's first example. Throws for an action the event does not have.
 */
export function selectExample(event: WebhookEvent, action: string): Record<string, unknown> {
  const definition = loadDefinitions().find((d) => d.name === event);
  if (definition === undefined) throw new Error(`github-sim: no webhook examples for event ${event}`);
  if (!definition.actions.includes(action))
    throw new Error(
      `github-sim: ${event} has no action ${action}; GitHub sends: ${definition.actions.join(', ')}`,
    );
  const score = (example: Record<string, unknown>): number =>
    ('installation' in example ? 2 : 0) + ('organization' in example ? 0 : 1);
  const candidates = definition.examples.filter((e) => e.action === action);
  const pool = candidates.length > 0 ? candidates : definition.examples.slice(0, 1);
  let best: Record<string, unknown> | undefined;
  for (const example of pool) if (best === undefined || score(example) > score(best)) best = example;
  if (best === undefined) throw new Error(`github-sim: no webhook example for ${event}`);
  return structuredClone(best);
}

/** `sha256=<hex>` of the exact body, as in X-Hub-Signature-256. */
export function signBody(secret: string, body: string, algorithm: 'sha256' | 'sha1' = 'sha256'): string {
  return `${algorithm}=${createHmac(algorithm, secret).update(body).digest('hex')}`;
}

export interface HookIdentity {
  readonly hookId: number;
  readonly appId: number;
  /** Hookshot's build suffix, e.g. `GitHub-Hookshot/3f2a9c1`. */
  readonly userAgent: string;
}

/** The headers GitHub sends with an app's webhook delivery, signed with `secret`. */
export function deliveryHeaders(
  name: string,
  id: string,
  body: string,
  secret: string,
  hook: HookIdentity,
): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': hook.userAgent,
    'x-github-event': name,
    'x-github-delivery': id,
    'x-github-hook-id': String(hook.hookId),
    'x-github-hook-installation-target-type': 'integration',
    'x-github-hook-installation-target-id': String(hook.appId),
    'x-hub-signature': signBody(secret, body, 'sha1'),
    'x-hub-signature-256': signBody(secret, body),
  };
}

export function newDeliveryId(): string {
  return randomUUID();
}

/** POSTs a body to the target and times it; a refused connection is status 0 with the error as body. */
export async function post(
  target: string,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
): Promise<{ status: number; body: string; ms: number }> {
  const started = performance.now();
  try {
    const response = await fetch(target, {
      method: 'POST',
      headers,
      body,
      signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]),
    });
    const text = await response.text();
    return { status: response.status, body: text, ms: Math.round(performance.now() - started) };
  } catch (error) {
    const message =
      error instanceof Error
        ? error.cause instanceof Error
          ? error.cause.message
          : error.message
        : String(error);
    return { status: 0, body: message, ms: Math.round(performance.now() - started) };
  }
}
