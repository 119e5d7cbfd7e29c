import { constants as fsConstants } from 'node:fs';
import { chmod, lchown, lstat, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname, isAbsolute } from 'node:path';
import { EgressProxyError } from './errors.js';

/** sockaddr_un.sun_path holds 108 bytes including the terminating NUL on Linux (104 on macOS). */
const MAX_SOCKET_PATH_BYTES = 103;

function ourUid(): number | undefined {
  return process.getuid?.();
}

/**
 * Checks that `path` may be bound: an absolute path whose directory is ours and writable by no one
 * else (so no other user can swap the socket between our checks, our bind and our chmod), and which
 * is either free or a stale socket of ours (owned by our uid, nobody listening), which is removed.
 * Anything else there (a file, a link, a directory, a live socket, someone else's socket) is refused.
 *
 * The directory must be a host directory no sandbox can write: this module works on it by name.
 */
export async function prepareSocketPath(path: string): Promise<void> {
  if (!isAbsolute(path)) throw new EgressProxyError('socket_path', `socket path ${path} is not absolute`);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    throw new EgressProxyError(
      'socket_path',
      `socket path ${path} is longer than ${MAX_SOCKET_PATH_BYTES} bytes`,
    );
  }
  const uid = ourUid();
  const dir = dirname(path);
  const dirStat = await lstat(dir).catch((cause: unknown) => {
    throw new EgressProxyError('socket_path', `socket directory ${dir} cannot be read`, { cause });
  });
  if (!dirStat.isDirectory()) {
    throw new EgressProxyError('socket_path', `socket directory ${dir} is not a directory (or is a link)`);
  }
  if (uid !== undefined && dirStat.uid !== uid) {
    throw new EgressProxyError('socket_path', `socket directory ${dir} is not owned by this process's user`);
  }
  if ((dirStat.mode & (fsConstants.S_IWGRP | fsConstants.S_IWOTH)) !== 0) {
    throw new EgressProxyError('socket_path', `socket directory ${dir} is writable by group or others`);
  }
  let existing;
  try {
    existing = await lstat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new EgressProxyError('socket_path', `socket path ${path} cannot be read`, { cause: error });
  }
  if (!existing.isSocket()) {
    throw new EgressProxyError('socket_path', `socket path ${path} exists and is not a socket`);
  }
  if (uid !== undefined && existing.uid !== uid) {
    throw new EgressProxyError('socket_path', `socket path ${path} is a socket of another user`);
  }
  if (await isListening(path)) {
    throw new EgressProxyError('socket_path', `socket path ${path} is in use by a running server`);
  }
  await unlink(path);
}

function isListening(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(path);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', (error: NodeJS.ErrnoException) => {
      probe.destroy();
      // ECONNREFUSED: a socket file with no listener. Any other failure is not "stale": keep it.
      resolve(error.code !== 'ECONNREFUSED');
    });
  });
}

/**
 * Gives the freshly bound socket its mode (and group), then checks that the path is still our socket.
 * Until this resolves the server refuses every connection, so the umask-derived mode of the bind
 * never serves anyone.
 */
export async function secureSocket(path: string, mode: number, gid: number | undefined): Promise<void> {
  const uid = ourUid();
  const before = await lstat(path);
  if (!before.isSocket() || (uid !== undefined && before.uid !== uid)) {
    throw new EgressProxyError('listen_failed', `socket path ${path} is not the socket just bound`);
  }
  if (gid !== undefined) await lchown(path, before.uid, gid);
  await chmod(path, mode);
  const after = await lstat(path);
  if (!after.isSocket() || after.ino !== before.ino || (after.mode & 0o777) !== mode) {
    throw new EgressProxyError('listen_failed', `socket path ${path} changed while its mode was set`);
  }
}
