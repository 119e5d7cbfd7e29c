// The import graph of src/, checked: no import cycle (type-only imports count: a type cycle is
// still two modules that cannot be read apart), and no import across a boundary rule below.
// Every module specifier is read with the TypeScript parser: `import` and `import type`,
// `export … from`, dynamic `import('…')`, `import('…')` types and `require('…')`. Only relative
// specifiers name files of the tree; packages are ESLint's (`no-restricted-imports` keeps
// src/agent away from GitHub, the queue and Docker, and is not repeated here), except for what a
// bundle carries (REACH_RULES): the files and packages the Action's code reaches at run time,
// import after import, whatever the specifier's form (`./intake.js` as well as `../app/intake.js`).
//
//   node --import tsx scripts/check-imports.ts [ROOT]     (part of `npm run lint`)
//
// And one rule that is not about imports: the sandbox backend is chosen once, at a composition root,
// and passed down (src/sandbox/backends.ts); a comparison with a backend's name (`=== 'docker'`,
// `case 'local':`) anywhere else is a branch on the backend that belongs in the backend's folder or
// in one of its capabilities (SandboxBackend).
//
// Prints each violation as `from → to (rule)`, each cycle as its chain and each such branch as
// `file:line`, and exits 1 if any.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

/** A folder that must not import from other folders (paths relative to the root, `/`-separated). */
export interface BoundaryRule {
  readonly from: string;
  readonly notFrom: readonly string[];
  readonly why: string;
}

/** The house rules: imports run down and inward, never up into an entry point. */
export const BOUNDARY_RULES: readonly BoundaryRule[] = [
  {
    from: 'src/eval',
    notFrom: ['src/cli'],
    why: 'eval is an entry point of its own; share through src/execution',
  },
  { from: 'src/queue', notFrom: ['src/app'], why: 'the queue carries jobs; the App enqueues them' },
  { from: 'src/config', notFrom: ['src/publish'], why: 'configuration is a leaf; publishers read it' },
  {
    from: 'src/worker',
    notFrom: ['src/server'],
    why: 'the worker and the run server are separate processes',
  },
  {
    from: 'src/execution',
    notFrom: ['src/cli', 'src/app', 'src/worker', 'src/action'],
    why: 'execution serves every entry point and belongs to none',
  },
];

/**
 * Code whose run-time imports, followed to the end, reach none of `notReach` and load none of
 * `notPackages`: what a bundle of it carries. Type-only imports are erased and do not count; dynamic
 * ones are bundled and do.
 */
export interface ReachRule {
  /** The entry files (or folders of them), relative to the root. */
  readonly from: readonly string[];
  /** Files or folders of the tree. */
  readonly notReach: readonly string[];
  /** Package names; a subpath (`bullmq/x`) is the package's. */
  readonly notPackages: readonly string[];
  readonly why: string;
}

export const REACH_RULES: readonly ReachRule[] = [
  {
    // The Action's code and the fix core it shares with the App (dist-action/index.mjs).
    from: [
      'src/action',
      'src/worker/fix-run.ts',
      'src/worker/fix-runtime.ts',
      'src/app/trigger-rules.ts',
      'src/app/triggers.ts',
      'src/queue/trigger.ts',
    ],
    notReach: [
      'src/queue/queues.ts',
      'src/queue/control.ts',
      'src/queue/issue-lock.ts',
      'src/app/intake.ts',
      'src/app/main.ts',
    ],
    notPackages: ['bullmq', 'ioredis', 'probot'],
    why: 'the Action runs one job per workflow run with the workflow’s token: its bundle carries neither the queue nor Probot (use queue/ids.js and app/trigger-rules.js)',
  },
];

/** The names of the backends in src/sandbox/backends.ts: compared with only where KIND_BRANCH_PLACES says. */
export const SANDBOX_KINDS: readonly string[] = ['docker', 'local', 'unconfined'];

/**
 * Where a sandbox kind may be compared with: the backends' own folder, and the composition roots
 * that choose a backend (the CLI, the worker's job, the Action). workers/ and bench/ are outside src.
 */
export const KIND_BRANCH_PLACES: readonly string[] = [
  'src/sandbox',
  'src/cli',
  'src/worker/fix-job.ts',
  'src/action/run-action.ts',
];

/** A comparison with a sandbox kind outside KIND_BRANCH_PLACES. */
export interface KindBranch {
  /** Relative to the root, `/`-separated. */
  readonly file: string;
  readonly line: number;
  readonly kind: string;
}

