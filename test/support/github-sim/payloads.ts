/**
 * Webhook payloads: a real example for the event and action (see webhooks.ts), with every object the
 * simulator models replaced by its state. Building a payload also makes the state agree with the event
 * it reports (a `labeled` issue has the label, a `created` comment exists), so that what a receiver
 * reads back through the API matches what it was told.
 */
import {
  diffStatsSync,
  firstChangedFileSync,
  readCommitSync,
  readRefsSync,
  writePullRefSync,
} from './git.js';
import type { Host } from './rest.js';
import {
  isoNow,
  syncPull,
  type CommentRecord,
  type IssueRecord,
  type RepoRecord,
  type ReviewCommentRecord,
  type UserRecord,
} from './state.js';
import type { WebhookEvent, WebhookParams } from './types.js';
import { selectExample } from './webhooks.js';
import { nodeId, type JsonObject } from './wire.js';

export function buildPayload(host: Host, event: WebhookEvent, action: string, p: WebhookParams): JsonObject {
  const { world, wire } = host;
  const repo = world.requireRepo(p.owner, p.repo);
  const sender = world.ensureUser(p.sender);
  const payload = selectExample(event, action);
  // The simulator's accounts are users, and GitHub only sends these for organizations and enterprises.
  delete payload.organization;
  delete payload.enterprise;
  payload.action = action;
  // What changed is not modelled except for comment bodies (set below); GitHub always sends the key.
  if ('changes' in payload || action === 'edited') payload.changes = {};

  switch (event) {
    case 'issues': {
      const issue = world.requireIssue(p.owner, p.repo, p.issue ?? p.pull ?? 0);
      applyIssueAction(host, issue, action, sender, p.label, payload);
      payload.issue = wire.issue(issue);
      break;
    }
    case 'issue_comment': {
      const issue = world.requireIssue(p.owner, p.repo, p.issue ?? p.pull ?? 0);
      const comment = issueComment(host, issue, action, sender, p, payload);
      payload.issue = wire.issue(issue);
      payload.comment = wire.comment(comment);
      break;
    }
    case 'pull_request': {
      const issue = requirePull(host, repo, p);
      applyIssueAction(host, issue, action, sender, p.label, payload);
      if (action === 'converted_to_draft' && issue.pull !== null) issue.pull.draft = true;
      if (action === 'ready_for_review' && issue.pull !== null) issue.pull.draft = false;
      if (action === 'synchronize' && issue.pull !== null) {
        payload.before = issue.pull.previousHeadSha ?? issue.pull.base.sha;
        payload.after = issue.pull.head.sha;
      }
      payload.number = issue.number;
      payload.pull_request = pullJson(host, issue);
      break;
    }
    case 'pull_request_review': {
      const issue = requirePull(host, repo, p);
      const pull = issue.pull;
      if (pull === null) throw new Error('unreachable');
      if (action === 'submitted') {
        pull.reviews.push({
          id: world.nextId('review'),
          user: sender,
          body: p.comment?.body ?? '',
          state: 'COMMENTED',
          commitId: pull.head.sha,
          submittedAt: isoNow(),
        });
      }
      const review = pull.reviews.at(-1);
      if (review === undefined)
        throw new Error(`github-sim: #${issue.number} has no review to report as ${action}`);
      payload.review = wire.review(issue, review);
      payload.pull_request = pullJson(host, issue);
      break;
    }
    case 'pull_request_review_comment': {
      const issue = requirePull(host, repo, p);
      const comment = reviewComment(host, issue, action, sender, p, payload);
      payload.comment = wire.reviewComment(issue, comment);
      payload.pull_request = pullJson(host, issue);
      break;
    }
    case 'check_run': {
      const run = world.checkRuns.get(p.checkRun ?? 0);
      if (run?.repo !== repo)
        throw new Error(
          `github-sim: check_run.${action} needs checkRun, the id of a check run of ${p.owner}/${p.repo}`,
        );
      // The example's other keys (requested_action) are about actions the simulator does not model.
      delete payload.requested_action;
      const pulls = openPullsAtSync(repo, run.suite.headSha);
      const suiteRuns = repo.checkRuns.filter((r) => r.suite === run.suite);
      payload.check_run = wire.checkRun(run, pulls, wire.checkSuite(repo, run.suite, suiteRuns, pulls));
      break;
    }
    case 'workflow_run': {
      const suite = world.workflowRun(repo, p.workflowRun ?? 0);
      if (suite === undefined)
        throw new Error(
          `github-sim: workflow_run.${action} needs workflowRun, the id of a workflow run of ${p.owner}/${p.repo}`,
        );
      if (action === 'completed' && suite.completion === null) world.completeWorkflowRun(suite, sender);
      const pulls = openPullsAtSync(repo, suite.headSha);
      const head = readCommitSync(repo.bareDir, suite.headSha);
      payload.workflow = wire.workflow(repo, suite.workflow);
      payload.workflow_run = wire.workflowRun(repo, suite, world.checkRunsOf(suite), pulls, head);
      break;
    }
  }
  payload.repository = wire.repository(repo);
  payload.sender = wire.user(sender);
  payload.installation = {
    id: host.installationId,
    node_id: nodeId('IntegrationInstallation', host.installationId),
  };
  return payload;
}

