import { z } from 'zod';
import type { ToolSpec } from '../../model/model.js';

/**
 * The tools of a review (`@agent review`): the agent reads the change and answers with comments on
 * its lines and one summary; it has no tool that edits, runs or pushes anything. A comment on a line
 * the diff does not show (GitHub would refuse the whole review) is kept for the review's body, and
 * the model is told so, to place it on a line of a hunk if it meant one.
 */
export const reviewCommentInput = z.object({
  path: z.string().min(1).describe('The file, as the diff names it.'),
  line: z.number().int().positive().describe("The line in the head's version of the file (the + side)."),
  body: z
    .string()
    .min(1)
    .max(20_000)
    .describe('The comment. A small fix goes in a ```suggestion block holding the replacement line(s).'),
});
export const finishReviewInput = z.object({
  summary: z
    .string()
    .min(1)
    .max(30_000)
    .describe('The review: what the change does, what is wrong or risky.'),
});

export type ReviewComment = z.infer<typeof reviewCommentInput>;

export const REVIEW_COMMENT = 'review_comment';
export const FINISH_REVIEW = 'finish_review';

export function reviewToolSpecs(): ToolSpec[] {
  const spec = (name: string, description: string, schema: z.ZodType): ToolSpec => {
    const inputSchema = z.toJSONSchema(schema, { target: 'draft-7' }) as Record<string, unknown>;
    delete inputSchema.$schema;
    return { name, description, inputSchema };
  };
  return [
    spec(
      REVIEW_COMMENT,
      'Comment on one line of the change (a line the diff shows on its + side). Call once per comment.',
      reviewCommentInput,
    ),
    spec(
      FINISH_REVIEW,
      'End the review with its summary; it is posted with your comments.',
      finishReviewInput,
    ),
  ];
}

/** What one review tool call did: the text the model reads back, and what it added to the review. */
export type ReviewToolResult =
  | { readonly kind: 'comment'; readonly content: string; readonly comment: ReviewComment }
  | { readonly kind: 'finish'; readonly content: string; readonly summary: string }
  | { readonly kind: 'error'; readonly content: string };

/** Validates and carries out one call; `onDiff` says whether a line is one the diff shows. */
export function reviewToolCall(
  name: string,
  input: unknown,
  onDiff: (path: string, line: number) => boolean,
): ReviewToolResult {
  if (name === REVIEW_COMMENT) {
    const parsed = reviewCommentInput.safeParse(input);
    if (!parsed.success) return { kind: 'error', content: `Invalid input: ${parsed.error.message}` };
    if (!onDiff(parsed.data.path, parsed.data.line)) {
      return {
        kind: 'comment',
        content:
          `Line ${parsed.data.line} of ${parsed.data.path} is not in the diff, so this comment goes in the ` +
          "review's body; to place it on a line, comment on one a hunk shows (added or context, + side).",
        comment: parsed.data,
      };
    }
    return { kind: 'comment', content: 'Comment added.', comment: parsed.data };
  }
  if (name === FINISH_REVIEW) {
    const parsed = finishReviewInput.safeParse(input);
    if (!parsed.success) return { kind: 'error', content: `Invalid input: ${parsed.error.message}` };
    return { kind: 'finish', content: 'Review posted.', summary: parsed.data.summary };
  }
  return { kind: 'error', content: `Unknown tool "${name}": use ${REVIEW_COMMENT} or ${FINISH_REVIEW}.` };
}
