/**
 * Aborted when the worker stops (BullMQ's `signal`) or a stop request (`@agent stop`) is seen:
 * `cancelled` is read from Redis every two seconds, as fix jobs do. `dispose` stops watching.
 */
export function watchStop(
  ctx: { readonly cancelled: () => Promise<string | null> },
  signal: AbortSignal | undefined,
): { readonly controller: AbortController; readonly dispose: () => void } {
  const controller = new AbortController();
  const onAbort = (): void => {
    controller.abort();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const poll = setInterval(() => {
    ctx.cancelled().then(
      (by) => {
        if (by !== null) controller.abort(`stopped by ${by}`);
      },
      () => undefined,
    );
  }, 2000);
  return {
    controller,
    dispose: () => {
      clearInterval(poll);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}

/** Read again after an await (TypeScript keeps a narrowing of `signal.aborted` across them). */
export function aborted(signal: AbortSignal): boolean {
  return signal.aborted;
}