function requirePull(host: Host, repo: RepoRecord, p: WebhookParams): IssueRecord {
  const issue = host.world.requireIssue(p.owner, p.repo, p.pull ?? p.issue ?? 0);
  if (issue.pull === null)
    throw new Error(
      `github-sim: #${issue.number} in ${repo.owner.login}/${repo.name} is an issue, not a pull request`,
    );
  return issue;
}

/**
 * The open pull requests of the repository whose head is `sha`, their shas first brought in line
 * with their branches (as pullJson does), by number.
 */
export function openPullsAtSync(repo: RepoRecord, sha: string): IssueRecord[] {
  const open = [...repo.issues.values()].filter((i) => i.pull !== null && i.state === 'open');
  if (open.length === 0) return [];
  const refs = readRefsSync(repo.bareDir);
  return open
    .filter((issue) => {
      syncPull(issue, refs);
      if (issue.pull === null) return false;
      writePullRefSync(repo.bareDir, issue.number, issue.pull.head.sha, refs);
      return issue.pull.head.sha === sha;
    })
    .sort((a, b) => a.number - b.number);
}

function pullJson(host: Host, issue: IssueRecord): JsonObject {
  const pull = issue.pull;
  if (pull === null) throw new Error('unreachable');
  if (issue.state === 'open') {
    const refs = readRefsSync(issue.repo.bareDir);
    syncPull(issue, refs);
    writePullRefSync(issue.repo.bareDir, issue.number, pull.head.sha, refs);
  }
  return host.wire.pull(issue, diffStatsSync(issue.repo.bareDir, pull.base.sha, pull.head.sha));
}

function applyIssueAction(
  host: Host,
  issue: IssueRecord,
  action: string,
  sender: UserRecord,
  labelName: string | undefined,
  payload: JsonObject,
): void {
  if (action === 'labeled' || action === 'unlabeled') {
    if (labelName === undefined) throw new Error(`github-sim: ${action} needs a label`);
    const label = host.world.ensureLabel(issue.repo, labelName);
    const at = issue.labels.findIndex((l) => l.id === label.id);
    if (action === 'labeled' && at < 0) issue.labels.push(label);
    if (action === 'unlabeled' && at >= 0) issue.labels.splice(at, 1);
    payload.label = host.wire.label(issue.repo, label);
  } else if (action === 'closed') {
    host.world.setState(issue, 'closed', sender);
  } else if (action === 'reopened') {
    host.world.setState(issue, 'open', sender);
  }
}

function issueComment(
  host: Host,
  issue: IssueRecord,
  action: string,
  sender: UserRecord,
  p: WebhookParams,
  payload: JsonObject,
): CommentRecord {
  const { world } = host;
  if (p.comment === undefined) throw new Error(`github-sim: issue_comment.${action} needs a comment`);
  if (p.comment.id === undefined) {
    if (action !== 'created') throw new Error(`github-sim: issue_comment.${action} needs comment.id`);
    return world.addComment(issue, sender, p.comment.body);
  }
  const comment = world.comments.get(p.comment.id);
  if (comment?.repo !== issue.repo || comment.issueNumber !== issue.number)
    throw new Error(`github-sim: no comment ${p.comment.id} on #${issue.number}`);
  if (action === 'edited') {
    if (p.comment.body !== comment.body) world.editComment(comment, p.comment.body);
    payload.changes = { body: { from: comment.edits.at(-2) ?? comment.body } };
  }
  if (action === 'deleted') world.deleteComment(comment);
  return comment;
}

function reviewComment(
  host: Host,
  issue: IssueRecord,
  action: string,
  sender: UserRecord,
  p: WebhookParams,
  payload: JsonObject,
): ReviewCommentRecord {
  const pull = issue.pull;
  if (pull === null) throw new Error('unreachable');
  if (p.comment === undefined)
    throw new Error(`github-sim: pull_request_review_comment.${action} needs a comment`);
  if (p.comment.id === undefined) {
    if (action !== 'created')
      throw new Error(`github-sim: pull_request_review_comment.${action} needs comment.id`);
    const path =
      p.path ?? firstChangedFileSync(issue.repo.bareDir, pull.base.sha, pull.head.sha) ?? 'README.md';
    const line = p.line ?? 1;
    return host.world.addReviewComment(issue, sender, p.comment.body, {
      path,
      line,
      commitId: pull.head.sha,
      diffHunk: `@@ -${line},1 +${line},1 @@`,
      inReplyToId: null,
    });
  }
  const comment = host.world.reviewComments.get(p.comment.id);
  if (comment?.repo !== issue.repo || comment.issueNumber !== issue.number)
    throw new Error(`github-sim: no review comment ${p.comment.id} on #${issue.number}`);
  if (action === 'edited') {
    if (p.comment.body !== comment.body) host.world.editComment(comment, p.comment.body);
    payload.changes = { body: { from: comment.edits.at(-2) ?? comment.body } };
  }
  if (action === 'deleted') {
    host.world.reviewComments.delete(comment.id);
    const at = pull.reviewComments.indexOf(comment);
    if (at >= 0) pull.reviewComments.splice(at, 1);
  }
  return comment;
}
