/**
 * The browser client: routes by path (`/` the runs list, `/runs/:id` one run), after checking who is
 * signed in. Served under a `default-src 'self'` CSP: no inline script or style anywhere.
 */
import { ApiError, getEvents, getMe, getRun, signOut } from './api.js';
import { h } from './dom.js';
import { RunsList } from './runs-list.js';
import { RUN_PAGE_LIMIT, RunView } from './run-view.js';
import { signInView } from './sign-in.js';
import type { Me } from './types.js';

function topBar(me: Me): HTMLElement {
  const who = me.login ?? (me.admin ? 'admin' : '');
  return h(
    'header',
    { class: 'top' },
    h('a', { href: '/', class: 'brand' }, 'Issue Agent'),
    h('span', { class: 'spacer' }),
    h('span', { class: 'who' }, who === '' ? '' : `signed in as ${who}`),
    h(
      'button',
      {
        type: 'button',
        class: 'link sign-out',
        onClick: () => {
          signOut().then(
            () => {
              location.assign('/');
            },
            () => {
              location.assign('/');
            },
          );
        },
      },
      'Sign out',
    ),
  );
}

function notFound(): HTMLElement {
  return h(
    'main',
    { class: 'not-found' },
    h('h1', null, 'Not found'),
    h('p', null, h('a', { href: '/' }, 'All runs')),
  );
}

/** Who is signed in (null: nobody), and whether GitHub sign-in is offered (a 401 says so too). */
async function whoAmI(): Promise<{ readonly me: Me | null; readonly githubSignIn: boolean }> {
  try {
    const me = await getMe();
    const github = me.githubSignIn ?? true;
    return { me: me.login === null && !me.admin ? null : me, githubSignIn: github };
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      const body = error.body;
      const github =
        typeof body === 'object' && body !== null && 'githubSignIn' in body
          ? body.githubSignIn === true
          : true;
      return { me: null, githubSignIn: github };
    }
    throw error;
  }
}

async function main(): Promise<void> {
  const app = document.getElementById('app') ?? document.body;
  const path = location.pathname;
  const run = /^\/runs\/([^/]+)\/?$/.exec(path);
  const runId = run?.[1] === undefined ? null : decodeURIComponent(run[1]);
  // A run's data is asked for alongside /api/me: a signed-in reader waits one round trip less.
  const prefetched =
    runId === null ? null : { run: getRun(runId), events: getEvents(runId, 0, RUN_PAGE_LIMIT) };
  if (prefetched !== null) {
    void prefetched.run.catch(() => undefined);
    void prefetched.events.catch(() => undefined);
  }
  const { me, githubSignIn } = await whoAmI();
  if (me === null) {
    app.replaceChildren(signInView(githubSignIn));
    document.documentElement.dataset.view = 'sign-in';
    return;
  }
  if (path === '/' || path === '' || path === '/runs' || path === '/runs/') {
    const list = new RunsList();
    app.replaceChildren(topBar(me), list.root);
    document.documentElement.dataset.view = 'runs';
    await list.start();
  } else if (runId !== null) {
    const view = new RunView(runId, prefetched);
    app.replaceChildren(topBar(me), view.root);
    document.documentElement.dataset.view = 'run';
    await view.start();
  } else {
    app.replaceChildren(topBar(me), notFound());
    document.documentElement.dataset.view = 'not-found';
  }
}

main().catch((error: unknown) => {
  const app = document.getElementById('app') ?? document.body;
  app.replaceChildren(
    h(
      'main',
      { class: 'fatal' },
      h('h1', null, 'Something went wrong'),
      h('pre', null, error instanceof Error ? error.message : String(error)),
    ),
  );
});
