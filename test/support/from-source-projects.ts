import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES } from './fixture-repo.js';

/**
 * test/fixtures/repos/python-durations as a modern package: a src layout (`src/durations`) that
 * declares its dependencies in pyproject.toml, built by hatchling, and no requirements file. The
 * bug is the fixture's: `test_one_hour` fails, the other six pass.
 */
export const HATCHLING_PYPROJECT = `[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "durations"
version = "0.1.0"
dependencies = ["plurals>=1.0"]

[project.optional-dependencies]
test = ["frozenclock==0.4.0"]
`;

/**
 * The same project with a build backend in the tree (PEP 517 \`backend-path\`, nothing to fetch)
 * that works, and a dependency the index lacks: pip fails with "No matching distribution found
 * for notonindex", but not while installing build requirements.
 */
export const IN_TREE_BACKEND_PYPROJECT = `[build-system]
requires = []
build-backend = "inplace"
backend-path = ["_backend"]

[project]
name = "durations"
version = "0.1.0"
dependencies = ["plurals>=1.0", "notonindex>=1"]
`;

/** A PEP 517/660 backend: an editable wheel whose path file points at src/, needing notonindex. */
export const IN_TREE_BACKEND = `import base64, hashlib, os, zipfile

DIST = "durations-0.1.0"
FILES = {
    "durations.pth": os.path.abspath("src") + "\\n",
    DIST + ".dist-info/METADATA": "Metadata-Version: 2.1\\nName: durations\\nVersion: 0.1.0\\n"
    "Requires-Dist: plurals>=1.0\\nRequires-Dist: notonindex>=1\\n",
    DIST + ".dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: inplace\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name = DIST + "-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in FILES.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
        record.append(DIST + ".dist-info/RECORD,,")
        z.writestr(DIST + ".dist-info/RECORD", "\\n".join(record) + "\\n")
    return name


build_wheel = build_editable
`;

/**
 * A committed checkout of python-durations in the src layout with `pyproject` as its
 * pyproject.toml, and `files` (relative paths) written over it.
 */
export function durationsProject(
  pyproject: string,
  files: Readonly<Record<string, string>> = {},
): { readonly dir: string; cleanup(): void } {
  const root = mkdtempSync(join(tmpdir(), 'ia-from-source-'));
  const dir = join(root, 'repo');
  const fixture = join(FIXTURES, 'python-durations');
  mkdirSync(join(dir, 'src'), { recursive: true });
  cpSync(join(fixture, 'durations'), join(dir, 'src', 'durations'), { recursive: true });
  cpSync(join(fixture, 'tests'), join(dir, 'tests'), { recursive: true });
  for (const f of ['pytest.ini', '.gitignore']) cpSync(join(fixture, f), join(dir, f));
  for (const [name, text] of Object.entries({ 'pyproject.toml': pyproject, ...files })) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const git = (...args: string[]): void => {
    execFileSync('git', ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.invalid', ...args], {
      cwd: dir,
      stdio: 'ignore',
    });
  };
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-q', '-m', 'initial');
  return {
    dir,
    cleanup: () => {
      rmSync(root, { recursive: true, force: true });
    },
  };
}
