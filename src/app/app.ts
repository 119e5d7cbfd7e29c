import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { ApplicationFunction, Probot } from 'probot';
import { intakeJobOptions } from '../queue/queues.js';
import { parseTrigger, type Trigger } from './triggers.js';

export interface AppDeps {
  readonly appId: number;
  readonly intake: Queue<Trigger>;
  readonly logger: Logger;
  /** Hands the Probot instance out, for the intake processor's installation clients. */
  readonly onProbot?: (probot: Probot) => void;
}

/**
 * The webhook side of the App. It only parses a delivery and, if it may concern the App, stores it in
 * the intake queue under its delivery id; everything that needs the network happens in the intake
 * processor. So a delivery is acknowledged in about one Redis round trip, a redelivery collapses into
 * the first, and a delivery is acknowledged (2xx) only once it is durable: if Redis is down the
 * handler throws, Probot answers 500 and GitHub can redeliver.
 */
export function issueAgentApp(deps: AppDeps): ApplicationFunction {
  return (app) => {
    deps.onProbot?.(app);
    app.on(
      [
        'issues.labeled',
        'issues.unlabeled',
        'issue_comment.created',
        'pull_request_review_comment.created',
        'pull_request_review.submitted',
      ],
      async (context) => {
        const parsed = parseTrigger(context.name, context.id, context.payload, deps.appId);
        if (!parsed.ok) {
          deps.logger.info(
            { delivery: context.id, event: context.name, reason: parsed.reason },
            'delivery ignored',
          );
          return;
        }
        await deps.intake.add('trigger', parsed.trigger, intakeJobOptions(parsed.trigger));
      },
    );
    app.on(
      ['issue_comment.edited', 'issue_comment.deleted', 'pull_request_review_comment.edited'],
      (context) => {
        // Editing a comment into a mention would let anyone replay an old approval; only new comments act.
        deps.logger.debug(
          { delivery: context.id, event: `${context.name}.${context.payload.action}` },
          'delivery ignored: edited or deleted comment',
        );
      },
    );
  };
}
