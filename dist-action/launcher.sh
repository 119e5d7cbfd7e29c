#!/usr/bin/env bash
# The isolated local sandbox's launcher (see launch.ts, which describes the view it builds): one
# program in three stages, each started as
#
#   bash --noprofile --norc -c "<this file's text>" <name> <stage> <arguments…>
#
#   setup   the sandbox's init (name ia-setup): builds the view, starts `layer`, stays until the host
#           closes its standard input or the holders are gone;
#   layer   (ia-holders) starts the two holders and ends when either does;
#   holder  (ia-holder-agent, ia-holder-harness: launch.ts finds each holder by this name) pid 1 of
#           one side's process namespace, which that side's shells enter.
#
# The host reads this file once at start and passes its text, never its path: inside the sandbox the
# package's folder may be masked, hidden or covered by a private /tmp. Each stage starts the next with
# the same text ($BASH_EXECUTION_STRING; `bash launcher.sh <stage> …` works too, reading the file).
# Everything the host knows (ids, paths, the ready token) arrives as arguments, checked before
# anything is mounted, and is never evaluated as shell source.
#
# Any failure ends the stage with exit code 97 and `ia-sandbox: <reason>` on stderr: the sandbox
# never runs with less isolation than it was asked for.
set -u

fail() {
  printf 'ia-sandbox: %s\n' "$*" >&2
  exit 97
}

# A number: a uid, gid or size.
need_number() { # what value
  [[ $2 =~ ^[0-9]+$ ]] || fail "$1 is not a number: $2"
}

