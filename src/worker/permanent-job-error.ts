/** A failure no retry can fix (refused by policy, not the App's PR, branch moved under us…). */
export class PermanentJobError extends Error {
  override readonly name: string = 'PermanentJobError';
}
