/**
 * GitHub's OpenAPI description (the dereferenced api.github.com document from @octokit/openapi): route
 * matching, and JSON Schema validation of request bodies, responses and webhook payloads.
 *
 * The document is 73 MB. Parsing it in every process that starts a simulator cost each test file
 * seconds of CPU and kept a heap of hundreds of MB for the collector to walk, so the first process on
 * a machine writes a compact form to a cache folder (a route index, and one file per operation and
 * per webhook holding only the JSON schemas, already converted for ajv), and every process reads the
 * index at start and an operation's file when it is first used. The folder's name hashes the
 * package's version and this file's source, so a change to either builds a new one; it is written
 * under a temporary name and renamed into place, so concurrent processes never read half of one.
 * Validators are compiled on first use, once per process, and their generated code is kept in the
 * same folder (ajv's standalone code, under ajv's version): compiling GitHub's large schemas cost each
 * process that starts a simulator about two seconds, loading the code a small part of that.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileFunction } from 'node:vm';
import { _, Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import standaloneModule from 'ajv/dist/standalone/index.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface Operation {
  readonly operationId: string;
  readonly method: string;
  /** The path template, e.g. `/repos/{owner}/{repo}/issues/{issue_number}`. */
  readonly template: string;
  /** The documentation page GitHub names in its error bodies. */
  readonly docsUrl: string;
  /** The operation's file in the cache folder. */
  readonly file: string;
}

/** What the simulator needs of one operation: the parts of its description it checks against. */
interface OperationDetail {
  readonly bodyRequired: boolean;
  /** The JSON request body's schema, ready for ajv (see `forAjv`). */
  readonly request?: Json;
  /** Whether the 422 answer lists errors as plain strings (GitHub's "validation-error-simple"). */
  readonly stringErrors: boolean;
  /** Per status, the JSON response schema, ready for ajv. */
  readonly responses: Readonly<Record<string, Json>>;
}

interface SpecIndex {
  readonly operations: readonly Omit<Operation, 'file'>[];
  /** `x-webhooks` keys (e.g. `issue-comment-created`) → file. */
  readonly webhooks: Readonly<Record<string, string>>;
}

export interface RouteMatch {
  readonly operation: Operation;
  /** Path parameters, percent-decoded. */
  readonly params: Readonly<Record<string, string>>;
}

/** One failed check of a request body, in GitHub's validation error shape plus a readable sentence. */
export interface BodyError {
  readonly field: string;
  readonly code: 'missing_field' | 'invalid';
  readonly message: string;
}

/**
 * Parameters that may span slashes when they end a path: GitHub's contents `{path}`, and git ref and
 * branch names, which clients may send unencoded.
 */
const SLASHED_PARAMETERS = new Set(['path', 'ref', 'branch']);

/**
 * Places where GitHub's description disagrees with what GitHub sends, from rest-api-description's
 * open schema-inaccuracy issues: errors there are not counted against the simulator's responses.
 */
const KNOWN_INACCURACIES: readonly { operationId: string; path: RegExp; value: unknown }[] = [
  // github/rest-api-description#1812: label descriptions in pull-request-simple can be null.
  { operationId: 'pulls/list', path: /^\/\d+\/labels\/\d+\/description$/, value: null },
];

interface Route {
  readonly operation: Operation;
  /** Literal segments, or null where a parameter goes. */
  readonly segments: readonly (string | null)[];
  readonly names: readonly string[];
}

const require = createRequire(import.meta.url);
const SPEC_FILE = require.resolve('@octokit/openapi/generated/api.github.com.deref.json');

// ajv-formats is CommonJS: its default import is `module.exports`, whose `default` is the plugin.
const addFormats = addFormatsModule.default;
// So is ajv's standalone code generator.
const standaloneCode = standaloneModule.default;
const AJV_VERSION = (
  JSON.parse(readFileSync(require.resolve('ajv/package.json'), 'utf8')) as { version: string }
).version;
/** The name by which a validator's stored code asks for the formats (see OpenApiSpec.load). */
const FORMATS_MODULE = 'issue-agent-sim:formats';

let loading: Promise<OpenApiSpec> | undefined;

/** The description, shared by every simulator in the process. */
export function loadSpec(): Promise<OpenApiSpec> {
  loading ??= cacheFolder().then((folder) => new OpenApiSpec(folder));
  return loading;
}

