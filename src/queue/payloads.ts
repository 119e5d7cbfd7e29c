import { z } from 'zod';
import { repoConfigSchema } from '../config/repo-config.js';
import { triggerSchema } from '../app/triggers.js';

/**
 * A fix job: everything a worker needs to resolve one issue, and nothing secret (tokens are minted
 * by the worker from the App's key; the model key lives in the worker's environment). Validated when
 * enqueued and again when a worker takes it, so a payload from an older or newer App version fails
 * with a clear reason instead of half-running.
 */
export const fixJobSchema = z.object({
  v: z.literal(1),
  kind: z.literal('fix-issue'),
  installationId: z.number().int().positive(),
  repo: z.object({
    id: z.number().int().positive(),
    owner: z.string().min(1),
    name: z.string().min(1),
  }),
  issue: z.object({ number: z.number().int().positive(), title: z.string() }),
  /** Cleaned maintainer instructions (text after the handle), oldest first. */
  instructions: z.array(z.string()),
  trigger: z.object({
    kind: z.enum(['label', 'mention']),
    deliveryId: z.string(),
    sender: z.object({ login: z.string(), id: z.number().int() }),
    commentId: z.number().int().positive().nullable(),
  }),
  /** The repo's settings at trigger time, so a retry runs under the rules it was queued under. */
  config: z.object({
    ...repoConfigSchema.shape,
    label: z.string(),
    handle: z.string(),
  }),
  progressCommentId: z.number().int().positive().nullable(),
  requestedAt: z.string(),
});
export type FixJob = z.infer<typeof fixJobSchema>;

export const intakeJobSchema = triggerSchema;
