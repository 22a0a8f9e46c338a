import { describeValue } from './json.js';

/**
 * Why `reference` is not an image reference, or undefined when it is:
 * `[host[:port]/]path[:tag][@digest]` as the distribution/reference grammar has it.
 */
export function imageProblem(reference: string): string | undefined {
  // The length bound first: it also keeps the regular expression's work small.
  const match = reference.length > MAX_IMAGE_REFERENCE_LENGTH ? null : IMAGE_REFERENCE.exec(reference);
  if (match === null) return `${describeValue(reference)} is not an image reference (example: "envoyproxy/envoy:v1.31.2")`;
  const name = match[1] ?? '';
  if (name.length > MAX_IMAGE_NAME_LENGTH) return `${describeValue(reference)}: the repository name is longer than 255 characters`;
  return undefined;
}

const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}';
/** The image reference grammar; JavaScript and RE2 (CEL, for policy mode) read it alike. */
export const IMAGE_REFERENCE_PATTERN = `^(${NAME})(?::${TAG})?(?:@${DIGEST})?$`;
export const MAX_IMAGE_REFERENCE_LENGTH = 512;
/** The repository part (without tag and digest). */
export const MAX_IMAGE_NAME_LENGTH = 255;
const IMAGE_REFERENCE = new RegExp(IMAGE_REFERENCE_PATTERN);