# A path in the sandbox's private /run, without `.`, `..` or empty parts: what the setup makes there
# is covered by nothing and covers nothing of the host's.
need_run_path() { # what value
  case $2 in /run/?*) ;; *) fail "$1 is not a path under /run: $2" ;; esac
  case $2/ in */./* | */../* | *//*) fail "$1 is not a plain path: $2" ;; esac
}

need_flag() { # what value
  case $2 in 0 | 1) ;; *) fail "$1 is not 0 or 1: $2" ;; esac
}

need_token() { # what value
  [[ $2 =~ ^[A-Za-z0-9_.-]+$ ]] || fail "$1 is not a plain word: $2"
}

# This program's text, which the next stage is started with.
own_text() {
  if [ -n "${BASH_EXECUTION_STRING-}" ]; then
    self=$BASH_EXECUTION_STRING
  else
    self=$(<"${BASH_SOURCE[0]}") || fail 'could not read the launcher'
  fi
}

# The sandbox's init: pid 1 of the new PID namespace, root in the namespaces it builds (in its own
# user namespace for `userns`, real root for `privileged`: the `root` and `sudo` mechanisms). Builds
# the view described at Confinement (launch.ts), starts `layer` (the holders, which shells enter) as
# the sandbox user, then stays until its standard input ends — the host closing the sandbox — or the
# holders are gone. When it exits the kernel kills everything else in the PID namespace.
#
# Arguments: owner uid and gid of private folders as the init sees the sandbox user; mode (userns |
# privileged); the sandbox user's uid and gid; the word the holders report when ready; where the
# egress folder is bound (LOCAL_EGRESS_MOUNT); where the harness's bash goes (LOCAL_HARNESS_BASH);
# then directives: `W/path` writable, `H/path` hidden, `M/path` masked, `P/path` private,
# `Q/bytes` the workspace (the first writable folder) as a private tmpfs of that size, filled with
# the host folder's content, `E/path` the egress proxy's socket folder, bound read-only.
#
# /sys and `lo` are best effort (a missing `ip` leaves `lo` down: no network at all, which is
# stricter).
stage_setup() {
  [ "$#" -ge 8 ] ||
    fail 'usage: setup <owner uid> <owner gid> <userns|privileged> <uid> <gid> <ready word> <egress mount> <harness bash> [directive…]'
  ouid=$1 ogid=$2 mode=$3 uid=$4 gid=$5 ready=$6 egress_mount=$7 harness_bash=$8
  shift 8
  need_number 'the owner uid' "$ouid"
  need_number 'the owner gid' "$ogid"
  case $mode in userns | privileged) ;; *) fail "unknown mode: $mode" ;; esac
  need_number 'the uid' "$uid"
  need_number 'the gid' "$gid"
  need_token 'the ready word' "$ready"
  need_run_path 'the egress mount' "$egress_mount"
  need_run_path "the harness's bash" "$harness_bash"
  case $harness_bash in /run/?*/?*) ;; *) fail "the harness's bash needs a folder of its own: $harness_bash" ;; esac
  W=() H=() M=() P=() FD=() quota='' egress='' efd=''
  for a in "$@"; do
    case $a in
      Q/*)
        quota=${a#Q/}
        [[ $quota =~ ^[1-9][0-9]*$ ]] || fail "not a workspace size: $quota"
        ;;
      E/*) egress=${a#E} ;;
      W/*) W+=("${a#W}") ;;
      H/*) H+=("${a#H}") ;;
      M/*) M+=("${a#M}") ;;
      P/*) P+=("${a#P}") ;;
      *) fail "unknown directive: $a" ;;
    esac
  done
  own_text
  mount --make-rprivate / || fail 'could not make the mounts private'

  # Writable folders: a mount of their own (so making everything read-only below leaves them), held
  # open so that they can be put back where a private tmpfs covers them.
  for w in "${W[@]}"; do
    if [ -L "$w" ] || [ ! -d "$w" ]; then fail "$w is not a folder"; fi
    mount --bind -- "$w" "$w" || fail "could not bind $w"
    exec {f}<"$w" || fail "could not open $w"
    FD+=("$f")
  done

  # The egress socket's folder, opened now: the private /tmp and /run below cover where it lives.
  if [ -n "$egress" ]; then
    if [ -L "$egress" ] || [ ! -d "$egress" ]; then fail "$egress is not a folder"; fi
    exec {efd}<"$egress" || fail "could not open $egress"
  fi

  # Hidden paths. One this user cannot reach is skipped: the sandbox user, with no more rights
  # than the init, cannot reach it either.
  for h in "${H[@]}"; do
    if [ -L "$h" ] || [ ! -e "$h" ]; then continue; fi
    if [ -d "$h" ]; then
      mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=0555 ia-hidden "$h" || fail "could not hide $h"
    else
      { mount --bind /dev/null "$h" && mount -o remount,bind,ro "$h"; } || fail "could not hide $h"
    fi
  done

  # Masked folders: an empty tmpfs each, writable by this init only until the workspace and the
  # writable folders under it have their mount points (then read-only, below). Opened folders above
  # (fd) keep their content reachable for the binds; nothing else of the host's content is.
  masked=()
  for m in "${M[@]}"; do
    if [ -L "$m" ] || [ ! -d "$m" ]; then fail "$m is not a folder"; fi
    mount -t tmpfs -o nosuid,nodev,noexec,size=1m,mode=0755 ia-masked "$m" || fail "could not mask $m"
    masked+=("$m")
  done

  # Private areas first: what they cover (sockets under /run, other jobs' files under /tmp) is
  # never reached, so it needs nothing below.
  fresh=()
  for d in /tmp /var/tmp /dev/shm /run; do
    if [ -L "$d" ] || [ ! -d "$d" ]; then continue; fi
    m=1777
    [ "$d" = /run ] && m=0755
    mount -t tmpfs -o "nosuid,nodev,mode=$m" ia-private "$d" || fail "could not mount a private $d"
    fresh+=("$d")
  done
  if mount -t sysfs -o ro,nosuid,nodev,noexec ia-sysfs /sys 2>/dev/null; then fresh+=(/sys); fi

  # The message queues of the sandbox's own IPC namespace, where they can be listed (and removed
  # after setup): over /dev/mqueue (the host's, of another namespace), or in the private /run
  # (LOCAL_MQUEUE_DIRS in launch.ts). A kernel with no mqueue file system has no POSIX message
  # queues either.
  if grep -qw mqueue /proc/filesystems; then
    mq=''
    if [ -d /dev/mqueue ] && [ ! -L /dev/mqueue ]; then
      mq=/dev/mqueue
    else
      for k in "${fresh[@]}"; do [ "$k" = /run ] && mq=/run/mqueue && mkdir -p /run/mqueue; done
    fi
    if [ -n "$mq" ]; then
      mount -t mqueue -o nosuid,nodev,noexec ia-mqueue "$mq" || fail "could not mount the sandbox's message queues"
      fresh+=("$mq")
    fi
  fi

  # Everything else read-only. Only per-mount flags change (remount,bind): the host's mounts stay as
  # they are. Skipped: the namespace's own /proc and what it covers, the private areas and what they
  # cover, the writable folders; a mount whose path now leads elsewhere (covered) needs nothing.
  # mountinfo writes space, tab, newline and backslash in a path as \ooo (octal): %b decodes \0ooo.
  while IFS=' ' read -r _ _ _ _ mp _; do
    printf -v mp '%b' "${mp//\\/\\0}"
    skip=0
    for k in /proc "${fresh[@]}" "${masked[@]}"; do
      case $mp in "$k" | "$k"/*) skip=1 ;; esac
    done
    for w in "${W[@]}"; do [ "$mp" = "$w" ] && skip=1; done
    [ "$skip" = 1 ] && continue
    [ -e "$mp" ] || continue
    # Tried without asking first whether the path is still a mount point (a process each, for every
    # mount of the host): a remount of a path that is not one fails, and only then is it asked. A
    # path no longer a mount point (covered, or its folder removed on the host meanwhile: a container
    # that stopped) cannot reach that mount any more: nothing to make read-only.
    if ! err=$(mount -o remount,bind,ro -- "$mp" 2>&1); then
      if [ -e "$mp" ] && mountpoint -q -- "$mp"; then fail "could not make $mp read-only: $err"; fi
    fi
  done </proc/self/mountinfo

  for i in "${!W[@]}"; do
    w=${W[$i]} f=${FD[$i]}
    if [ "$i" = 0 ] && [ -n "$quota" ]; then
      # The workspace with a quota: a sized tmpfs over it, filled from the host folder (still open as
      # fd f), owned by the sandbox user. The host folder is only read, and only now.
      { mkdir -p -- "$w" && mount -t tmpfs -o "nosuid,nodev,size=$quota,mode=0755,uid=$ouid,gid=$ogid" ia-workspace "$w"; } ||
        fail "could not make the workspace $w"
      cp -a --no-preserve=ownership "/proc/self/fd/$f/." "$w/" 2>/dev/null ||
        fail "the workspace does not fit its size limit ($quota bytes)"
      chown -R "$ouid:$ogid" -- "$w" || fail "could not hand the workspace to the sandbox user"
    elif [ "$(stat -c %d:%i -- "$w" 2>/dev/null)" != "$(stat -L -c %d:%i "/proc/self/fd/$f")" ]; then
      { mkdir -p -- "$w" && mount -c --rbind "/proc/self/fd/$f" "$w"; } || fail "could not bind $w"
    fi
    exec {f}<&-
  done
  # A masked folder under a private area (/tmp…) is covered by it already: its path is a plain folder
  # of that area now (same device as its parent), though mountinfo still lists the covered mask.
  for m in "${masked[@]}"; do
    [ "$(stat -c %d -- "$m")" != "$(stat -c %d -- "$m/..")" ] || continue
    mount -o remount,bind,ro -- "$m" || fail "could not make $m read-only"
  done

  # HOME and TMPDIR: an existing folder gets a private tmpfs; a missing one is created (with the
  # folders above it that were missing), which only succeeds inside a private tmpfs.
  for p in "${P[@]}"; do
    if [ -d "$p" ]; then
      mount -t tmpfs -o "nosuid,nodev,mode=0700,uid=$ouid,gid=$ogid" ia-home "$p" || fail "could not make $p private"
    elif [ -e "$p" ]; then
      fail "$p is not a folder"
    else
      top=$p q=$p
      while [ ! -e "$q" ]; do
        top=$q
        q=$(dirname -- "$q")
      done
      # Only the private folder itself needs mode 0700; the folders made above it are in a private
      # tmpfs and are handed to the sandbox user with it.
      # shellcheck disable=SC2174
      { mkdir -p -m 0700 -- "$p" && chown -R "$ouid:$ogid" -- "$top"; } || fail "could not create $p"
    fi
  done

  if [ -n "$egress" ]; then
    { mkdir -p -- "$egress_mount" && mount -c --bind "/proc/self/fd/$efd" "$egress_mount" &&
      mount -o remount,bind,ro,nosuid,nodev,noexec -- "$egress_mount"; } || fail "could not bind the egress folder"
    exec {efd}<&-
  fi

  ip link set lo up 2>/dev/null || true

  # The harness's bash: a copy the sandbox user may run but not read, on a read-only mount (no chmod
  # back). The kernel makes a process started from a file its user cannot read non-dumpable: nothing
  # of that user may trace it or open its /proc entries, not even what a harness command runs.
  hb=${harness_bash%/*}
  case " ${fresh[*]} " in *" /run "*) ;; *) fail 'no private /run for the harness shell' ;; esac
  { mkdir -p -- "$hb" && mount -t tmpfs -o nosuid,nodev,size=16m,mode=0755 ia-harness "$hb" &&
    cp -L -- "$(command -v bash)" "$harness_bash" && chmod 0111 "$harness_bash" &&
    mount -o remount,bind,ro -- "$hb"; } || fail 'could not make the harness shell'

  # Two holders, each pid 1 of a process and mount namespace of its own, with a /proc of its own: the
  # agent's (its shells and everything they start) and the harness's (its shells). Neither side sees
  # a process of the other, so none of the agent's can name a harness process to trace, signal or
  # read it. The namespaces are made while this side still holds the capabilities to make them.
  layer_stage=(bash --noprofile --norc -c "$self" ia-holders layer "$uid" "$gid" "$ready")
  if [ "$mode" = userns ]; then
    "${layer_stage[@]}" 1 "${W[@]}" </dev/null &
  else
    drop=(setpriv "--reuid=$uid" "--regid=$gid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --)
    if "${drop[@]}" unshare --user --map-root-user -- sh -c 'echo 2 >/proc/sys/user/max_user_namespaces' 2>/dev/null; then
      "${drop[@]}" unshare --user --map-root-user -- "${layer_stage[@]}" 1 "${W[@]}" </dev/null &
    else
      "${layer_stage[@]}" 0 "${W[@]}" </dev/null &
    fi
  fi
  holder=$!
  # As pid 1, this shell inherits every orphan of the sandbox. bash reaps ended children between
  # commands, not while `read` blocks: the read gives up each second and a command runs, so orphans
  # that ended meanwhile are reaped (zombies would otherwise pile up until the sandbox ends).
  while :; do
    IFS= read -r -t 1 _
    rc=$?
    [ "$rc" -eq 0 ] && continue
    [ "$rc" -gt 128 ] || exit 0
    kill -0 "$holder" 2>/dev/null || exit 97
    /bin/true
  done
}

# Starts the two holders, the agent's and the harness's, and ends when either does.
# Arguments: uid, gid, the ready word, whether to layer (1/0), then the writable folders.
#
# Layered (1), it runs as root of a user namespace whose root is the sandbox user: it allows two
# more user namespaces below this one and makes them, one per holder, where the sandbox user is
# itself and not root; once both exist no further one can be made (the limit is this namespace's,
# which nothing below can raise: the shells have no capability here, and the holders live as long
# as the sandbox). Otherwise (a root host that cannot set the limit) it runs as root, and each
# holder drops to the sandbox user after its namespaces are made.
stage_layer() {
  [ "$#" -ge 4 ] || fail 'usage: layer <uid> <gid> <ready word> <0|1> [writable folder…]'
  uid=$1 gid=$2 ready=$3 layer=$4
  shift 4
  need_number 'the uid' "$uid"
  need_number 'the gid' "$gid"
  need_token 'the ready word' "$ready"
  need_flag 'the layer flag' "$layer"
  own_text
  if [ "$layer" = 1 ]; then
    echo 2 >/proc/sys/user/max_user_namespaces || fail 'could not forbid nested user namespaces'
    ns=(--user "--map-user=$uid" "--map-group=$gid") drop=()
  else
    ns=() drop=(setpriv "--reuid=$uid" "--regid=$gid" --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --)
  fi
  for role in agent harness; do
    unshare "${ns[@]}" --mount --pid --fork --mount-proc --kill-child -- "${drop[@]}" env -i "PATH=$PATH" \
      bash --noprofile --norc -c "$self" "ia-holder-$role" holder "$role" "$layer" "$ready" "$@" </dev/null &
  done
  wait -n
  exit 97
}

# A holder, as the sandbox user, pid 1 of its side's process namespace (the agent's or the
# harness's), which that side's shells enter: checks each writable folder is one for this user (a
# clear error rather than a shell that cannot write its workspace), reports `<ready word> <side>
# <layer flag>`, then waits with no descriptor of the init's (so nothing in the sandbox can keep the
# init's input open) and no child (a harness shell's sweep signals everything in its namespace), on
# a pipe only it holds, reaping the namespace's orphans as they end. As its namespace's init it
# cannot be killed from inside.
# Arguments: the side (agent/harness), whether nested user namespaces are forbidden (1/0), the ready
# word, then the writable folders.
stage_holder() {
  [ "$#" -ge 3 ] || fail 'usage: holder <agent|harness> <0|1> <ready word> [writable folder…]'
  role=$1 layer=$2 ready=$3
  shift 3
  case $role in agent | harness) ;; *) fail "unknown side: $role" ;; esac
  need_flag 'the layer flag' "$layer"
  need_token 'the ready word' "$ready"
  for w in "$@"; do
    if ! cd -- "$w" 2>/dev/null || [ ! -w . ]; then
      fail "$w is not a writable folder for the sandbox user (uid $(id -u))"
    fi
  done
  cd / || fail 'could not leave the writable folders'
  printf '%s %s %s\n' "$ready" "$role" "$layer"
  exec </dev/null >/dev/null 2>&1 {keep}<> <(:)
  while :; do read -r -u "$keep" _; done
}

stage=${1-}
[ "$#" -gt 0 ] && shift
case $stage in
  setup) stage_setup "$@" ;;
  layer) stage_layer "$@" ;;
  holder) stage_holder "$@" ;;
  *) fail "unknown stage '$stage' (setup, layer or holder)" ;;
esac
