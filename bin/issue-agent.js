#!/usr/bin/env node
// The published entry: the compiled CLI (npm run build). Development runs use tsx on src/cli/main.ts.
await import('../dist/src/cli/main.js');
