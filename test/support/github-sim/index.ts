/**
 * The GitHub simulator: a loopback server that real Octokit, Probot and git clients talk to in
 * end-to-end tests — REST (validated against GitHub's OpenAPI description), app JWT and installation
 * token auth, git smart HTTP, and signed webhook deliveries. See server.ts; `npm run sim:github`
 * runs it standalone (main.ts).
 */
export { startGitHubSimulator } from './server.js';
export type * from './types.js';