/** The compact form's folder, written first if this machine has none for this package and this code. */
async function cacheFolder(): Promise<string> {
  const version = (
    JSON.parse(readFileSync(require.resolve('@octokit/openapi/package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
  const hash = createHash('sha256')
    .update(version)
    .update(readFileSync(new URL(import.meta.url)))
    .digest('hex')
    .slice(0, 16);
  const root = process.env.ISSUE_AGENT_OPENAPI_CACHE ?? join(tmpdir(), 'issue-agent-openapi');
  const folder = join(root, hash);
  if (existsSync(join(folder, 'index.json'))) return folder;
  const document = JSON.parse(await readFile(SPEC_FILE, 'utf8')) as JsonObject;
  const scratch = join(root, `.${hash}.${randomBytes(6).toString('hex')}`);
  writeCompact(document, scratch);
  try {
    renameSync(scratch, folder);
  } catch (error) {
    // Another process renamed its copy into place first: theirs is the same, ours goes.
    rmSync(scratch, { recursive: true, force: true });
    if (!existsSync(join(folder, 'index.json'))) throw error;
  }
  return folder;
}

/** Writes the route index and one file per operation and per webhook into `folder`. */
function writeCompact(document: JsonObject, folder: string): void {
  mkdirSync(join(folder, 'ops'), { recursive: true });
  mkdirSync(join(folder, 'hooks'), { recursive: true });
  const operations: Omit<Operation, 'file'>[] = [];
  for (const [template, item] of Object.entries(asObject(document.paths))) {
    for (const [method, value] of Object.entries(asObject(item))) {
      const raw = asObject(value);
      if (typeof raw.operationId !== 'string') continue;
      const docs = asObject(raw.externalDocs ?? {});
      const n = operations.length;
      operations.push({
        operationId: raw.operationId,
        method: method.toUpperCase(),
        template,
        docsUrl: typeof docs.url === 'string' ? docs.url : 'https://docs.github.com/rest',
      });
      writeFileSync(join(folder, 'ops', `${n}.json`), JSON.stringify(detailOf(raw)));
    }
  }
  const webhooks: Record<string, string> = {};
  for (const [key, hook] of Object.entries(asObject(document['x-webhooks'] ?? {}))) {
    const body = asObject(asObject(asObject(hook).post ?? {}).requestBody ?? {});
    const media = asObject(body.content ?? {})['application/json'];
    if (media === undefined) continue;
    const file = `${Object.keys(webhooks).length}.json`;
    webhooks[key] = file;
    writeFileSync(join(folder, 'hooks', file), JSON.stringify(forAjv(asObject(media).schema ?? {})));
  }
  const index: SpecIndex = { operations, webhooks };
  writeFileSync(join(folder, 'index.json'), JSON.stringify(index));
}

function jsonSchemaOf(holder: Json | undefined): Json | undefined {
  const media = asObject(asObject(holder ?? {}).content ?? {})['application/json'];
  return media === undefined ? undefined : asObject(media).schema;
}

function detailOf(raw: JsonObject): OperationDetail {
  const request = raw.requestBody === undefined ? undefined : jsonSchemaOf(raw.requestBody);
  const responses: Record<string, Json> = {};
  for (const [status, response] of Object.entries(asObject(raw.responses ?? {}))) {
    const schema = jsonSchemaOf(response);
    if (schema !== undefined) responses[status] = forAjv(schema);
  }
  const unprocessable = asObject(jsonSchemaOf(asObject(raw.responses ?? {})['422']) ?? {});
  const errors = asObject(asObject(unprocessable.properties ?? {}).errors ?? {});
  return {
    bodyRequired: raw.requestBody !== undefined && asObject(raw.requestBody).required === true,
    ...(request === undefined ? {} : { request: forAjv(request) }),
    stringErrors: asObject(errors.items ?? {}).type === 'string',
    responses,
  };
}

/** A schema of the description as ajv compiles it. */
function forAjv(schema: Json): Json {
  return hoistRepeats(toJsonSchema(schema));
}

export class OpenApiSpec {
  private readonly routes = new Map<string, Route[]>();
  private readonly webhooks: Readonly<Record<string, string>>;
  private readonly details = new Map<string, OperationDetail>();
  private readonly ajv: Ajv;
  private readonly validators = new Map<string, ValidateFunction | null>();

  constructor(readonly folder: string) {
    const index = JSON.parse(readFileSync(join(folder, 'index.json'), 'utf8')) as SpecIndex;
    index.operations.forEach((op, n) => {
      const segments = op.template.split('/').slice(1);
      const names = segments.filter((s) => s.startsWith('{')).map((s) => s.slice(1, -1));
      const operation: Operation = { ...op, file: join(folder, 'ops', `${n}.json`) };
      const route: Route = {
        operation,
        segments: segments.map((s) => (s.startsWith('{') ? null : s)),
        names,
      };
      const list = this.routes.get(operation.method) ?? [];
      list.push(route);
      this.routes.set(operation.method, list);
    });
    // Literal segments win over parameters at the first position where two templates differ, as in
    // GitHub's router: `/repos/{owner}/{repo}/issues/comments` is not issue number "comments".
    for (const list of this.routes.values()) list.sort((a, b) => compareSpecificity(a.segments, b.segments));
    this.webhooks = index.webhooks;
    // Unoptimised code generation compiles about twice as fast; validation speed does not matter here.
    // `source` keeps each validator's code for the folder; `formats` is how that code reaches this
    // instance's formats (ours included), which ajv-formats would otherwise point at its own module.
    this.ajv = new Ajv({
      strict: false,
      allErrors: true,
      validateSchema: false,
      verbose: true,
      code: { optimize: false, source: true, formats: _`require(${FORMATS_MODULE})` },
    });
    addFormats(this.ajv);
    // GitHub attributes a bot's commits to `<id>+<slug>[bot]@users.noreply.github.com` and puts that
    // address in payloads whose schema says `format: email`, which the brackets fail: accept it.
    const email = this.ajv.formats.email;
    this.ajv.addFormat('email', (value: string) => {
      if (/^\d+\+[A-Za-z0-9-]+\[bot\]@users\.noreply\.github\.com$/.test(value)) return true;
      if (email instanceof RegExp) return email.test(value);
      return typeof email === 'function' ? email(value) : true;
    });
    // Formats GitHub's description uses beyond JSON Schema's; only repo.nwo has a checkable shape.
    this.ajv.addFormat('repo.nwo', /^[^/\s]+\/[^/\s]+$/);
    for (const name of ['int32', 'int64', 'double', 'timestamp', 'binary', 'uri-template']) {
      this.ajv.addFormat(name, true);
    }
  }

  /** The operation for a method and a raw (still percent-encoded) path, or null when none matches. */
  match(method: string, path: string): RouteMatch | null {
    const routes = this.routes.get(method.toUpperCase()) ?? [];
    const parts = path.split('/').slice(1);
    for (const greedy of [false, true]) {
      for (const route of routes) {
        const params = matchRoute(route, parts, greedy);
        if (params !== null) return { operation: route.operation, params };
      }
    }
    return null;
  }

  /** Whether the operation declares a JSON request body. */
  hasJsonBody(operation: Operation): boolean {
    return this.detail(operation).request !== undefined;
  }

  /**
   * Whether the operation's 422 answer lists its errors as plain strings (GitHub's
   * "validation-error-simple", e.g. branch protection and reviews) rather than objects.
   */
  stringErrors(operation: Operation): boolean {
    return this.detail(operation).stringErrors;
  }

  /** Whether the operation's request body is required (a missing one is checked as `{}`). */
  bodyRequired(operation: Operation): boolean {
    return this.detail(operation).bodyRequired;
  }

  /** Errors of a parsed request body against the operation's schema; empty when valid or when it has none. */
  checkRequestBody(operation: Operation, body: unknown): BodyError[] {
    const validate = this.validator(`request ${operation.operationId}`, () => this.detail(operation).request);
    if (validate === null || validate(body)) return [];
    return toBodyErrors(validate.errors ?? []);
  }

  /**
   * Why a JSON response body does not match the operation's schema for that status, or null when it
   * matches or the description has no JSON schema for it.
   */
  checkResponse(operation: Operation, status: number, body: unknown): string | null {
    const validate = this.validator(
      `response ${operation.operationId} ${status}`,
      () => this.detail(operation).responses[String(status)],
    );
    if (validate === null || validate(body)) return null;
    const errors = (validate.errors ?? []).filter(
      (e) =>
        !KNOWN_INACCURACIES.some(
          (k) => k.operationId === operation.operationId && k.path.test(e.instancePath) && e.data === k.value,
        ),
    );
    return errors.length === 0 ? null : describeErrors(errors);
  }

  /** Like checkResponse, for a webhook payload (`x-webhooks` key such as `issue-comment-created`). */
  checkWebhook(event: string, action: string, payload: unknown): string | null {
    const key = `${event}-${action}`.replaceAll('_', '-');
    const validate = this.validator(`webhook ${key}`, () => {
      const file = this.webhooks[key];
      return file === undefined
        ? undefined
        : (JSON.parse(readFileSync(join(this.folder, 'hooks', file), 'utf8')) as Json);
    });
    if (validate === null || validate(payload)) return null;
    return describeErrors(validate.errors ?? []);
  }

  private detail(operation: Operation): OperationDetail {
    let detail = this.details.get(operation.file);
    if (detail === undefined) {
      detail = JSON.parse(readFileSync(operation.file, 'utf8')) as OperationDetail;
      this.details.set(operation.file, detail);
    }
    return detail;
  }

  private validator(key: string, schema: () => Json | undefined): ValidateFunction | null {
    let validate = this.validators.get(key);
    if (validate === undefined) {
      const file = join(
        this.folder,
        `validators-${AJV_VERSION}`,
        `${createHash('sha256').update(key).digest('hex').slice(0, 24)}.js`,
      );
      if (existsSync(file)) {
        validate = this.load(readFileSync(file, 'utf8'));
      } else {
        const found = schema();
        validate = found === undefined ? null : this.ajv.compile(asObject(found));
        store(file, validate === null ? NO_SCHEMA : standaloneCode(this.ajv, validate));
      }
      this.validators.set(key, validate);
    }
    return validate;
  }

  /** A validator from its stored code (CommonJS: ajv's runtime helpers come from `require`). */
  private load(source: string): ValidateFunction | null {
    if (source === NO_SCHEMA) return null;
    const module: { exports: unknown } = { exports: {} };
    const load = (id: string): unknown => (id === FORMATS_MODULE ? this.ajv.formats : require(id));
    const run = compileFunction(source, ['require', 'module', 'exports']) as (
      require: (id: string) => unknown,
      module: { exports: unknown },
      exports: unknown,
    ) => void;
    run(load, module, module.exports);
    return module.exports as ValidateFunction;
  }
}

/** What the folder holds for a key whose operation has no schema (so it is not looked up again). */
const NO_SCHEMA = '// no schema\n';

/** Writes a file under a temporary name and renames it into place, so no reader sees half of it. */
function store(file: string, text: string): void {
  const dir = join(file, '..');
  mkdirSync(dir, { recursive: true });
  const scratch = `${file}.${randomBytes(6).toString('hex')}`;
  writeFileSync(scratch, text);
  renameSync(scratch, file);
}

function matchRoute(route: Route, parts: readonly string[], greedy: boolean): Record<string, string> | null {
  const { segments } = route;
  const last = segments.length - 1;
  // The greedy pass lets a trailing parameter span slashes, as `{path}` of the contents API does.
  if (greedy) {
    if (parts.length <= segments.length || segments[last] !== null) return null;
    if (!SLASHED_PARAMETERS.has(route.names.at(-1) ?? '')) return null;
  } else if (parts.length !== segments.length) {
    return null;
  }
  const values: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const literal = segments[i];
    const part = greedy && i === last ? parts.slice(i).join('/') : (parts[i] ?? '');
    if (literal === null) {
      if (part === '') return null;
      values.push(part);
    } else if (literal !== part) {
      return null;
    }
  }
  const params: Record<string, string> = {};
  route.names.forEach((name, i) => {
    params[name] = safeDecode(values[i] ?? '');
  });
  return params;
}

function compareSpecificity(a: readonly (string | null)[], b: readonly (string | null)[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] ?? null;
    const y = b[i] ?? null;
    if (x === null && y !== null) return 1;
    if (x !== null && y === null) return -1;
  }
  return 0;
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * OpenAPI 3.0 schema to JSON Schema: `nullable: true` becomes a null type (ajv refuses `nullable`
 * without `type`, which GitHub's description has beside `allOf`/`anyOf`), and annotation keywords
 * are dropped so that compiling stays cheap.
 */
function toJsonSchema(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'example' || key === 'examples' || key === 'description' || key === 'nullable') continue;
    if (key === 'properties' || key === 'patternProperties') {
      out[key] = Object.fromEntries(Object.entries(asObject(value)).map(([k, v]) => [k, toJsonSchema(v)]));
    } else {
      out[key] = toJsonSchema(value);
    }
  }
  if (schema.nullable !== true) return out;
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  if (typeof out.type === 'string') return { ...out, type: [out.type, 'null'] };
  return { anyOf: [out, { type: 'null' }] };
}

const SCHEMA_MAPS = ['properties', 'patternProperties'] as const;
const SCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf'] as const;
const SCHEMA_SINGLES = ['items', 'additionalProperties', 'not'] as const;

/** The schema with each subschema (in schema position) replaced by `map` of it. */
function mapSubschemas(node: JsonObject, map: (schema: Json) => Json): JsonObject {
  const out: JsonObject = { ...node };
  for (const key of SCHEMA_MAPS) {
    const value = out[key];
    if (isObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, map(v)]));
  }
  for (const key of SCHEMA_LISTS) {
    const value = out[key];
    if (Array.isArray(value)) out[key] = value.map(map);
  }
  for (const key of SCHEMA_SINGLES) {
    const value = out[key];
    if (Array.isArray(value)) out[key] = value.map(map);
    else if (isObject(value)) out[key] = map(value);
  }
  return out;
}

