/**
 * Setup commands that leave a setup secret behind in disguise, for the setup-phase tests of both
 * sandboxes: each copy in a file of its own (so the scan's list of holders shows that each copy
 * alone is found), and the places the scan must report for them. The secret is read from an
 * environment variable inside the sandbox; the commands hold no value.
 */

/** One file per encoding in each place: its name, and how the copy is made (Python, `s` the secret). */
export const LEAK_ENCODINGS: Readonly<Record<string, string>> = {
  'leak-reversed': 's[::-1].encode()',
  'leak-hex': 'b.hex().encode()',
  'leak-HEX-of-reversed': 'r.hex().upper().encode()',
  'leak-base64': 'base64.b64encode(b"x" + b)',
  'leak-base64url-of-reversed': 'base64.urlsafe_b64encode(b"ab" + r)',
  'leak-base32': 'base64.b32encode(b"abc" + b)',
  'leak-base32-lower-of-reversed': 'base64.b32encode(b"abcd" + r).lower()',
};

const PY = String.raw`
import base64, ctypes, os, sys
s = os.environ[sys.argv[1]]
b = s.encode()
r = s[::-1].encode()
def write(path, data, mode=0o644):
    with open(path, 'wb') as f:
        f.write(data)
    os.chmod(path, mode)
`;

/**
 * A bash command (for `bash -c`) that writes every LEAK_ENCODINGS file into each of `places`, reading
 * the secret from `$variable` (the places are expanded by bash, the other paths by Python), plus the copies that are not file content, each only where asked:
 * a file named by the reversed secret (`name`), a folder named by its hex with a file in it
 * (`folder`), a link whose target holds its base32 (`link`), a literal copy (`literal`), a literal
 * copy in a file the user cannot read and in a folder it cannot search (`hidden`, `locked`), a file
 * whose extended attribute holds its base64 (`xattr`), and a POSIX message queue named by the
 * reversed secret.
 */
export function leakCommand(
  variable: string,
  places: readonly string[],
  extra: {
    readonly name?: string;
    readonly folder?: string;
    readonly link?: string;
    readonly literal?: string;
    readonly hidden?: string;
    readonly locked?: string;
    readonly xattr?: string;
    readonly mqueue?: boolean;
  },
): string {
  const lines = [PY, 'for place in sys.argv[2:]:'];
  for (const [file, expr] of Object.entries(LEAK_ENCODINGS)) {
    lines.push(`    write(os.path.join(place, ${JSON.stringify(file)}), ${expr})`);
  }
  // A path may start with $HOME or $TMPDIR: expanded in the sandbox.
  const q = (p: string): string => `os.path.expandvars(${JSON.stringify(p)})`;
  if (extra.name !== undefined) lines.push(`write(os.path.join(${q(extra.name)}, s[::-1]), b'')`);
  if (extra.folder !== undefined) {
    lines.push(`os.mkdir(os.path.join(${q(extra.folder)}, b.hex()))`);
    lines.push(`write(os.path.join(${q(extra.folder)}, b.hex(), 'inner'), b'nothing')`);
  }
  if (extra.link !== undefined) {
    lines.push(`os.symlink('/nowhere/' + base64.b32encode(b).decode(), ${q(extra.link)})`);
  }
  if (extra.literal !== undefined) lines.push(`write(${q(extra.literal)}, b)`);
  if (extra.hidden !== undefined) lines.push(`write(${q(extra.hidden)}, b, 0)`);
  if (extra.locked !== undefined) {
    lines.push(`os.mkdir(${q(extra.locked)})`, `write(os.path.join(${q(extra.locked)}, 'key'), b)`);
    lines.push(`os.chmod(${q(extra.locked)}, 0)`);
  }
  if (extra.xattr !== undefined) {
    lines.push(`write(${q(extra.xattr)}, b'nothing')`);
    lines.push(`os.setxattr(${q(extra.xattr)}, 'user.note', base64.b64encode(b))`);
  }
  if (extra.mqueue === true) {
    lines.push(
      'libc = ctypes.CDLL(None, use_errno=True)',
      'libc.mq_open.restype = ctypes.c_int',
      "fd = libc.mq_open(b'/' + r, os.O_CREAT | os.O_RDWR, 0o600, None)",
      "assert fd >= 0, 'mq_open: %d' % ctypes.get_errno()",
    );
  }
  return `python3 - ${variable} ${places.map((p) => `"${p}"`).join(' ')} <<'PY'\n${lines.join('\n')}\nPY`;
}

