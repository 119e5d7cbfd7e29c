import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './pipeline.js';

const run = promisify(execFile);

/** Sources of the packages the Python fixtures need (see test/fixtures/wheels/README.md). */
export const WHEEL_SOURCES = join(ROOT, 'test', 'fixtures', 'wheels');

/**
 * Builds wheels from `test/fixtures/wheels/<name>` with `pip wheel` in the Python sandbox image, with
 * no network and the image's own setuptools (no build isolation: it would fetch setuptools). The
 * container runs as this user, so the wheels are ours to delete. Returns the folder holding them.
 */
export async function buildWheels(
  names: readonly string[],
  image = 'issue-agent/python:latest',
): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'ia-wheels-'));
  const src = join(root, 'src');
  const out = join(root, 'out');
  mkdirSync(out);
  for (const name of names) cpSync(join(WHEEL_SOURCES, name), join(src, name), { recursive: true });
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  await run(
    'docker',
    [
      'run',
      '--rm',
      '--network',
      'none',
      '--user',
      `${uid}:${gid}`,
      '-e',
      'HOME=/tmp',
      '-v',
      `${root}:/w`,
      image,
      'python3',
      '-m',
      'pip',
      'wheel',
      '--no-deps',
      '--no-build-isolation',
      '--no-index',
      '--no-cache-dir',
      '-w',
      '/w/out',
      ...names.map((n) => `/w/src/${n}`),
    ],
    { timeout: 120_000 },
  );
  rmSync(src, { recursive: true, force: true });
  return out;
}

export interface PackageIndex {
  /** The PEP 503 simple index: `http://127.0.0.1:<port>/simple/`. */
  readonly url: string;
  /** Every request path, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

/** PEP 503's normalized project name. */
const normalize = (name: string): string => name.toLowerCase().replace(/[-_.]+/g, '-');

/**
 * A PEP 503 simple repository on loopback, serving the wheels in `dir`: `/simple/` lists the
 * projects, `/simple/<project>/` links each file with its sha256 (pip checks it), `/files/<wheel>`
 * serves it. What a deployment's internal mirror (devpi, a proxy repository) answers.
 */
export async function startPackageIndex(dir: string): Promise<PackageIndex> {
  const wheels = readdirSync(dir).filter((f) => f.endsWith('.whl'));
  const byProject = new Map<string, string[]>();
  for (const file of wheels) {
    const project = normalize(file.split('-')[0] ?? file);
    byProject.set(project, [...(byProject.get(project) ?? []), file]);
  }
  const requests: string[] = [];
  const page = (title: string, links: string): string =>
    `<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0"><title>${title}</title></head><body>\n${links}</body></html>\n`;
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://index.invalid').pathname;
    requests.push(path);
    if (path === '/simple/') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        page(
          'Simple index',
          [...byProject.keys()].map((p) => `<a href="/simple/${p}/">${p}</a><br>\n`).join(''),
        ),
      );
      return;
    }
    const project = /^\/simple\/([^/]+)\/$/.exec(path)?.[1];
    if (project !== undefined) {
      const files = byProject.get(normalize(project));
      if (files === undefined) {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('not found\n');
        return;
      }
      const links = files
        .map((f) => {
          const sha = createHash('sha256')
            .update(readFileSync(join(dir, f)))
            .digest('hex');
          return `<a href="/files/${f}#sha256=${sha}" data-requires-python="&gt;=3.8">${f}</a><br>\n`;
        })
        .join('');
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(page(`Links for ${project}`, links));
      return;
    }
    const file = /^\/files\/([^/]+\.whl)$/.exec(path)?.[1];
    if (file !== undefined && wheels.includes(file)) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(readFileSync(join(dir, file)));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/simple/`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}
