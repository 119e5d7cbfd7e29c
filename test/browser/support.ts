/**
 * Headless Chromium for the browser tests: Debian's `chromium` driven by playwright-core (no browser
 * download). Without it the tests skip on a developer machine and fail where
 * ISSUE_AGENT_REQUIRE_BROWSER=1 is set (CI), so they can never silently not run there.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

export const ROOT = join(import.meta.dirname, '..', '..');
export const CHROMIUM = process.env.ISSUE_AGENT_CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots of each view, kept after the run (gitignored). */
export const ARTIFACTS = join(ROOT, 'test-artifacts', 'browser');

export function browserSkipReason(): string | false {
  if (existsSync(CHROMIUM)) return false;
  if (process.env.ISSUE_AGENT_REQUIRE_BROWSER === '1') {
    throw new Error(`ISSUE_AGENT_REQUIRE_BROWSER=1 but ${CHROMIUM} is missing (apt-get install -y chromium)`);
  }
  return `${CHROMIUM} is not installed (apt-get install -y chromium)`;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path });
  return path;
}

/**
 * Collects what must never happen on a page: uncaught errors and CSP violations (an inline script or
 * style would be one).
 */
export function watchPage(page: Page): { readonly problems: string[] } {
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text()))
      problems.push(`csp: ${m.text()}`);
  });
  return { problems };
}

/** Signs in through the sign-in screen's admin-token form; the page lands where it was. */
export async function signInWithToken(page: Page, token: string): Promise<void> {
  await page.locator('main.sign-in').waitFor();
  await page.fill('input[name=token]', token);
  await Promise.all([page.waitForEvent('load'), page.click('form.token-form button[type=submit]')]);
}
