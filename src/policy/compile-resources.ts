import {
  BINARY_FACTORS,
  BINARY_SUFFIXES,
  captureInitContainer,
  DECIMAL_POWERS,
  MAX_MILLI,
  MAX_MILLI_DIGITS,
  MAX_PADDED_CONTAINERS,
  MAX_PADDED_INIT_CONTAINERS,
  MILLI_PATTERN,
  objectAt,
  type JsonObject,
  type SidecarTemplate,
} from '../injection/index.js';
import { captureLists } from './compile-capture.js';
import { celMap, celString } from './cel-literal.js';
import { templateVariable } from './template-variable.js';

/**
 * Pod-level resources padded in CEL (docs/design.md §14), as the webhook
 * pads them (injection/merge/pod-resources.ts) and with its very arithmetic
 * (injection/basics/milli-quantity.ts): every amount in thousandths as an int64,
 * -1 for a form or a size out of what both modes take, so the Pod is left
 * uninjected rather than padded otherwise. CEL has no `let`: `[x].map(v, e)[0]`
 * binds a value once. The Pod's own amounts are variables shared by every
 * template; each template's added containers (which its native choice
 * places) make its aggregates, and `t<i>Padding` is the optional list of
 * operations: none when the Pod cannot be padded.
 */

const LIMIT = String(MAX_MILLI);
const POWERS_OF_TEN = `[${Array.from({ length: MAX_MILLI_DIGITS + 1 }, (_, power) => String(10n ** BigInt(power))).join(', ')}]`;
const DECIMALS = celMap(Object.entries(DECIMAL_POWERS).map(([key, power]) => ({ key, expression: String(power) })));
const BINARIES = celMap(Object.entries(BINARY_FACTORS).map(([key, factor]) => ({ key, expression: String(factor) })));

/** `[value].map(name, body)[0]`: VALUE evaluated once, as NAME in BODY. */
function bind(name: string, value: string, body: string): string {
  return `[${value}].map(${name}, ${body})[0]`;
}

/** The tables celMilli looks up: literals, or variables that hold them (evaluated once, cheaper). */
export interface MilliTables {
  readonly powersOfTen: string;
  readonly decimals: string;
  readonly binaries: string;
}

export const MILLI_TABLE_LITERALS: MilliTables = { powersOfTen: POWERS_OF_TEN, decimals: DECIMALS, binaries: BINARIES };
const TABLES: MilliTables = { powersOfTen: 'variables.milliPowersOfTen', decimals: 'variables.milliDecimalPowers', binaries: 'variables.milliBinaryFactors' };

/** The CEL of toMilli: TEXT (a string expression) in thousandths, rounded up; -1 outside the forms taken. */
export function celMilli(text: string, tables: MilliTables = MILLI_TABLE_LITERALS): string {
  const p = tables.powersOfTen;
  const { decimals: DECIMALS, binaries: BINARIES } = tables;
  // n: [digits as int, power of ten (3 for thousandths, less the decimals), binary factor or 1]
  const value =
    'n[0] == 0 ? 0 : ' +
    `n[2] > 1 ? (n[1] < 0 ? -1 : n[0] <= ${LIMIT} / n[2] / ${p}[n[1]] ? n[0] * n[2] * ${p}[n[1]] : -1) : ` +
    `n[1] >= 0 ? (n[1] > ${MAX_MILLI_DIGITS} ? -1 : n[0] <= ${LIMIT} / ${p}[n[1]] ? n[0] * ${p}[n[1]] : -1) : ` +
    `-n[1] > ${MAX_MILLI_DIGITS} ? 1 : (n[0] + ${p}[-n[1]] - 1) / ${p}[-n[1]]`;
  const parts = bind(
    's',
    'r.substring(size(f) + (r.startsWith(".") ? 1 : 0))',
    `size(w + f) == 0 || size(w + f) > ${MAX_MILLI_DIGITS} ? -1 : ` +
      bind('n', `[int(w + f), (s in ${DECIMALS} ? ${DECIMALS}[s] : s in ${BINARIES} ? 0 : int(s.substring(1))) + 3 - size(f), s in ${BINARIES} ? ${BINARIES}[s] : 1]`, value),
  );
  const body = bind('w', 't.find("^[0-9]*")', bind('r', 't.substring(size(w))', bind('f', 'r.startsWith(".") ? r.substring(1).find("^[0-9]*") : ""', parts)));
  return bind('t', text, `!t.matches(${celString(MILLI_PATTERN)}) ? -1 : ${body}`);
}

