/**
 * The kernel's keyrings, for the local sandbox's setup phase: a setup process can put a secret into
 * its user keyring (`add_key(…, KEY_SPEC_USER_KEYRING)`) or its session keyring, where a key outlives
 * the process, holds no file a scan could read, and is read back by any later process of the same
 * user, the agent's shells among them. Docker's default seccomp profile refuses the key system calls
 * in containers; the local sandbox has no such filter, so setup's keys are removed after the sweep.
 *
 * Which keys are setup's: those the sandbox user can see in /proc/keys after setup that it could not
 * see before (KEYRING_LIST first, KEYRING_REMOVE after, given that list). Only those are invalidated:
 * where the sandbox user is the runner's own user in the host's user namespace (the `sudo` and
 * `root` mechanisms), its user keyring is the host user's, and keys that were there before are not
 * setup's to remove. Then /proc/keys is read again: a new key left (an architecture whose system call
 * number is not known here, a key that refused) fails the step, exit 3.
 *
 * Python's ctypes reaches `keyctl` without the keyutils package, which runners do not have; it runs
 * with `-I -S`, so nothing setup left in a Python path runs in it.
 */
const KEYRING_PY = String.raw`
import ctypes, os, sys
def keys():
    # id -> (flags, type); a keyring holds links, not a payload, so only other types are setup's data.
    out = {}
    try:
        with open('/proc/keys') as f:
            for line in f:
                p = line.split()
                if len(p) >= 8:
                    out[p[0]] = (p[1], p[7])
    except OSError:
        pass
    return out
if sys.argv[1] == 'list':
    print(' '.join(sorted(keys())))
    sys.exit(0)
before = set(sys.argv[2:])
new = [k for k, (flags, kind) in keys().items() if k not in before and kind != 'keyring']
# keyctl(2)'s number: x86_64, aarch64 and riscv64 (the generic table), i386, arm.
number = {'x86_64': 250, 'aarch64': 219, 'riscv64': 219, 'i686': 288, 'i386': 288, 'armv7l': 311}.get(os.uname().machine)
if new and number is not None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for key in new:
        serial = ctypes.c_long(int(key, 16))
        # KEYCTL_INVALIDATE (21), else KEYCTL_REVOKE (3): either makes the key unreadable. Keyrings
        # are left alone, so the process keeps possessing (and may invalidate) what they link.
        if libc.syscall(ctypes.c_long(number), ctypes.c_long(21), serial) != 0:
            libc.syscall(ctypes.c_long(number), ctypes.c_long(3), serial)
# An invalidated or revoked key lingers in /proc/keys until the collector runs, flagged i, R or D.
alive = [k for k, (flags, kind) in keys().items() if k in new and not set(flags) & set('RDi')]
if alive:
    sys.stderr.write('keys of setup survived in the kernel keyrings: %d\n' % len(alive))
    sys.exit(3)
sys.exit(0)
`;

/** Prints the ids of the keys the sandbox user can see, space separated. */
export const KEYRING_LIST_ARGS = ['-I', '-S', '-c', KEYRING_PY, 'list'] as const;

/** Invalidates every key not among `before` (KEYRING_LIST's output); exit 3 if one survives. */
export function keyringRemoveArgs(before: readonly string[]): string[] {
  return ['-I', '-S', '-c', KEYRING_PY, 'remove', ...before];
}
