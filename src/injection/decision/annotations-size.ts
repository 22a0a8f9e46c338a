import { objectAt, type JsonObject } from '../basics/index.js';

/**
 * The API server's bound on a Pod's annotations (docs/design.md §14): the
 * keys and values of all of them together, in bytes of UTF-8
 * (apimachinery's ValidateAnnotationsSize sums len(k) + len(v) and refuses
 * more than TotalAnnotationSizeLimitB, 256 KiB). Our patch adds annotations
 * (the status, the per-Pod bootstrap of proxy-config.ts): the injected Pod's
 * must stay within it, the Pod's own included, or the Pod is left as it was.
 */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** The length of TEXT in UTF-8, as Go's len() of the string the API server decodes (a lone surrogate becomes U+FFFD, 3 bytes). */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code >= 0xd800 && code <= 0xdbff && index + 1 < text.length && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00) {
      // A surrogate pair: two UTF-16 units, four bytes.
      bytes += 2;
      index += 1;
    } else bytes += 2;
  }
  return bytes;
}

/**
 * What ValidateAnnotationsSize counts of one entry. A value that is no string
 * counts as none: the API server decodes the Pod (map[string]string) before
 * admission, so only a review sent by hand has one, and it may be nested too
 * deep for anything but a glance.
 */
function entryBytes(key: string, value: unknown): number {
  return utf8Length(key) + (typeof value === 'string' ? utf8Length(value) : 0);
}

/**
 * Why the Pod's annotations, once WRITTEN are added (replacing the Pod's own
 * of the same key), would be over the bound; undefined when they fit. Names
 * the largest of ours, so that the owner knows what to cut.
 */
export function annotationsSizeProblem(pod: JsonObject, written: Readonly<Record<string, string>>): string | undefined {
  const own = objectAt(objectAt(pod, 'metadata'), 'annotations') ?? {};
  // Every review of an injected Pod asks: a UTF-16 unit is at most 3 bytes of UTF-8, so most Pods are answered without reading a character.
  let units = 0;
  for (const [key, value] of Object.entries(own)) units += key.length + (typeof value === 'string' ? value.length : 0);
  for (const [key, value] of Object.entries(written)) units += key.length + value.length;
  if (3 * units <= MAX_ANNOTATIONS_BYTES) return undefined;
  let ownBytes = 0;
  let total = 0;
  for (const [key, value] of Object.entries(own)) {
    const bytes = entryBytes(key, value);
    ownBytes += bytes;
    if (!Object.hasOwn(written, key)) total += bytes;
  }
  const ours = Object.entries(written).map(([key, value]) => ({ key, bytes: entryBytes(key, value) }));
  for (const { bytes } of ours) total += bytes;
  if (total <= MAX_ANNOTATIONS_BYTES) return undefined;
  const largest = ours.reduce((most, entry) => (entry.bytes > most.bytes ? entry : most), { key: '', bytes: 0 });
  const oursBytes = ours.reduce((sum, entry) => sum + entry.bytes, 0);
  return `its annotations would total ${total} bytes, over the API server's limit of ${MAX_ANNOTATIONS_BYTES} (keys and values): the Pod's own ${ownBytes}, the injection's ${oursBytes}, most of it ${largest.key} (${largest.bytes})`;
}
