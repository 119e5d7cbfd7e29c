import { existsSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join, resolve, sep } from 'node:path';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** `<package root>/dist/web`, found from this file whether it runs from src/ (tsx) or dist/src/. */
export function defaultWebAssetsDir(): string {
  let dir = import.meta.dirname;
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'dist', 'web');
    dir = dirname(dir);
  }
  return join(import.meta.dirname, '..', '..', 'dist', 'web');
}

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Issue Agent</title></head>
<body><h1>Issue Agent</h1><p>The browser client is not built. The JSON API is served under <code>/api/</code>
(see src/server/API.md).</p></body></html>
`;

/**
 * The browser client: `index.html` for `/` and `/runs/<id>` (the client routes itself), files under
 * `/assets/`. Paths are confined to the folder. Served without auth: the page holds no data and shows
 * a sign-in screen until the API answers.
 */
export function serveWeb(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  dir: string,
  headers: Readonly<Record<string, string>>,
): boolean {
  const head = req.method === 'HEAD';
  if (path === '/' || path === '/index.html' || path === '/runs' || /^\/runs\/[A-Za-z0-9-]+\/?$/.test(path)) {
    const file = join(dir, 'index.html');
    if (!existsSync(file)) {
      res.writeHead(200, { ...headers, 'content-type': TYPES['.html'] ?? '', 'cache-control': 'no-store' });
      res.end(head ? undefined : NOT_BUILT);
      return true;
    }
    return sendFile(req, res, file, headers, head);
  }
  if (path.startsWith('/assets/')) {
    let rel: string;
    try {
      rel = decodeURIComponent(path.slice('/assets/'.length));
    } catch {
      return false;
    }
    const root = resolve(dir, 'assets');
    const file = resolve(root, rel);
    if (!file.startsWith(root + sep) || rel.includes('\0')) return false;
    if (!existsSync(file) || !statSync(file).isFile()) return false;
    return sendFile(req, res, file, headers, head);
  }
  return false;
}

function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  file: string,
  headers: Readonly<Record<string, string>>,
  head: boolean,
): true {
  const st = statSync(file);
  const etag = `W/"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
  const common = {
    ...headers,
    etag,
    'cache-control': 'no-cache',
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
  };
  if (req.headers['if-none-match'] === etag) {
    res.writeHead(304, common);
    res.end();
    return true;
  }
  const data = readFileSync(file);
  res.writeHead(200, { ...common, 'content-length': String(data.length) });
  res.end(head ? undefined : data);
  return true;
}
