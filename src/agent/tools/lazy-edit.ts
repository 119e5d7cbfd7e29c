/**
 * Placeholders a model writes when it means "keep what was there" instead of writing it out. An edit
 * containing one would delete real code, so it is refused unless the text being replaced already
 * contained the same placeholder.
 */
const PLACEHOLDERS: readonly RegExp[] = [
  /(?:\.\.\.|…)\s*(?:the\s+)?(?:rest|remainder)\s+of\s+(?:the\s+)?(?:code|file|function|class|implementation|methods?|tests?)/i,
  /(?:\.\.\.|…)\s*(?:existing|previous|unchanged|original|other|same|remaining)\s+(?:code|content|implementation|methods?|functions?|logic|tests?|imports?)/i,
  /(?:\/\/|#|\/\*|<!--)\s*(?:the\s+)?(?:rest|remainder)\s+of\s+(?:the\s+)?(?:code|file|function|class|implementation)\s+(?:remains?|stays?|is|as before|unchanged)/i,
  /(?:\/\/|#|\/\*|<!--)\s*(?:existing|previous|unchanged|original)\s+(?:code|implementation|content)\s*(?:here|\.\.\.|…|remains?|unchanged)?\s*(?:\*\/|-->)?\s*$/im,
  /(?:\/\/|#)\s*\.\.\.\s*$/m,
];

export function findLazyPlaceholder(newText: string, oldText = ''): string | null {
  for (const re of PLACEHOLDERS) {
    const m = re.exec(newText);
    if (m !== null && !re.test(oldText)) return m[0].trim();
  }
  return null;
}
