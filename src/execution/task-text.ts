import type { Task } from '../events/schema.js';

const HEADING = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const MAX_TITLE = 100;

/**
 * A CLI task from free text (`--task` or `--task-file`): when the text starts with a Markdown
 * heading (an issue written as a file usually does), the heading's words are the title and the rest
 * is the body, so neither repeats the other and the title carries no `#`. Otherwise the first line
 * is the title (cut to 100 characters) and the whole text the body. `--title` wins over both.
 */
export function taskFromText(text: string, title?: string): Task {
  const trimmed = text.trim();
  const [first = '', ...rest] = trimmed.split('\n');
  const heading = HEADING.exec(first);
  if (heading !== null && (heading[1] ?? '') !== '') {
    const body = rest.join('\n').trim();
    return { title: title ?? cut(heading[1] ?? ''), body, instructions: [], source: 'cli' };
  }
  return { title: title ?? cut(first), body: trimmed, instructions: [], source: 'cli' };
}

function cut(line: string): string {
  return line.length > MAX_TITLE ? `${line.slice(0, MAX_TITLE - 3)}...` : line;
}