/**
 * The dereferenced description repeats large subschemas (a pull request holds the repository schema
 * twice and the user schema a dozen times); moving each repeat into `$defs` lets ajv compile it once,
 * which halves compile time without changing what validates.
 */
function hoistRepeats(root: Json): JsonObject {
  if (!isObject(root)) return { const: root };
  const counts = new Map<string, number>();
  const count = (node: Json): Json => {
    if (!isObject(node)) return node;
    const key = JSON.stringify(node);
    if (key.length >= 300) counts.set(key, (counts.get(key) ?? 0) + 1);
    mapSubschemas(node, count);
    return node;
  };
  count(root);
  const defs: JsonObject = {};
  const names = new Map<string, string>();
  const rewrite = (node: Json): Json => {
    if (!isObject(node)) return node;
    const key = JSON.stringify(node);
    if ((counts.get(key) ?? 0) < 2) return mapSubschemas(node, rewrite);
    let name = names.get(key);
    if (name === undefined) {
      name = `s${names.size}`;
      names.set(key, name);
      defs[name] = mapSubschemas(node, rewrite);
    }
    return { $ref: `#/$defs/${name}` };
  };
  const out = mapSubschemas(root, rewrite);
  return names.size > 0 ? { ...out, $defs: defs } : out;
}

function isObject(value: Json | undefined): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function asObject(value: Json | undefined): JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {};
}

