/**
 * The stable address of a run: the run server's page for it (src/server), which shows every event to
 * whoever may read the repository, and whose JSON is at `/api/runs/<job>` and `/api/runs/<job>/events`.
 * PR bodies and progress comments link here.
 */
export function trajectoryUrl(publicUrl: string, jobId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/runs/${encodeURIComponent(jobId)}`;
}
