/**
 * A strict reader of the Prometheus text exposition format (0.0.4): every line is a comment
 * (`# HELP name text`, `# TYPE name type`, other `#` text) or a sample `name{labels} value [timestamp]`;
 * names and label names are checked, label values must be properly quoted and escaped, values must be
 * floats (or NaN/±Inf), every sample's family must have been typed before it, and a histogram's
 * buckets must be cumulative and end with le="+Inf" equal to its _count. Throws on anything else.
 */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePrometheusText(text: string): { samples: Sample[]; types: Map<string, string> } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const lines = text.split('\n').slice(0, -1);
  lines.forEach((line, i) => {
    const where = `line ${i + 1}: ${line}`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (m === null) return;
      const [, kind, name = '', rest = ''] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name in ${where}`);
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`bad type in ${where}`);
        if (types.has(name)) throw new Error(`second TYPE for ${name}`);
        types.set(name, rest);
      }
      return;
    }
    let at = 0;
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (nameMatch === null) throw new Error(`bad sample in ${where}`);
    const name = nameMatch[0];
    at = name.length;
    const labels: Record<string, string> = {};
    if (line[at] === '{') {
      at += 1;
      while (line[at] !== '}') {
        const ln = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(at));
        if (ln === null || !LABEL.test(ln[0])) throw new Error(`bad label name in ${where}`);
        at += ln[0].length;
        if (line.slice(at, at + 2) !== '="') throw new Error(`expected =" in ${where}`);
        at += 2;
        let value = '';
        for (;;) {
          const c = line[at];
          if (c === undefined) throw new Error(`unterminated label value in ${where}`);
          if (c === '"') break;
          if (c === '\\') {
            const e = line[at + 1];
            if (e === 'n') value += '\n';
            else if (e === '\\' || e === '"') value += e;
            else throw new Error(`bad escape in ${where}`);
            at += 2;
            continue;
          }
          value += c;
          at += 1;
        }
        at += 1;
        if (ln[0] in labels) throw new Error(`duplicate label in ${where}`);
        labels[ln[0]] = value;
        if (line[at] === ',') at += 1;
        else if (line[at] !== '}') throw new Error(`expected , or } in ${where}`);
      }
      at += 1;
    }
    const rest = line.slice(at);
    const vm = /^ (\S+)(?: (-?\d+))?$/.exec(rest);
    if (vm === null) throw new Error(`bad value in ${where}`);
    const raw = vm[1] ?? '';
    // Prometheus reads values with Go's strconv.ParseFloat: NaN and Inf in any case (prom-client writes "Nan").
    if (!/^([-+]?(inf|infinity)|nan|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$/i.test(raw))
      throw new Error(`bad float in ${where}`);
    const special = raw.toLowerCase().replace(/^\+/, '');
    const value =
      special === 'nan'
        ? NaN
        : special.endsWith('inf') || special.endsWith('infinity')
          ? raw.startsWith('-')
            ? -Infinity
            : Infinity
          : Number(raw);
    const family = familyOf(name, types);
    if (family === null) throw new Error(`sample before its TYPE in ${where}`);
    samples.push({ name, labels, value });
  });
  checkHistograms(samples, types);
  return { samples, types };
}

function familyOf(name: string, types: Map<string, string>): string | null {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count', '_total', '_created']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      if (types.has(base)) return base;
    }
  }
  return null;
}

function checkHistograms(samples: readonly Sample[], types: Map<string, string>): void {
  for (const [family, type] of types) {
    if (type !== 'histogram') continue;
    const series = new Map<string, Sample[]>();
    for (const s of samples.filter((x) => x.name === `${family}_bucket`)) {
      const rest = Object.fromEntries(Object.entries(s.labels).filter(([k]) => k !== 'le'));
      const key = JSON.stringify(rest);
      series.set(key, [...(series.get(key) ?? []), s]);
    }
    for (const [key, buckets] of series) {
      let last = -Infinity;
      let prev = 0;
      for (const b of buckets) {
        const le = Number(b.labels.le === '+Inf' ? Infinity : b.labels.le);
        if (!(le > last)) throw new Error(`${family}: buckets out of order`);
        if (b.value < prev) throw new Error(`${family}: buckets not cumulative`);
        last = le;
        prev = b.value;
      }
      if (last !== Infinity) throw new Error(`${family}: no +Inf bucket`);
      const count = samples.find((s) => s.name === `${family}_count` && JSON.stringify(s.labels) === key);
      if (count?.value !== prev) throw new Error(`${family}: _count differs from the +Inf bucket`);
    }
  }
}

/** The value of one series (0 when absent). */
export function valueOf(
  samples: readonly Sample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  const hit = samples.find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return hit?.value ?? 0;
}
