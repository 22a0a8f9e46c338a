/**
 * A reader for Go's CPU profiles (`/debug/pprof/profile`: gzipped
 * profile.proto), enough to sum the time under named functions: each sample
 * as its value (CPU nanoseconds, the last value of the sample) and its stack
 * of function names, innermost first. Used by bench/policy-profile.ts.
 */
import { gunzipSync } from 'node:zlib';

export interface ProfileSample {
  readonly nanoseconds: number;
  /** Function names, innermost first (inlined frames included). */
  readonly stack: readonly string[];
}

/** profile.proto's field numbers (github.com/google/pprof/proto/profile.proto). */
const PROFILE = { sample: 2, location: 4, function: 5, stringTable: 6 } as const;
const SAMPLE = { locationId: 1, value: 2 } as const;
const LOCATION = { id: 1, line: 4 } as const;
const LINE = { functionId: 1 } as const;
const FUNCTION = { id: 1, name: 2 } as const;

export function readCpuProfile(gzipped: Buffer): ProfileSample[] {
  const strings: string[] = [];
  const raw: { locations: number[]; values: number[] }[] = [];
  const locations = new Map<number, number[]>();
  const functionNames = new Map<number, number>();
  for (const [field, value] of fields(gunzipSync(gzipped))) {
    if (!(value instanceof Uint8Array)) continue;
    if (field === PROFILE.stringTable) strings.push(Buffer.from(value).toString('utf8'));
    else if (field === PROFILE.sample) {
      const sample = { locations: [] as number[], values: [] as number[] };
      for (const [inner, item] of fields(value)) {
        if (inner === SAMPLE.locationId) sample.locations.push(...numbers(item));
        if (inner === SAMPLE.value) sample.values.push(...numbers(item));
      }
      raw.push(sample);
    } else if (field === PROFILE.location) {
      let id = 0;
      const functionIds: number[] = [];
      for (const [inner, item] of fields(value)) {
        if (inner === LOCATION.id) id = Number(item);
        if (inner === LOCATION.line && item instanceof Uint8Array) for (const [lineField, lineItem] of fields(item)) if (lineField === LINE.functionId) functionIds.push(Number(lineItem));
      }
      locations.set(id, functionIds);
    } else if (field === PROFILE.function) {
      let id = 0;
      let name = 0;
      for (const [inner, item] of fields(value)) {
        if (inner === FUNCTION.id) id = Number(item);
        if (inner === FUNCTION.name) name = Number(item);
      }
      functionNames.set(id, name);
    }
  }
  const nameOf = (functionId: number): string => strings[functionNames.get(functionId) ?? 0] ?? '?';
  return raw.map((sample) => ({
    nanoseconds: sample.values[sample.values.length - 1] ?? 0,
    stack: sample.locations.flatMap((location) => (locations.get(location) ?? []).map(nameOf)),
  }));
}

/** A protobuf message's fields in order: varints as bigint, length-delimited as bytes (fixed-width ones skipped). */
function* fields(bytes: Uint8Array): Generator<[number, bigint | Uint8Array]> {
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = bytes[at++];
      if (byte === undefined) throw new Error('pprof: a varint runs past the end');
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
    }
  };
  while (at < bytes.length) {
    const key = Number(varint());
    const wireType = key & 7;
    if (wireType === 0) yield [key >> 3, varint()];
    else if (wireType === 2) {
      const length = Number(varint());
      yield [key >> 3, bytes.subarray(at, at + length)];
      at += length;
    } else if (wireType === 1) at += 8;
    else if (wireType === 5) at += 4;
    else throw new Error(`pprof: wire type ${wireType} is not protobuf's`);
  }
}

/** A repeated integer field: one varint, or a packed run of them. */
function numbers(item: bigint | Uint8Array): number[] {
  if (typeof item === 'bigint') return [Number(item)];
  const out: number[] = [];
  let at = 0;
  while (at < item.length) {
    let result = 0;
    for (let scale = 1; ; scale *= 128) {
      const byte = item[at++] ?? 0;
      result += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) break;
    }
    out.push(result);
  }
  return out;
}
