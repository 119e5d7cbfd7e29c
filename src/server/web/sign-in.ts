/** Shown when /api/me says nobody is signed in: GitHub sign-in, or the self-hosting admin token. */
import { ApiError, signInWithToken } from './api.js';
import { h } from './dom.js';

export function signInView(githubSignIn: boolean): HTMLElement {
  const next = `${location.pathname}${location.search}${location.hash}`;
  const message = h('p', { class: 'form-error', role: 'alert', hidden: true });
  const input = h('input', {
    type: 'password',
    name: 'token',
    placeholder: 'admin token',
    autocomplete: 'current-password',
    aria: { label: 'admin token' },
  });
  const submit = h('button', { type: 'submit' }, 'Sign in with token');
  const form = h(
    'form',
    {
      class: 'token-form',
      onSubmit: (event) => {
        event.preventDefault();
        const token = input.value.trim();
        if (token === '') return;
        submit.disabled = true;
        message.hidden = true;
        signInWithToken(token).then(
          () => {
            location.reload();
          },
          (error: unknown) => {
            submit.disabled = false;
            message.hidden = false;
            message.textContent =
              error instanceof ApiError && (error.status === 401 || error.status === 403)
                ? 'That token was not accepted.'
                : `Sign-in failed: ${(error as Error).message}`;
          },
        );
      },
    },
    h('label', null, 'Admin token (self-hosting)', input),
    submit,
    message,
  );
  return h(
    'main',
    { class: 'sign-in' },
    h('h1', null, 'Sign in to Issue Agent'),
    h(
      'p',
      null,
      'Runs show code, commands and outputs of repositories; sign in to see the runs you may read.',
    ),
    ...(githubSignIn
      ? [
          h(
            'a',
            { class: 'button primary github', href: `/auth/github/login?next=${encodeURIComponent(next)}` },
            'Sign in with GitHub',
          ),
          h('div', { class: 'or' }, 'or'),
        ]
      : []),
    form,
  );
}