/** ajv's errors as GitHub's 422 sentences: `"title" wasn't supplied.`, `For 'properties/body', 5 is not a string.` */
function toBodyErrors(errors: readonly ErrorObject[]): BodyError[] {
  const seen = new Set<string>();
  const out: BodyError[] = [];
  for (const error of errors) {
    const pointer = error.instancePath.split('/').slice(1);
    const field = pointer.join('.');
    const where = pointer.length === 0 ? 'items' : `properties/${pointer.join('/')}`;
    let entry: BodyError;
    if (error.keyword === 'required') {
      const missing = String((error.params as { missingProperty?: unknown }).missingProperty);
      entry = {
        field: field === '' ? missing : `${field}.${missing}`,
        code: 'missing_field',
        message: `"${missing}" wasn't supplied.`,
      };
    } else if (error.keyword === 'type') {
      const type = String((error.params as { type?: unknown }).type);
      const article = /^[aeiou]/.test(type) ? 'an' : 'a';
      entry = {
        field,
        code: 'invalid',
        message: `For '${where}', ${JSON.stringify(error.data)} is not ${article} ${type}.`,
      };
    } else if (error.keyword === 'enum') {
      const allowed = (error.params as { allowedValues?: unknown }).allowedValues;
      entry = {
        field,
        code: 'invalid',
        message: `For '${where}', ${JSON.stringify(error.data)} is not a member of ${JSON.stringify(allowed)}.`,
      };
    } else if (error.keyword === 'oneOf' || error.keyword === 'anyOf') {
      entry = {
        field,
        code: 'invalid',
        message: `For '${where}', the value matches none of the allowed forms.`,
      };
    } else {
      entry = {
        field,
        code: 'invalid',
        message: `For '${where}', ${error.message ?? 'the value is invalid'}.`,
      };
    }
    if (!seen.has(entry.message)) {
      seen.add(entry.message);
      out.push(entry);
    }
  }
  return out;
}

function describeErrors(errors: readonly ErrorObject[]): string {
  return errors
    .slice(0, 12)
    .map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`)
    .join('; ');
}
