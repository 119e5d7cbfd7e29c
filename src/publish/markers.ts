/**
 * Hidden markers the App puts at the top of what it posts, to find its own PR and comments again.
 *
 * Values are percent-encoded (encodeURIComponent), so a marker never holds `>` or whitespace and no
 * value can end the HTML comment early; the finders decode them. A finder reads only the first line
 * of a body: a marker quoted further down (or typed by someone) is not the App's. Untrusted text the
 * App posts cannot contain a marker either: `neutralizeProse` breaks every `<!`. Still check that the
 * comment's author is the App before trusting a match.
 */

function firstLine(body: string): string {
  const trimmed = body.replace(/^\uFEFF/, '').trimStart();
  const nl = trimmed.indexOf('\n');
  return (nl === -1 ? trimmed : trimmed.slice(0, nl)).trim();
}

function decode(value: string): string | null {
  try {
    const v = decodeURIComponent(value);
    return v === '' ? null : v;
  } catch {
    return null;
  }
}

export function pullRequestMarker(conversationId: string): string {
  return `<!-- issue-agent:pr conversation=${encodeURIComponent(conversationId)} -->`;
}

/** The conversation id of a PR body the App wrote, or null. */
export function findPullRequestMarker(body: string): string | null {
  const m = /^<!-- issue-agent:pr conversation=(\S+) -->$/.exec(firstLine(body));
  return m?.[1] === undefined ? null : decode(m[1]);
}

export function progressMarker(jobId: string): string {
  return `<!-- issue-agent:progress job=${encodeURIComponent(jobId)} -->`;
}

/** The job id of a progress comment the App wrote, or null. */
export function findProgressMarker(body: string): string | null {
  const m = /^<!-- issue-agent:progress job=(\S+) -->$/.exec(firstLine(body));
  return m?.[1] === undefined ? null : decode(m[1]);
}

export function trajectoryMarker(conversationId: string, part: number): string {
  return `<!-- issue-agent:trajectory conversation=${encodeURIComponent(conversationId)} part=${part} -->`;
}

/** The conversation id and part number of a trajectory comment the App wrote, or null. */
export function findTrajectoryMarker(body: string): { conversationId: string; part: number } | null {
  const m = /^<!-- issue-agent:trajectory conversation=(\S+) part=([1-9]\d{0,5}) -->$/.exec(firstLine(body));
  if (m?.[1] === undefined || m[2] === undefined) return null;
  const conversationId = decode(m[1]);
  return conversationId === null ? null : { conversationId, part: Number(m[2]) };
}

/** The Action's claim of a CI round on one head of its pull request (src/action/ci-ledger.ts). */
export function ciRoundMarker(headSha: string, round: number, runId: string): string {
  return `<!-- issue-agent:ciround head=${encodeURIComponent(headSha)} round=${round} run=${encodeURIComponent(runId)} -->`;
}

export function findCiRoundMarker(body: string): { headSha: string; round: number; runId: string } | null {
  const m = /^<!-- issue-agent:ciround head=([0-9a-f]{7,64}) round=([1-9]\d{0,3}) run=(\S+) -->$/.exec(
    firstLine(body),
  );
  if (m?.[1] === undefined || m[2] === undefined || m[3] === undefined) return null;
  const runId = decode(m[3]);
  return runId === null ? null : { headSha: m[1], round: Number(m[2]), runId };
}

/** A kind of "no CI round" the Action said once on a pull request (an opaque id of the kind). */
export function ciSaidMarker(kindId: string): string {
  return `<!-- issue-agent:cisaid kind=${encodeURIComponent(kindId)} -->`;
}

export function findCiSaidMarker(body: string): string | null {
  const m = /^<!-- issue-agent:cisaid kind=(\S+) -->$/.exec(firstLine(body));
  return m?.[1] === undefined ? null : decode(m[1]);
}
