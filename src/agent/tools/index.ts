import { bashTool } from './bash.js';
import { editorTool } from './editor.js';
import { delegateTool } from './delegate.js';
import { finishTool } from './finish.js';
import { runTestsTool } from './run-tests.js';
import { searchTool } from './search.js';
import type { Tool } from './tool.js';

export function defaultTools(): ReadonlyMap<string, Tool> {
  return new Map(
    [bashTool, editorTool, searchTool, runTestsTool, delegateTool, finishTool].map((t) => [t.name, t]),
  );
}