const EQUALITY = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);

/** Every `x === '<kind>'` (either side, any equality operator) and `case '<kind>':` in the file. */
export function kindComparisons(
  fileName: string,
  text: string,
  kinds: readonly string[] = SANDBOX_KINDS,
): { readonly line: number; readonly kind: string }[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: { line: number; kind: string }[] = [];
  const named = (node: ts.Node): string | null =>
    ts.isStringLiteralLike(node) && kinds.includes(node.text) ? node.text : null;
  const visit = (node: ts.Node): void => {
    let kind: string | null = null;
    if (ts.isBinaryExpression(node) && EQUALITY.has(node.operatorToken.kind)) {
      kind = named(node.left) ?? named(node.right);
    } else if (ts.isCaseClause(node)) {
      kind = named(node.expression);
    }
    if (kind !== null) {
      found.push({ line: file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1, kind });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

export interface ImportEdge {
  /** Both relative to the root, `/`-separated. */
  readonly from: string;
  readonly to: string;
  readonly line: number;
  readonly typeOnly: boolean;
}

export interface Violation {
  readonly edge: ImportEdge;
  readonly rule: BoundaryRule;
}

/** A file or package a ReachRule forbids, reached from one of its entries. */
export interface ReachViolation {
  readonly rule: ReachRule;
  /** The forbidden file or package. */
  readonly target: string;
  /** The run-time imports from an entry file to the file that imports `target` (or is it). */
  readonly chain: readonly string[];
}

export interface ImportReport {
  readonly files: number;
  readonly edges: readonly ImportEdge[];
  readonly violations: readonly Violation[];
  /** One per forbidden target reached, through its shortest chain of run-time imports. */
  readonly reached: readonly ReachViolation[];
  /** One per tangle (a strongly connected set of files), ordered by its first file. */
  readonly cycles: readonly Cycle[];
  /** Comparisons with a sandbox kind outside the backends' folder and the composition roots. */
  readonly kindBranches: readonly KindBranch[];
}

export interface Cycle {
  /** The shortest chain from the tangle's first file back to it; the first file is repeated last. */
  readonly chain: readonly string[];
  /** Every file of the tangle, sorted: each lies on some cycle with the others. */
  readonly files: readonly string[];
}

const SOURCE = /\.(?:ts|tsx|mts|cts)$/;

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) return name === 'node_modules' ? [] : sourceFiles(p);
      return SOURCE.test(name) ? [p] : [];
    });
}

interface Specifier {
  readonly text: string;
  readonly line: number;
  readonly typeOnly: boolean;
}

