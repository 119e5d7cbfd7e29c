/**
 * Removes what setup left in the sandbox's IPC namespace, after the sweep: System V shared memory
 * segments, message queues and semaphore sets, and POSIX message queues, all of which outlive the
 * processes that made them (a segment or a queue holds whatever was written into it, a setup secret
 * too, for the agent to read). POSIX shared memory and semaphores are files in /dev/shm, which the
 * scan reads like any other folder.
 *
 * Each sandbox has an IPC namespace of its own (Docker's `IpcMode: private`; the local sandbox's
 * `unshare --ipc`), so every object in it was made by the sandbox's processes, and no other
 * sandbox or host process is touched. Run as the sandbox user, which owns them all: `ipcrm --all`
 * (util-linux, in the images and wherever the local sandbox runs, since its launcher needs
 * util-linux) removes every System V object the user may remove, and the POSIX queues are deleted
 * from the folders named as arguments, each only if it is a mqueue file system (the namespace's own,
 * see launch.ts). Then /proc/sysvipc and the folders are read again: anything left fails the step
 * (exit 3), so the agent phase never starts with an object of setup's.
 */
export const IPC_CLEANUP_SCRIPT = `
set -u
command -v ipcrm >/dev/null || { echo 'ipcrm is not installed' >&2; exit 4; }
ipcrm --all >/dev/null 2>&1
queues=()
for d in "$@"; do
  if [ -d "$d" ] && [ ! -L "$d" ] && [ "$(stat -f -c %T -- "$d" 2>/dev/null)" = mqueue ]; then
    find "$d" -mindepth 1 -maxdepth 1 -delete 2>/dev/null
    queues+=("$d")
  fi
done
left=()
for k in shm msg sem; do
  f=/proc/sysvipc/$k
  [ -e "$f" ] || continue
  n=$(($(wc -l <"$f") - 1))
  [ "$n" -gt 0 ] && left+=("$n System V $k")
done
for d in \${queues[@]+"\${queues[@]}"}; do
  n=$(find "$d" -mindepth 1 -maxdepth 1 | wc -l)
  [ "$n" -gt 0 ] && left+=("$n POSIX message queue(s) in $d")
done
[ \${#left[@]} -eq 0 ] || { echo "IPC objects of setup survived: \${left[*]}" >&2; exit 3; }
exit 0
`;
