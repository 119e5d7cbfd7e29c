import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import semver from 'semver';
import { parse as parseYaml } from 'yaml';

/**
 * One Node story: `engines` says what the installed dependencies need; CI here runs the oldest Node it
 * allows; the GitHub workflow tests every supported major it allows; the Action, the App image and
 * the README say a Node that satisfies it.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const range = pkg.engines.node;
const oldest = semver.minVersion(range);

/** Every package under node_modules (nested ones too) with the Node range it declares. */
function declaredRanges(dir: string, out: Map<string, string>): Map<string, string> {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.')) continue;
    const path = join(dir, name);
    if (name.startsWith('@')) {
      declaredRanges(path, out);
      continue;
    }
    const manifest = join(path, 'package.json');
    if (existsSync(manifest)) {
      const m = JSON.parse(readFileSync(manifest, 'utf8')) as {
        name?: string;
        version?: string;
        engines?: { node?: unknown };
      };
      if (typeof m.engines?.node === 'string')
        out.set(`${m.name ?? name}@${m.version ?? '?'}`, m.engines.node);
    }
    declaredRanges(join(path, 'node_modules'), out);
  }
  return out;
}

void describe('the Node versions', () => {
  it('engines is a lower bound that every installed dependency accepts', () => {
    assert.ok(oldest, `engines.node ${range} has a lowest version`);
    const refused = [...declaredRanges(join(ROOT, 'node_modules'), new Map())].filter(
      ([, wants]) => semver.validRange(wants) !== null && !semver.satisfies(oldest, wants),
    );
    assert.deepEqual(
      refused.map(([p, wants]) => `${p} wants ${wants}`),
      [],
      `Node ${oldest.version} (the lowest engines.node allows)`,
    );
  });

  it('.ci/run installs and tests on the oldest major engines allows', () => {
    const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8');
    const m = /install-node\.sh (\d+)\)/.exec(ci);
    assert.ok(m, '.ci/run installs a Node major');
    assert.equal(Number(m[1]), oldest?.major);
    assert.match(ci, /export PATH="\$node_bin:\$PATH"/);
  });

  it('the GitHub workflow tests the oldest allowed major and the Action’s, and nothing engines refuses', () => {
    const wf = parseYaml(readFileSync(join(ROOT, '.github/workflows/ci.yml'), 'utf8')) as {
      jobs: { test: { strategy: { matrix: { node: number[] } } } };
    };
    const majors = wf.jobs.test.strategy.matrix.node;
    assert.ok(majors.includes(oldest?.major ?? -1), `matrix ${majors.join(', ')}`);
    for (const major of majors)
      assert.ok(semver.satisfies(`${major}.99.0`, range), `Node ${major} in the matrix`);
    const action = parseYaml(readFileSync(join(ROOT, 'action.yml'), 'utf8')) as { runs: { using: string } };
    const actionMajor = Number(/^node(\d+)$/.exec(action.runs.using)?.[1]);
    assert.ok(majors.includes(actionMajor), `the Action's node${actionMajor} is tested`);
    assert.ok(semver.satisfies(`${actionMajor}.99.0`, range));
  });

  it('the App image and the README say a Node engines allows', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const imageMajor = Number(/^ARG NODE_IMAGE=issue-agent\/node:(\d+)$/m.exec(dockerfile)?.[1]);
    assert.ok(semver.satisfies(`${imageMajor}.99.0`, range), `the App image's Node ${imageMajor}`);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    assert.match(readme, new RegExp(`Node\\.js ≥ ${oldest?.major}\\.${oldest?.minor}`));
  });
});
