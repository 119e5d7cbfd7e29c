/**
 * A small DOM builder. Text is only ever set as text nodes: no untrusted string reaches innerHTML,
 * an attribute that can run code, or a URL without a checked scheme.
 */

export type Child = Node | string | number | null | undefined | false;

export interface Props {
  readonly class?: string;
  readonly id?: string;
  readonly title?: string;
  /** Only http(s) and same-origin paths are kept (see safeHref). */
  readonly href?: string;
  readonly type?: string;
  readonly name?: string;
  readonly value?: string;
  readonly placeholder?: string;
  readonly autocomplete?: string;
  readonly role?: string;
  readonly hidden?: boolean;
  readonly disabled?: boolean;
  readonly data?: Readonly<Record<string, string>>;
  readonly aria?: Readonly<Record<string, string>>;
  readonly onClick?: (event: MouseEvent) => void;
  readonly onSubmit?: (event: SubmitEvent) => void;
  readonly onChange?: (event: Event) => void;
}

/** An href that cannot run script: http(s) URLs and absolute paths on this origin. */
export function safeHref(url: string): string | null {
  if (url.startsWith('/') && !url.startsWith('//')) return url;
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : null;
  } catch {
    return null;
  }
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    parent.appendChild(
      typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c,
    );
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props !== null) {
    if (props.class !== undefined) el.className = props.class;
    if (props.id !== undefined) el.id = props.id;
    if (props.title !== undefined) el.title = props.title;
    if (props.href !== undefined) {
      const href = safeHref(props.href);
      if (href !== null) el.setAttribute('href', href);
    }
    for (const k of ['type', 'name', 'value', 'placeholder', 'autocomplete', 'role'] as const) {
      const v = props[k];
      if (v !== undefined) el.setAttribute(k, v);
    }
    if (props.hidden === true) el.hidden = true;
    if (props.disabled === true) el.setAttribute('disabled', '');
    for (const [k, v] of Object.entries(props.data ?? {})) el.dataset[k] = v;
    for (const [k, v] of Object.entries(props.aria ?? {})) el.setAttribute(`aria-${k}`, v);
    const target: HTMLElement = el;
    if (props.onClick !== undefined) target.addEventListener('click', props.onClick);
    if (props.onSubmit !== undefined) target.addEventListener('submit', props.onSubmit);
    if (props.onChange !== undefined) target.addEventListener('change', props.onChange);
  }
  append(el, children);
  return el;
}

export function clear(el: Element): void {
  el.replaceChildren();
}
