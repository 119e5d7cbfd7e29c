import { MIN_FORM_LENGTH, secretForms } from './forms.js';

/**
 * The search for setup secrets left behind, shared by the Docker and the local sandbox's setup
 * phase: run after the sweep (no process of setup is left), as the sandbox user, in the sandbox.
 *
 * What it looks for: every form of every value (forms.ts), each split into lines (grep reads one
 * pattern a line, and a multi-line secret — a private key — is found line by line, as a file holding
 * one line of it is found). Lines too short to tell from other text are left out (SCAN_MIN_LINE).
 *
 * Where: in the folders it is given (every place a setup process can leave data that outlives it),
 *  - the content of every regular file (devices, FIFOs and sockets hold nothing once the processes
 *    that used them are gone, and reading a FIFO would block);
 *  - every path (a file or folder name: `touch /tmp/<secret>` writes no content), every symbolic
 *    link's target, and the extended attributes of each entry (tmpfs keeps `user.*` attributes);
 *  - a file or folder of the sandbox user that the user cannot read or search (a mode setup may put
 *    back later, so one the scan cannot read fails the phase too);
 * and the environment of every process left (the sandbox's init and main process, which never had a
 * secret).
 *
 * The values travel on standard input into a variable that is never exported: never on a command
 * line, in an environment or in a file.
 */

/**
 * A line of a value shorter than this is not looked for (a line of a private key can be short); a
 * line of any other form must be MIN_FORM_LENGTH long: a short string matches unrelated text, and a
 * hit fails the job.
 */
export const SCAN_MIN_LINE = 4;

/** The exit status of SECRET_SCAN_SCRIPT when something holds a value. */
export const SCAN_FOUND = 10;

/** What the scan looks for: the lines of every form of every value, each once. */
export function scanNeedles(values: readonly string[]): string[] {
  const needles = new Set<string>();
  for (const value of values) {
    for (const line of value.split('\n')) if (line.length >= SCAN_MIN_LINE) needles.add(line);
    for (const form of secretForms(value)) {
      for (const line of form.split('\n')) if (line.length >= MIN_FORM_LENGTH) needles.add(line);
    }
  }
  return [...needles];
}

/** The exit status of WALK_SCAN_PY when it found something and a file of the user's it cannot read. */
const WALK_FOUND_UNREADABLE = SCAN_FOUND + 1;

/**
 * What the scan looks for besides file contents, in one walk of the folders (Python: no common tool
 * lists extended attributes): each path (so a base64 form split into folders by its `/` is found
 * too), each link's target, the names and values of each entry's extended attributes (tmpfs keeps
 * `user.*` ones), and the user's own entries it cannot read (mode bits without read, or a folder
 * without search, for the user). Arguments: `strict` or `own` (see SECRET_SCAN_SCRIPT), then the
 * folders; standard input: the needles. Prints `N`, `L`, `X` and `U` records. Exit 0: nothing;
 * SCAN_FOUND: something; WALK_FOUND_UNREADABLE: something, a `U` among it; 3: a read error in
 * strict mode with no `U` to explain it. Folders are walked with an explicit stack (a deep tree
 * cannot exhaust the interpreter's recursion) and links are never followed. Run with `-I -S`: no
 * `usercustomize`, `sitecustomize` or `PYTHON*` variable setup left behind runs in the process that
 * holds the needles.
 */
const WALK_SCAN_PY = String.raw`
import errno, os, stat, sys
strict = sys.argv[1] == 'strict'
needles = [n for n in sys.stdin.buffer.read().split(b'\n') if n]
me = os.getuid()
out = sys.stdout.buffer
state = {'found': False, 'unreadable': False, 'errors': False}
def hit(b):
    return any(n in b for n in needles)
def record(kind, b):
    out.write(kind + b + b'\0')
    state['found'] = True
def fail(e):
    if e.errno not in (errno.ENOENT, errno.ENOTSUP, errno.ENODATA):
        state['errors'] = True
def xattrs(path, b):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        return fail(e)
    for name in names:
        try:
            value = os.getxattr(path, name, follow_symlinks=False)
        except OSError as e:
            fail(e)
            continue
        if hit(os.fsencode(name) + b'\0' + value):
            return record(b'X', b)
def read_only(path):
    # Nothing can have been written there, nor made readable again (the harness's unreadable bash).
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
stack = []
def visit(path, st):
    b = os.fsencode(path)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.fsencode(os.readlink(path))
        except OSError as e:
            fail(e)
            target = b''
        if hit(b) or hit(target):
            record(b'L', b + b' -> ' + target)
        return
    if hit(b):
        record(b'N', b)
    folder = stat.S_ISDIR(st.st_mode)
    if st.st_uid == me and (not st.st_mode & stat.S_IRUSR or (folder and not st.st_mode & stat.S_IXUSR)) and not read_only(path):
        record(b'U', b)
        state['unreadable'] = True
    xattrs(path, b)
    if folder:
        stack.append(path)
for top in sys.argv[2:]:
    try:
        visit(top, os.lstat(top))
    except OSError as e:
        fail(e)
while stack:
    folder = stack.pop()
    try:
        entries = list(os.scandir(folder))
    except OSError as e:
        fail(e)
        continue
    for entry in entries:
        try:
            visit(entry.path, entry.stat(follow_symlinks=False))
        except OSError as e:
            fail(e)
out.flush()
if strict and state['errors'] and not state['unreadable']:
    sys.exit(3)
if state['found']:
    sys.exit(${WALK_FOUND_UNREADABLE} if state['unreadable'] else ${SCAN_FOUND})
sys.exit(0)
`;

