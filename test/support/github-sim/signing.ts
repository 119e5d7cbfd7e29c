/**
 * Commit signatures: GitHub signs the commits it makes for the git database API with its own key
 * (web-flow) and reports `verification` for every commit. The simulator signs with a per-simulator
 * secret in a PGP-armoured envelope, so that a commit keeps its verification wherever it is copied
 * (a fork, a clone pushed back): `valid` when the signature is the simulator's, `unknown_key` for any
 * other signature (nobody's key is registered here), `unsigned` without one.
 */
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { git } from './git.js';
import { FULL_SHA, MemoTable } from './object-memo.js';

export interface Verification {
  readonly verified: boolean;
  readonly reason: 'valid' | 'unsigned' | 'unknown_key';
  readonly signature: string | null;
  readonly payload: string | null;
  readonly verified_at: string | null;
}

export interface Person {
  readonly name: string;
  readonly email: string;
  /** Epoch seconds. */
  readonly at: number;
  /** `+0000` form. */
  readonly tz: string;
}

const BEGIN = '-----BEGIN PGP SIGNATURE-----';
const END = '-----END PGP SIGNATURE-----';

export class CommitSigner {
  constructor(private readonly secret: string) {}

  private sign(payload: string): string {
    const mac = createHmac('sha256', this.secret).update(payload).digest('base64');
    return `${BEGIN}\n\nwsBcBAABCAAQBQJnAAAA${mac}\n=sim0\n${END}\n`;
  }

  /**
   * Writes a commit object (signed with the simulator's key when `sign`) into the repository and
   * returns its sha. `message` is stored as given plus a final newline when it lacks one.
   */
  async write(
    bareDir: string,
    c: {
      tree: string;
      parents: readonly string[];
      author: Person;
      committer: Person;
      message: string;
      sign: boolean;
      /** A signature the client made (git/create-commit's `signature`), stored as given. */
      signature?: string | undefined;
    },
  ): Promise<string> {
    const header = [
      `tree ${c.tree}`,
      ...c.parents.map((p) => `parent ${p}`),
      `author ${c.author.name} <${c.author.email}> ${c.author.at} ${c.author.tz}`,
      `committer ${c.committer.name} <${c.committer.email}> ${c.committer.at} ${c.committer.tz}`,
    ];
    const message = c.message.endsWith('\n') ? c.message : `${c.message}\n`;
    const payload = `${header.join('\n')}\n\n${message}`;
    let text = payload;
    const armoured = c.signature ?? (c.sign ? this.sign(payload) : undefined);
    if (armoured !== undefined) {
      const signature = armoured.trimEnd().split('\n').join('\n ');
      text = `${header.join('\n')}\ngpgsig ${signature}\n\n${message}`;
    }
    return (await gitStdin(bareDir, ['hash-object', '-t', 'commit', '-w', '--stdin'], text)).trim();
  }

  /** The verification of a raw commit object (`git cat-file commit`), as GitHub reports it. */
  verify(raw: string, at: string): Verification {
    const split = raw.indexOf('\n\n');
    const headerText = split < 0 ? raw : raw.slice(0, split);
    const message = split < 0 ? '' : raw.slice(split + 2);
    const lines = headerText.split('\n');
    const kept: string[] = [];
    let signature: string[] | null = null;
    let inSig = false;
    for (const line of lines) {
      if (line.startsWith('gpgsig ') || line.startsWith('gpgsig-sha256 ')) {
        signature = [line.slice(line.indexOf(' ') + 1)];
        inSig = true;
      } else if (inSig && line.startsWith(' ')) {
        signature?.push(line.slice(1));
      } else {
        inSig = false;
        kept.push(line);
      }
    }
    if (signature === null)
      return { verified: false, reason: 'unsigned', signature: null, payload: null, verified_at: null };
    const payload = `${kept.join('\n')}\n\n${message}`;
    const text = `${signature.join('\n')}\n`;
    const valid = text === this.sign(payload);
    return {
      verified: valid,
      reason: valid ? 'valid' : 'unknown_key',
      signature: text,
      payload,
      verified_at: valid ? at : null,
    };
  }
}

/**
 * The raw commit object, or null when `sha` names no commit. `env` may point at a push's quarantine;
 * what is read there is not remembered (the push may yet be refused), what is read from the
 * repository itself is, by full sha.
 */
export async function rawCommit(
  bareDir: string,
  sha: string,
  env: Record<string, string> = {},
): Promise<string | null> {
  const keep = FULL_SHA.test(sha) && Object.keys(env).length === 0;
  const known = keep ? rawCommits.of(bareDir).get(sha) : undefined;
  if (known !== undefined) return known;
  let raw: string;
  try {
    raw = await git(bareDir, ['cat-file', 'commit', sha], env);
  } catch {
    return null;
  }
  return keep ? rawCommits.of(bareDir).set(sha, raw) : raw;
}

const rawCommits = new MemoTable<string>(2000);

/** Runs git with `input` on its stdin and an environment of its own. */
export function gitStdin(
  cwd: string,
  args: readonly string[],
  input: string | Buffer,
  extraEnv: Record<string, string> = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      args,
      {
        cwd,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? '/tmp',
          GIT_CONFIG_NOSYSTEM: '1',
          LC_ALL: 'C',
          ...extraEnv,
        },
        maxBuffer: 64 * 1024 * 1024,
      },
      (error: Error | null, stdout: string) => {
        if (error !== null) reject(error);
        else resolve(stdout);
      },
    );
    child.stdin?.end(input);
  });
}