/** The CEL of renderMilli: VALUE (an int expression, 0..MAX_MILLI) as canonical text in the format of TEXT (the Pod's). */
export function celRenderMilli(value: string, text: string): string {
  const binary = `[${BINARY_SUFFIXES.slice(0, 6).map((_, power) => String(1024n ** BigInt(power))).join(', ')}]`;
  const thousands = `[${Array.from({ length: 6 }, (_, step) => String(1000n ** BigInt(step))).join(', ')}]`;
  const binaryText = bind('k', `[5, 4, 3, 2, 1, 0].filter(k, (v / 1000) % ${binary}[k] == 0)[0]`, `string(v / 1000 / ${binary}[k]) + ${celStringList(BINARY_SUFFIXES.slice(0, 6))}[k]`);
  const decimalText = bind(
    'k',
    `[5, 4, 3, 2, 1, 0].filter(k, v % ${thousands}[k] == 0)[0]`,
    `string(v / ${thousands}[k]) + (x.matches("[eE][+-]?[0-9]+$") ? (k == 1 ? "" : "e" + string(3 * k - 3)) : ${celStringList(['m', '', 'k', 'M', 'G', 'T'])}[k])`,
  );
  return bind('v', value, bind('x', text, `v == 0 ? "0" : x.matches("(Ki|Mi|Gi|Ti|Pi|Ei)$") && v % 1000 == 0 && v >= 1024000 ? ${binaryText} : ${decimalText}`));
}

function celStringList(items: readonly string[]): string {
  return `[${items.map(celString).join(', ')}]`;
}

/**
 * A container as a row of ints: per resource NAMES[r], at 2r its request
 * (defaulted to its limit) and at 2r+1 its limit, in thousandths (0 when
 * unset, -1 out of the forms taken); last, 1 for a native sidecar.
 */
function row(container: string, names: readonly string[]): string {
  const texts = names.flatMap((name) => {
    const key = `[?${celString(name)}]`;
    const limit = `${container}.?resources.?limits${key}`;
    // dyn: a template's quantity may be a number (`cpu: 1`), which string() takes only when chosen at run time.
    return [`string(dyn(${container}.?resources.?requests${key}.orValue(${limit}.orValue(""))))`, `string(dyn(${limit}.orValue("")))`];
  });
  return `[${texts.join(', ')}].map(a, a == "" ? 0 : ${celMilli('a', TABLES)}) + [${container}.?restartPolicy.orValue("") == "Always" ? 1 : 0]`;
}

/**
 * What container rows CR and init container rows IR aggregate to, per
 * column: the sum of containers and sidecars against each regular init
 * container with the sidecars before it (AggregateContainerRequests); -1
 * for a column with an amount out of the forms taken or whose amounts all
 * together reach the bound.
 */
function aggregates(containers: string, inits: string, columns: number): string {
  const side = String(columns);
  const all = 'cr.map(x, x[k]).sum() + ir.map(x, x[k]).sum()';
  // Each regular init container with the native sidecars before it: sidecars and regular ones apart first, with their places.
  const inOrder = `ir.transformList(i, x, x[${side}] != 1, x[k] + sc.filter(y, y[0] < i).map(y, y[k + 1]).sum())`;
  const body =
    `cr.exists(x, x[k] < 0) || ir.exists(x, x[k] < 0) || cr.map(x, double(x[k])).sum() + ir.map(x, double(x[k])).sum() > 2e18 || ${all} > ${LIMIT} ? -1 : ` +
    `([cr.map(x, x[k]).sum() + sc.map(y, y[k + 1]).sum()] + ${inOrder}).max()`;
  const indices = `[${Array.from({ length: columns }, (_, index) => String(index)).join(', ')}]`;
  return bind('cr', containers, bind('ir', inits, bind('sc', `ir.transformList(i, x, x[${side}] == 1, [i] + x)`, `${indices}.map(k, ${body})`)));
}

