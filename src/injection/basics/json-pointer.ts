/** RFC 6901: `~` becomes `~0` first, then `/` becomes `~1`; the order matters. */
export function escapePointerToken(token: string): string {
  if (!token.includes('~') && !token.includes('/')) return token;
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** A JSON Pointer from unescaped tokens; the one place pointers are built. */
export function jsonPointer(...tokens: readonly (string | number)[]): string {
  let pointer = '';
  for (const token of tokens) pointer += '/' + escapePointerToken(String(token));
  return pointer;
}
