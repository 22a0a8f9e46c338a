export const MIB = 1024 * 1024;

/** How the report prints each kind of figure. */
export const fmt = {
  rps: (value: number): string => value.toFixed(0),
  ms: (value: number): string => value.toFixed(2),
  mib: (bytes: number): string => (bytes / MIB).toFixed(1),
  ratio: (value: number): string => `${value.toFixed(2)}×`,
  ratioRange: ({ lowest, highest }: { readonly lowest: number; readonly highest: number }): string => `${lowest.toFixed(2)}–${highest.toFixed(2)}×`,
};

/** Columns padded to their widest cell: the first left-aligned, the others right-aligned. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows.map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  ')).join('\n');
}