/** Every module specifier the file names, with whether only types cross it. */
export function specifiers(fileName: string, text: string): Specifier[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: Specifier[] = [];
  const add = (node: ts.Node, literal: ts.Node | undefined, typeOnly: boolean): void => {
    if (literal === undefined || !ts.isStringLiteralLike(literal)) return;
    const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
    found.push({ text: literal.text, line, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const allTypes =
        clause !== undefined &&
        (clause.phaseModifier === ts.SyntaxKind.TypeKeyword ||
          (clause.name === undefined &&
            named !== undefined &&
            ts.isNamedImports(named) &&
            named.elements.length > 0 &&
            named.elements.every((e) => e.isTypeOnly)));
      add(node, node.moduleSpecifier, allTypes);
    } else if (ts.isExportDeclaration(node)) {
      const named = node.exportClause;
      const allTypes =
        node.isTypeOnly ||
        (named !== undefined &&
          ts.isNamedExports(named) &&
          named.elements.length > 0 &&
          named.elements.every((e) => e.isTypeOnly));
      add(node, node.moduleSpecifier, allTypes);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node, node.moduleReference.expression, node.isTypeOnly);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      add(node, node.argument.literal, true);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const isImport = callee.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(callee) && callee.text === 'require';
      if ((isImport || isRequire) && node.arguments.length >= 1) add(node, node.arguments[0], false);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** The file of the tree a relative specifier names (`./x.js` is `./x.ts` in source), if any. */
function resolveSpecifier(fromFile: string, spec: string, known: ReadonlySet<string>): string | undefined {
  if (!spec.startsWith('./') && !spec.startsWith('../')) return undefined;
  const base = resolve(dirname(fromFile), spec);
  const stem = base.replace(/\.(?:js|jsx|mjs|cjs)$/, '');
  const ext = /\.mjs$/.test(base) ? ['.mts'] : /\.cjs$/.test(base) ? ['.cts'] : ['.ts', '.tsx', '.d.ts'];
  const candidates = [
    base,
    ...ext.map((e) => stem + e),
    ...['.ts', '.tsx'].map((e) => join(base, `index${e}`)),
  ];
  return candidates.find((c) => known.has(c));
}

function slash(root: string, path: string): string {
  return relative(root, path).split(sep).join('/');
}

function within(path: string, folder: string): boolean {
  return path === folder || path.startsWith(`${folder}/`);
}

/** Tarjan's strongly connected components, iterative; each with more than one file, or a self-import. */
function tangles(nodes: readonly string[], next: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let counter = 0;
  for (const start of nodes) {
    if (index.has(start)) continue;
    const work: { node: string; i: number }[] = [{ node: start, i: 0 }];
    index.set(start, counter);
    low.set(start, counter);
    counter += 1;
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const top = work[work.length - 1];
      if (top === undefined) break;
      const succ = next.get(top.node) ?? [];
      const w = succ[top.i];
      if (w !== undefined) {
        top.i += 1;
        if (!index.has(w)) {
          index.set(w, counter);
          low.set(w, counter);
          counter += 1;
          stack.push(w);
          onStack.add(w);
          work.push({ node: w, i: 0 });
        } else if (onStack.has(w)) {
          low.set(top.node, Math.min(low.get(top.node) ?? 0, index.get(w) ?? 0));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) {
        low.set(parent.node, Math.min(low.get(parent.node) ?? 0, low.get(top.node) ?? 0));
      }
      if (low.get(top.node) === index.get(top.node)) {
        const component: string[] = [];
        for (;;) {
          const w2 = stack.pop();
          if (w2 === undefined) break;
          onStack.delete(w2);
          component.push(w2);
          if (w2 === top.node) break;
        }
        const selfLoop = component.length === 1 && succ.includes(top.node);
        if (component.length > 1 || selfLoop) out.push(component.sort());
      }
    }
  }
  return out;
}

/** The shortest chain from the tangle's first file back to itself, through the tangle only. */
function chainOf(component: readonly string[], next: ReadonlyMap<string, readonly string[]>): string[] {
  const members = new Set(component);
  const first = component[0];
  if (first === undefined) return [];
  const cameFrom = new Map<string, string>();
  const queue: string[] = [first];
  for (let head = 0; head < queue.length; head += 1) {
    const node = queue[head];
    if (node === undefined) break;
    for (const w of next.get(node) ?? []) {
      if (!members.has(w)) continue;
      if (w === first) {
        const chain = [first];
        for (let at: string | undefined = node; at !== undefined && at !== first; at = cameFrom.get(at)) {
          chain.splice(1, 0, at);
        }
        return [...chain, first];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, node);
        queue.push(w);
      }
    }
  }
  return [first, first];
}

/** Reads the tree under `root/src` and checks it against the rules. */
export function checkImports(
  root: string,
  rules: readonly BoundaryRule[] = BOUNDARY_RULES,
  reachRules: readonly ReachRule[] = REACH_RULES,
): ImportReport {
  const absRoot = resolve(root);
  const files = sourceFiles(join(absRoot, 'src'));
  const known = new Set(files);
  const edges: ImportEdge[] = [];
  const kindBranches: KindBranch[] = [];
  /** The packages each file loads at run time, by specifier. */
  const packages = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const rel = slash(absRoot, file);
    if (!KIND_BRANCH_PLACES.some((place) => within(rel, place))) {
      for (const c of kindComparisons(file, text)) kindBranches.push({ file: rel, ...c });
    }
    for (const spec of specifiers(file, text)) {
      const target = resolveSpecifier(file, spec.text, known);
      if (target === undefined) {
        if (!spec.typeOnly && !spec.text.startsWith('.')) {
          const list = packages.get(rel) ?? [];
          list.push(spec.text);
          packages.set(rel, list);
        }
        continue;
      }
      edges.push({
        from: slash(absRoot, file),
        to: slash(absRoot, target),
        line: spec.line,
        typeOnly: spec.typeOnly,
      });
    }
  }
  const violations: Violation[] = [];
  for (const edge of edges) {
    for (const rule of rules) {
      if (within(edge.from, rule.from) && rule.notFrom.some((f) => within(edge.to, f))) {
        violations.push({ edge, rule });
      }
    }
  }
  const next = new Map<string, string[]>();
  for (const edge of edges) {
    const list = next.get(edge.from) ?? [];
    if (!list.includes(edge.to)) list.push(edge.to);
    next.set(edge.from, list);
  }
  const nodes = files.map((f) => slash(absRoot, f));
  const cycles = tangles(nodes, next)
    .map((files) => ({ chain: chainOf(files, next), files }))
    .sort((a, b) => (a.files[0] ?? '').localeCompare(b.files[0] ?? ''));
  const reached = reachRules.flatMap((rule) => reach(rule, nodes, edges, packages));
  return { files: files.length, edges, violations, reached, cycles, kindBranches };
}

/**
 * Breadth first over run-time imports from every entry of the rule at once: each forbidden file
 * or package reached, with the shortest chain to it.
 */
function reach(
  rule: ReachRule,
  nodes: readonly string[],
  edges: readonly ImportEdge[],
  packages: ReadonlyMap<string, readonly string[]>,
): ReachViolation[] {
  const next = new Map<string, string[]>();
  for (const edge of edges) {
    if (edge.typeOnly) continue;
    const list = next.get(edge.from) ?? [];
    if (!list.includes(edge.to)) list.push(edge.to);
    next.set(edge.from, list);
  }
  const cameFrom = new Map<string, string | null>();
  const queue = nodes.filter((n) => rule.from.some((f) => within(n, f)));
  for (const n of queue) cameFrom.set(n, null);
  const chainTo = (file: string): string[] => {
    const chain: string[] = [];
    for (let at: string | null | undefined = file; at != null; at = cameFrom.get(at)) chain.unshift(at);
    return chain;
  };
  const found: ReachViolation[] = [];
  const seen = new Set<string>();
  const report = (target: string, chain: string[]): void => {
    if (seen.has(target)) return;
    seen.add(target);
    found.push({ rule, target, chain });
  };
  for (let head = 0; head < queue.length; head += 1) {
    const file = queue[head];
    if (file === undefined) break;
    if (rule.notReach.some((f) => within(file, f))) report(file, chainTo(file));
    for (const spec of packages.get(file) ?? []) {
      const pkg = rule.notPackages.find((p) => spec === p || spec.startsWith(`${p}/`));
      if (pkg !== undefined) report(pkg, chainTo(file));
    }
    for (const w of next.get(file) ?? []) {
      if (cameFrom.has(w)) continue;
      cameFrom.set(w, file);
      queue.push(w);
    }
  }
  return found;
}

export function ruleName(rule: BoundaryRule, target: string): string {
  const to = rule.notFrom.find((f) => within(target, f)) ?? rule.notFrom.join(', ');
  return `${rule.from.replace(/^src\//, '')}/ imports nothing from ${to.replace(/^src\//, '')}/: ${rule.why}`;
}

/** The report as lines for a terminal; empty when the graph is clean. */
export function describe(report: ImportReport): string[] {
  const lines: string[] = [];
  for (const { edge, rule } of report.violations) {
    lines.push(`${edge.from}:${edge.line} → ${edge.to} (${ruleName(rule, edge.to)})`);
  }
  for (const { target, chain, rule } of report.reached) {
    lines.push(`reaches ${target}: ${chain.join(' → ')} (${rule.why})`);
  }
  for (const { chain, files } of report.cycles) {
    const others = files.filter((f) => !chain.includes(f));
    const tail = others.length > 0 ? ` (tangled with it: ${others.join(', ')})` : '';
    lines.push(`cycle: ${chain.join(' → ')}${tail}`);
  }
  for (const b of report.kindBranches) {
    lines.push(
      `${b.file}:${b.line}: compares with the sandbox kind '${b.kind}': choose the backend once at a composition root (${KIND_BRANCH_PLACES.slice(1).join(', ')}) and ask it (SandboxBackend's capabilities) or put the difference in its folder under src/sandbox`,
    );
  }
  return lines;
}

function main(): void {
  const root = process.argv[2] ?? process.cwd();
  const report = checkImports(root);
  const lines = describe(report);
  for (const line of lines) console.error(line);
  const summary = `imports: ${report.files} files, ${report.edges.length} imports, ${report.violations.length + report.reached.length} boundary violations, ${report.cycles.length} cycles, ${report.kindBranches.length} sandbox-kind branches`;
  if (lines.length > 0) {
    console.error(summary);
    process.exit(1);
  }
  console.log(summary);
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(resolve(entry)).href) main();