/** The resources to look at: cpu and memory (the overrides'), and any a template's container names. */
export function paddedResourceNames(entries: readonly SidecarTemplate[]): string[] {
  const names = new Set(['cpu', 'memory']);
  for (const template of entries) {
    const containers: JsonObject[] = [...template.containers, ...template.initContainers, ...(template.capture === undefined ? [] : [captureInitContainer(template.capture, template.capture.defaults)])];
    for (const container of containers) {
      for (const kind of ['requests', 'limits']) for (const name of Object.keys(objectAt(objectAt(container, 'resources'), kind) ?? {})) names.add(name);
    }
  }
  return [...names];
}

/** The containers each template adds, where (the webhook's AddedContainers): [containers, first init containers, last ones]. */
function addedLists(entries: readonly SidecarTemplate[]): string {
  let expression = '[dyn([]), dyn([]), dyn([])]';
  for (let index = entries.length - 1; index >= 0; index -= 1) {
    const template = entries[index];
    if (template === undefined) continue;
    const v = templateVariable(template, `t${index}`);
    const capture = captureLists(template, `t${index}`)?.init ?? '[]';
    const lists = `${v('Native')} ? [dyn([]), dyn(${capture} + ${v('Containers')}), dyn(${v('InitContainers')})] : [dyn(${v('Containers')}), dyn([]), dyn(${v('InitContainers')} + ${capture})]`;
    expression = `variables.template == ${celString(template.name)} ? (${lists}) : ${expression}`;
  }
  return expression;
}

/**
 * The padding's variables, read by the mutation once the template's lists
 * are known, for a Pod with Pod-level resources (`podResources`):
 * `resourcesPadding`, an optional list of [path, text] (none when the Pod
 * cannot be padded; JSONPatch is the mutation's own type).
 */
export function resourcesVariables(entries: readonly SidecarTemplate[]): JsonObject[] {
  const names = paddedResourceNames(entries);
  const columns = names.length * 2;
  const resources = 'object.spec.resources';
  const size = (list: string): string => `size(variables.resourcesAdded[${list}])`;
  return [
    { name: 'milliPowersOfTen', expression: POWERS_OF_TEN },
    { name: 'milliDecimalPowers', expression: DECIMALS },
    { name: 'milliBinaryFactors', expression: BINARIES },
    { name: 'podResources', expression: `has(${resources}) && ((has(${resources}.requests) && size(${resources}.requests) > 0) || (has(${resources}.limits) && size(${resources}.limits) > 0))` },
    { name: 'resourcesAdded', expression: addedLists(entries) },
    { name: 'resourcesOwnRows', expression: `object.spec.containers.map(c, ${row('c', names)})` },
    { name: 'resourcesOwnInitRows', expression: `(has(object.spec.initContainers) ? object.spec.initContainers : []).map(c, ${row('c', names)})` },
    { name: 'resourcesAddedRows', expression: `(variables.resourcesAdded[0] + variables.resourcesAdded[1] + variables.resourcesAdded[2]).map(c, ${row('c', names)})` },
    { name: 'resourcesBefore', expression: aggregates('variables.resourcesOwnRows', 'variables.resourcesOwnInitRows', columns) },
    {
      name: 'resourcesAfter',
      expression: aggregates(
        `variables.resourcesOwnRows + variables.resourcesAddedRows.transformList(i, x, i < ${size('0')}, x)`,
        `variables.resourcesAddedRows.transformList(i, x, i >= ${size('0')} && i < ${size('0')} + ${size('1')}, x) + variables.resourcesOwnInitRows + variables.resourcesAddedRows.transformList(i, x, i >= ${size('0')} + ${size('1')}, x)`,
        columns,
      ),
    },
    { name: 'resourcesPadding', expression: paddingExpression(names) },
  ];
}

