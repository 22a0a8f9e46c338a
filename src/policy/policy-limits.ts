import type { JsonObject, JsonValue, SidecarTemplate, TemplateSet } from '../injection/index.js';

/**
 * What the API server refuses in a MutatingAdmissionPolicy, so that a
 * template is refused here, naming the limit, rather than by `kubectl apply`
 * or a controller retrying forever:
 * - an expression over 100,000 code points: cel-go's parser default
 *   (parser.go: `expressionSizeCodePointLimit = 100_000` when unset), which
 *   the API server's CEL environment does not change;
 * - a lone UTF-16 surrogate in a string: CEL strings are Unicode code points,
 *   and its parser refuses a `\uD800` escape ("invalid unicode code point");
 *   JSON.stringify, which writes our literals, escapes only lone surrogates
 *   (a pair is written as the character itself, which CEL takes).
 * The cost budgets (k8s.io/apiserver's PerCallLimit, 1,000,000 per
 * expression, and RuntimeCELCostBudget, 10,000,000 per policy) depend on the
 * Pod, not on the template alone; the parity tier checks a 1 MiB Pod of 300
 * containers against them.
 */
export const MAX_EXPRESSION_CODE_POINTS = 100_000;

/** The policy's expressions with where each sits (`variables.t0Containers`, `mutations[0]`, ...). */
function expressionsOf(policy: JsonObject): { place: string; expression: string }[] {
  const spec = (policy['spec'] ?? {}) as { matchConditions?: { name: string; expression: string }[]; variables?: { name: string; expression: string }[]; mutations?: { jsonPatch?: { expression?: string } }[] };
  return [
    ...(spec.matchConditions ?? []).map((condition) => ({ place: `matchConditions ${condition.name}`, expression: condition.expression })),
    ...(spec.variables ?? []).map((variable) => ({ place: `variables.${variable.name}`, expression: variable.expression })),
    ...(spec.mutations ?? []).map((mutation, index) => ({ place: `mutations[${index}]`, expression: mutation.jsonPatch?.expression ?? '' })),
  ];
}

/**
 * Every limit the compiled POLICY passes, each naming the template it comes
 * from (variables `t<index>...` are the template's of that index; other
 * expressions hold every template); empty when the API server accepts it.
 */
export function policyLimitProblems(templates: TemplateSet, policy: JsonObject): string[] {
  const entries = [...templates.templates.values()];
  const problems: string[] = [];
  for (const template of entries) {
    for (const [path, text] of strings(template)) {
      if (LONE_SURROGATE.test(text)) problems.push(`template "${template.name}": ${path}: holds a lone UTF-16 surrogate, which a CEL string cannot hold (the API server refuses it as an invalid unicode code point)`);
    }
  }
  for (const { place, expression } of expressionsOf(policy)) {
    const size = [...expression].length;
    if (size <= MAX_EXPRESSION_CODE_POINTS) continue;
    const owner = /^variables\.t(\d+)[A-Z]/.exec(place);
    const template = owner === null ? undefined : entries[Number(owner[1])];
    const whose = template === undefined ? `the templates (${entries.map((entry) => `"${entry.name}"`).join(', ')})` : `template "${template.name}"`;
    problems.push(
      `${whose}: policy expression ${place} is ${size.toLocaleString('en-US')} code points; the API server refuses CEL expressions over ${MAX_EXPRESSION_CODE_POINTS.toLocaleString('en-US')} (cel-go's parser limit): move large values (an inline bootstrap, long args) into a ConfigMap the template mounts, or use the webhook`,
    );
  }
  return problems;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Every string of the template's lists (keys too), with its path. */
function* strings(template: SidecarTemplate): Generator<[string, string]> {
  const lists: [string, readonly JsonObject[]][] = [
    ['containers', template.containers],
    ['initContainers', template.initContainers],
    ['volumes', template.volumes],
    ['imagePullSecrets', template.imagePullSecrets],
  ];
  for (const [name, list] of lists) yield* walk(list as JsonValue, name);
}

function* walk(value: JsonValue, path: string): Generator<[string, string]> {
  if (typeof value === 'string') yield [path, value];
  else if (Array.isArray(value)) for (const [index, item] of value.entries()) yield* walk(item, `${path}[${index}]`);
  else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      yield [`${path} (a key)`, key];
      yield* walk(item, `${path}.${key}`);
    }
  }
}
