import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';

/**
 * An evaluation task in the SWE-bench instance format (`instance_id`, `repo`, `base_commit`,
 * `problem_statement`, `test_patch`, `FAIL_TO_PASS`, `PASS_TO_PASS`, optional gold `patch`), plus
 * two fields of ours: `repo_path`, a local repository to clone instead of `repo` (task sets built
 * offline), and `test_command`, how to run the listed tests when the default for the language does
 * not fit. Other SWE-bench fields (`hints_text`, `created_at`, `version`, …) are accepted and ignored.
 *
 * `FAIL_TO_PASS` and `PASS_TO_PASS` are lists of test ids, as JSON arrays or (as SWE-bench's
 * datasets store them) JSON-encoded strings. A test id is `file::name` (pytest's node id; for
 * JavaScript, the test file and the test's name, nested names joined with ` > `), or a bare name.
 */

const testList = z.union([z.array(z.string().min(1)), z.string()]).transform((v, ctx): string[] => {
  if (Array.isArray(v)) return v;
  try {
    const parsed: unknown = JSON.parse(v);
    if (Array.isArray(parsed)) {
      const ids = (parsed as unknown[]).filter((x): x is string => typeof x === 'string' && x !== '');
      if (ids.length === parsed.length) return ids;
    }
  } catch {
    // reported below
  }
  ctx.addIssue({ code: 'custom', message: 'a list of test ids: a JSON array, or a string holding one' });
  return z.NEVER;
});

export const evalTask = z
  .object({
    instance_id: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'letters, digits, `.`, `_` and `-` (it names a folder)'),
    repo: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'owner/name')
      .optional(),
    repo_path: z.string().min(1).optional(),
    base_commit: z.string().regex(/^[0-9a-f]{7,64}$/, 'a commit id (hex)'),
    problem_statement: z.string().min(1),
    test_patch: z.string().min(1),
    FAIL_TO_PASS: testList,
    PASS_TO_PASS: testList.default([]),
    patch: z.string().min(1).optional(),
    test_command: z.string().min(1).max(2000).optional(),
  })
  .refine((t) => t.repo !== undefined || t.repo_path !== undefined, {
    error: 'a task needs repo (owner/name) or repo_path',
  })
  .refine((t) => t.FAIL_TO_PASS.length > 0, {
    error: 'FAIL_TO_PASS is empty: a task needs at least one test that the fix makes pass',
    path: ['FAIL_TO_PASS'],
  });

export type EvalTask = z.infer<typeof evalTask>;

export class TaskFileError extends Error {
  override readonly name = 'TaskFileError';
}

/**
 * The tasks of a JSONL file, in order. Every bad line is reported (line number, instance id when it
 * has one, and what is wrong) in one error; nothing runs on a task set with a bad line. A relative
 * `repo_path` is taken relative to the file.
 */
export async function readTasks(file: string): Promise<EvalTask[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new TaskFileError(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseTasks(text, dirname(resolve(file)));
}

export function parseTasks(text: string, baseDir: string): EvalTask[] {
  const tasks: EvalTask[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `line ${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      problems.push(`${where}: not JSON`);
      return;
    }
    const parsed = evalTask.safeParse(raw);
    if (!parsed.success) {
      const id =
        typeof raw === 'object' && raw !== null && 'instance_id' in raw
          ? ` (${String(raw.instance_id)})`
          : '';
      problems.push(
        `${where}${id}: ${parsed.error.issues.map((x) => `${x.path.join('.') || '(task)'}: ${x.message}`).join('; ')}`,
      );
      return;
    }
    const t = parsed.data;
    if (seen.has(t.instance_id)) {
      problems.push(`${where}: instance_id ${t.instance_id} appears twice`);
      return;
    }
    seen.add(t.instance_id);
    tasks.push(
      t.repo_path === undefined || isAbsolute(t.repo_path)
        ? t
        : { ...t, repo_path: resolve(baseDir, t.repo_path) },
    );
  });
  if (problems.length > 0) throw new TaskFileError(`the task file has problems:\n  ${problems.join('\n  ')}`);
  if (tasks.length === 0) throw new TaskFileError('the task file holds no task');
  return tasks;
}

/** `file::name` → its file, or null for a bare name. */
export function testFile(id: string): string | null {
  const i = id.indexOf('::');
  return i > 0 ? id.slice(0, i) : null;
}
