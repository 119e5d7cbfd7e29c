export type EgressProxyErrorCode =
  /** An option is out of range or malformed (a host pattern, a CIDR, a port, a limit). */
  | 'invalid_option'
  /** The socket path (or its directory) is not one the proxy may bind. */
  | 'socket_path'
  /** Binding or securing the socket failed. */
  | 'listen_failed';

/** The proxy could not start as asked. Raised by startEgressProxy, never while serving requests. */
export class EgressProxyError extends Error {
  override readonly name = 'EgressProxyError';
  constructor(
    readonly code: EgressProxyErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