/**
 * The scan, a bash script. Arguments: `strict` (an error reading a file fails the scan: every file
 * in the folders is the sandbox user's, as in a container) or `own` (a host folder may hold others'
 * files, which the user cannot read either), then the folders. In both, a file or folder of the
 * user's that it cannot read is a holder: it may hold a value, and the user may make it readable
 * again (the errors reading it then stop nothing); but not on a read-only mount, where no value can
 * have been written and nothing can be made readable. Standard input: the needles, one a line. Prints
 * NUL-terminated records, a letter then a path: `C` content, `N` name, `L` a link
 * (`path -> target`), `X` an extended attribute, `U` not readable, `E` a pid whose environment holds
 * one. Exit 0: nothing found; SCAN_FOUND: something found (the records say what); else the scan
 * failed (stderr says why).
 */
export const SECRET_SCAN_SCRIPT = `
set -u
export LC_ALL=C
mode=$1
shift
for t in grep sed python3; do
  command -v "$t" >/dev/null || { echo "$t is not installed" >&2; exit 4; }
done
needles=$(cat)
[ -n "$needles" ] || exit 0
pats() { printf '%s\\n' "$needles"; }
dirs=()
for d in "$@"; do [ -d "$d" ] && [ ! -L "$d" ] && dirs+=("$d"); done
found=0
broken=0
if [ \${#dirs[@]} -gt 0 ]; then
  IFS= read -r -d '' walk_py <<'PY'
${WALK_SCAN_PY}
PY
  pats | python3 -I -S -c "$walk_py" "$mode" "\${dirs[@]}"
  s=$?
  strict=0
  [ "$mode" = strict ] && strict=1
  case $s in
    0) ;;
    ${SCAN_FOUND}) found=1 ;;
    ${WALK_FOUND_UNREADABLE}) found=1 strict=0 ;;
    *) broken=1 ;;
  esac
  q=-s
  [ "$strict" = 1 ] && q=
  grep -rlZF -D skip $q -f <(pats) -- "\${dirs[@]}" | sed -z 's/^/C/'
  s=("\${PIPESTATUS[@]}")
  [ "\${s[0]}" = 0 ] && found=1
  [ "\${s[0]}" -gt 1 ] && [ "$strict" = 1 ] && broken=1
  [ "\${s[1]}" = 0 ] || broken=1
fi
for e in /proc/[0-9]*/environ; do
  if grep -qsF -f <(pats) -- "$e"; then
    p=\${e#/proc/}
    printf 'E%s\\0' "\${p%/environ}"
    found=1
  fi
done
[ "$broken" = 0 ] || { echo 'could not read every file' >&2; exit 3; }
[ "$found" = 0 ] || exit ${SCAN_FOUND}
exit 0
`;

/** Every occurrence of a needle in `text` replaced by a mark (paths and errors name no value). */
export function hideNeedles(text: string, needles: readonly string[]): string {
  const spans: [number, number][] = [];
  for (const needle of needles) {
    for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + 1)) {
      spans.push([i, i + needle.length]);
    }
  }
  if (spans.length === 0) return text;
  spans.sort((a, b) => a[0] - b[0]);
  let out = '';
  let at = 0;
  for (const [s, e] of spans) {
    if (e <= at) continue;
    out += `${text.slice(at, Math.max(at, s))}[a setup secret]`;
    at = e;
  }
  return out + text.slice(at);
}

/** What a kept head and tail of output look like where bytes were left out (see HeadTail). */
const OMITTED = /\n\[… \d+ bytes of output omitted …\]\n/;

/**
 * The places the scan's output names, for a message (paths are untrusted text: every needle in them
 * is hidden). Output cut in the middle loses the records either side of the cut, which may hold a
 * piece of a value too short to be a needle. Whether anything was found is the scan's exit status,
 * never this list: a list that names none still means a holder when the status says so.
 */
export function scanHolders(output: string, needles: readonly string[]): string[] {
  const cut = OMITTED.exec(output);
  let records: string[];
  if (cut === null) {
    records = output.split('\0');
  } else {
    const head = output.slice(0, cut.index).split('\0');
    const tail = output.slice(cut.index + cut[0].length).split('\0');
    records = [...head.slice(0, -1), '…', ...tail.slice(1)];
  }
  const names: string[] = [];
  const out: string[] = [];
  for (const record of records) {
    if (record === '…') {
      out.push(record);
      continue;
    }
    const body = record.slice(1);
    if (body === '') continue;
    // A folder named by a value names everything under it: that folder is enough.
    const path = record.startsWith('L') ? body.slice(0, body.indexOf(' -> ')) : body;
    if (names.some((n) => path.startsWith(`${n}/`))) continue;
    switch (record[0]) {
      case 'C':
        out.push(body);
        break;
      case 'N':
        names.push(body);
        out.push(`${body} (its name)`);
        break;
      case 'L':
        out.push(`${body} (a link)`);
        break;
      case 'X':
        out.push(`${body} (an extended attribute)`);
        break;
      case 'U':
        out.push(`${body} (not readable by the sandbox user)`);
        break;
      case 'E':
        out.push(`environ:${body}`);
        break;
      default:
      // Not a record of the scan's (a line of an error): nothing to name.
    }
  }
  return [...new Set(out.map((h) => hideNeedles(h, needles)))];
}
