/** Refusals in GitHub's error shape, shared by the REST handlers and the logic they have in common with the test-facing methods. */

/** A refusal in GitHub's error shape; `extra` adds fields such as `errors`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

export function notFound(): HttpError {
  return new HttpError(404, 'Not Found');
}

export function validationFailed(errors: readonly Record<string, unknown>[]): HttpError {
  return new HttpError(422, 'Validation Failed', { errors });
}