/**
 * A bash command that puts the secret in `$variable` into every kind of IPC object that outlives its
 * process: a System V shared memory segment, message queue and semaphore set, and a POSIX message
 * queue (its message the secret). Prints `ipc-made` when all exist.
 */
export function ipcLeakCommand(variable: string): string {
  const py = String.raw`
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
b = os.environ[sys.argv[1]].encode()
IPC_CREAT = 0o1000
shm = libc.shmget(0x1a2b3c, 4096, IPC_CREAT | 0o600)
assert shm >= 0, ctypes.get_errno()
libc.shmat.restype = ctypes.c_void_p
addr = libc.shmat(shm, None, 0)
ctypes.memmove(addr, b, len(b))
libc.shmdt(ctypes.c_void_p(addr))
msq = libc.msgget(0x1a2b3d, IPC_CREAT | 0o600)
assert msq >= 0, ctypes.get_errno()
buf = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + len(b))
ctypes.memmove(ctypes.addressof(buf), ctypes.byref(ctypes.c_long(1)), ctypes.sizeof(ctypes.c_long))
ctypes.memmove(ctypes.addressof(buf) + ctypes.sizeof(ctypes.c_long), b, len(b))
assert libc.msgsnd(msq, buf, len(b), 0) == 0, ctypes.get_errno()
assert libc.semget(0x1a2b3e, 1, IPC_CREAT | 0o600) >= 0, ctypes.get_errno()
mq = libc.mq_open(b'/ia-leak', os.O_CREAT | os.O_RDWR, 0o600, None)
assert mq >= 0, ctypes.get_errno()
assert libc.mq_send(mq, b, len(b), 0) == 0, ctypes.get_errno()
print('ipc-made')
`;
  return `python3 - ${variable} <<'PY'\n${py}\nPY`;
}

/** In the agent phase: what is left of the objects ipcLeakCommand made (empty output: nothing). */
export const IPC_LEFT_COMMAND = String.raw`
for k in shm msg sem; do tail -n +2 /proc/sysvipc/$k | sed "s/^/$k: /"; done
for d in /dev/mqueue /run/mqueue; do [ -d "$d" ] && find "$d" -mindepth 1 | sed 's/^/mqueue: /'; done
python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print('shmget-by-key:', libc.shmget(0x1a2b3c, 0, 0))
print('mq_open-by-name:', libc.mq_open(b'/ia-leak', os.O_RDONLY, 0, None))
"
`;

/**
 * A setup command that puts the secret in `variable` into the kernel's keyrings (the user keyring
 * and the session keyring, as `add_key` with KEY_SPEC_USER_KEYRING / KEY_SPEC_SESSION_KEYRING), where
 * no file holds it; prints `keys-made`. x86_64 and aarch64 system call numbers.
 */
export function keyringLeakCommand(variable: string): string {
  const py = String.raw`
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
add_key = {'x86_64': 248, 'aarch64': 217}[os.uname().machine]
b = os.environ[sys.argv[1]].encode()
for name, ring in ((b'ia-leak-user', -4), (b'ia-leak-session', -3)):
    k = libc.syscall(ctypes.c_long(add_key), b'user', name, b, ctypes.c_size_t(len(b)), ctypes.c_long(ring))
    assert k > 0, ctypes.get_errno()
print('keys-made')
`;
  return `python3 - ${variable} <<'PY'\n${py}\nPY`;
}

/** In the agent phase: each key keyringLeakCommand made that can still be found and read, one a line. */
export const KEYRING_LEFT_COMMAND = String.raw`python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
m = os.uname().machine
request_key, keyctl = {'x86_64': (249, 250), 'aarch64': (218, 219)}[m]
for name in (b'ia-leak-user', b'ia-leak-session'):
    for ring in (-4, -3, -5):
        k = libc.syscall(ctypes.c_long(request_key), b'user', name, None, ctypes.c_long(ring))
        if k > 0:
            buf = ctypes.create_string_buffer(256)
            n = libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(11), ctypes.c_long(k), buf, ctypes.c_long(256))
            if n > 0:
                print('readable:', name.decode(), buf.raw[:n].decode(errors='replace'))
print('keyring-checked')
PY`;
