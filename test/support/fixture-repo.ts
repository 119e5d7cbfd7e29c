import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'repos');

export interface FixtureRepo {
  readonly dir: string;
  readonly patch: string;
  cleanup(): void;
}

/** Copies a fixture project into a fresh temp dir and commits it, as a user's checkout would be. */
export type FixtureName = 'node-calc' | 'python-inventory' | 'node-slug' | 'python-durations';

export function makeFixtureRepo(name: FixtureName): FixtureRepo {
  const root = mkdtempSync(join(tmpdir(), `ia-${name}-`));
  const dir = join(root, 'repo');
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  const git = (...args: string[]): void => {
    execFileSync('git', args, { cwd: dir, stdio: 'ignore' });
  };
  git('init', '-q', '-b', 'main');
  git('-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.invalid', 'add', '-A');
  git('-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.invalid', 'commit', '-q', '-m', 'initial');
  return {
    dir,
    patch: readFileSync(join(FIXTURES, `${name}.fix.patch`), 'utf8'),
    cleanup: () => {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export function gitOutput(dir: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
}

/** Writes `files` (paths relative to `dir`) into a checkout and commits them, as a maintainer would. */
export function commitFiles(dir: string, files: Readonly<Record<string, string>>, message = 'config'): void {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.invalid', ...args], {
      cwd: dir,
      stdio: 'ignore',
    });
  };
  git('add', '-A');
  git('commit', '-q', '-m', message);
}

/** Every regular file under `dir`, recursively (links are not followed). */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : [],
  );
}