/** JSON Pointer's escape of a key (jsonpatch.escapeKey is the mutation's only). */
const pointerKey = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * `resourcesPadding`: per resource the Pod sets and an added container
 * carries, as padOne; none for a Pod with more containers or init
 * containers than both modes pad (checked before any is read).
 */
function paddingExpression(names: readonly string[]): string {
  const each = names.map((name, index) => `(${paddingOf(name, index)})`);
  const all = each.map((_, index) => `p[${index}].value()`).join(' + ');
  const considered = names.map((name, index) => `(${setsAndCarries(name, index)})`).join(' || ');
  const added = (list: number): string => `size(variables.resourcesAdded[${list}])`;
  const tooMany =
    `size(object.spec.containers) + ${added(0)} > ${MAX_PADDED_CONTAINERS} || ` +
    `(has(object.spec.initContainers) ? size(object.spec.initContainers) : 0) + ${added(1)} + ${added(2)} > ${MAX_PADDED_INIT_CONTAINERS}`;
  const padding = bind('p', `[${each.join(', ')}]`, `p.all(o, o.hasValue()) ? optional.of(${all}) : optional.none()`);
  return `!(${considered}) ? optional.of([]) : ${tooMany} ? optional.none() : ${padding}`;
}

/** The Pod sets resource NAME (index INDEX) at the Pod level and an added container requests or limits it. */
function setsAndCarries(name: string, index: number): string {
  const key = celString(name);
  const resources = 'object.spec.resources';
  const carries = `variables.resourcesAddedRows.exists(x, x[${2 * index}] != 0 || x[${2 * index + 1}] != 0)`;
  return `(${resources}.?requests[?${key}].hasValue() || ${resources}.?limits[?${key}].hasValue()) && ${carries}`;
}

/**
 * One resource's [path, text] pairs, optional (none when it cannot be
 * padded): on z = [request, limit (-2: not set, -1: out of the forms),
 * aggregates before and after of requests, then of limits, the largest
 * limit of an added regular container].
 */
function paddingOf(name: string, index: number): string {
  const key = celString(name);
  const resources = 'object.spec.resources';
  const text = (kind: 'requests' | 'limits'): string => `${resources}.?${kind}[?${key}].orValue("")`;
  const given = (kind: 'requests' | 'limits'): string => bind('g', text(kind), `g == "" ? -2 : ${celMilli('g', TABLES)}`);
  const added = `variables.resourcesAddedRows.transformList(i, x, i < size(variables.resourcesAdded[0]), x[${2 * index + 1}])`;
  const values = `[${given('requests')}, ${given('limits')}, variables.resourcesBefore[${2 * index}], variables.resourcesAfter[${2 * index}], variables.resourcesBefore[${2 * index + 1}], variables.resourcesAfter[${2 * index + 1}], ([0] + ${added}).max()]`;
  const pair = (kind: 'requests' | 'limits', value: string): string => `[${celString(`/spec/resources/${kind}/${pointerKey(name)}`)}, ${celRenderMilli(value, text(kind))}]`;
  const pairs = `(z[0] >= 0 && q != z[0] ? [${pair('requests', 'q')}] : []) + (z[1] >= 0 && l != z[1] ? [${pair('limits', 'l')}] : [])`;
  const padded = bind(
    'e',
    'z[0] == -2 ? -2 : z[0] + z[3] - z[2]',
    bind(
      'm',
      'z[1] == -2 ? -2 : [z[1] + z[5] - z[4], z[6]].max()',
      bind('l', 'm != -2 && e != -2 ? [m, e].max() : m', bind('q', 'z[0] >= 0 && z[1] >= 0 && z[0] == z[1] ? l : e', `q > ${LIMIT} || l > ${LIMIT} ? optional.none() : optional.of(${pairs})`)),
    ),
  );
  const body = `z[0] == -1 || z[1] == -1 || z[2] < 0 || z[3] < 0 || z[4] < 0 || z[5] < 0 || z[6] < 0 ? optional.none() : ${padded}`;
  return `!(${setsAndCarries(name, index)}) ? optional.of([]) : ${bind('z', values, body)}`;
}
