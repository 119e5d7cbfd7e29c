/**
 * Hidden content in untrusted text: things a human reviewer does not see on GitHub but a model would
 * read as instructions. Removed before the text reaches a prompt.
 */
const HTML_COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
// Zero-width characters, the word joiner, soft hyphen, bidirectional controls, and tag characters.
const INVISIBLE =
  /[\u00AD\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF]|\uDB40[\uDC00-\uDC7F]/g;
// Markdown image alt text and titles are not shown in rendered issues: keep the image, drop the text.
const IMAGE_ALT = /!\[[^\]]*\]\(\s*([^)\s]+)(?:\s+"[^"]*")?\s*\)/g;
const HTML_ALT_TITLE = /\s(?:alt|title)\s*=\s*(?:"[^"]*"|'[^']*')/gi;
const HIDDEN_HTML =
  /<(details|div|span|p)\b[^>]*\b(?:hidden|style\s*=\s*["'][^"']*display\s*:\s*none)[^>]*>[\s\S]*?<\/\1>/gi;

export function stripHiddenText(text: string): string {
  return text
    .replace(HTML_COMMENT, '')
    .replace(HIDDEN_HTML, '')
    .replace(INVISIBLE, '')
    .replace(IMAGE_ALT, '![]($1)')
    .replace(HTML_ALT_TITLE, '');
}

/**
 * Wraps untrusted text in a tag the system prompt tells the model to treat as data. The closing tag
 * is neutralised inside the text so the text cannot end the fence early.
 */
export function fenceUntrusted(label: string, text: string): string {
  const tag = `untrusted-${label}`;
  const clean = stripHiddenText(text).replace(new RegExp(`</?${tag}`, 'gi'), (m) => m.replace('<', '&lt;'));
  return `<${tag}>\n${clean}\n</${tag}>`;
}
