/** The corpus's suites (runner-suites.mjs): file key → source, in each runner's own API. */
export function jsFiles(runner: string): Record<string, string>;
export function tapFiles(): Record<string, string>;
export function avaFiles(): Record<string, string>;
export function pytestFiles(): Record<string, string>;
export function unittestFiles(): Record<string, string>;
export function goFiles(): Record<string, string>;
export function cargoFiles(scenario: string): Record<string, string>;
