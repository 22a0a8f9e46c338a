import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_MILLI, milliFormat, parseQuantity, renderMilli, toMilli, type MilliFormat } from '../src/injection/index.js';

/**
 * The arithmetic both modes pad Pod-level resources with (docs/design.md
 * §14); test/e2e/policy-quantity.test.ts checks its CEL against these
 * functions on the real API server.
 */

describe('toMilli: a quantity in whole thousandths, rounded up', () => {
  it('the forms of issue 34 and what the API server hands admission', () => {
    const cases: [string, bigint][] = [
      ['0.5', 500n], ['500m', 500n], ['1e3', 1_000_000n], ['1Ki', 1_024_000n], ['128974848', 128_974_848_000n], ['129e6', 129_000_000_000n],
      ['129M', 129_000_000_000n], ['123Mi', 123n * 1024n * 1024n * 1000n], ['1.5Gi', 1536n * 1024n * 1024n * 1000n], ['0.0001', 1n], ['100.5m', 101n],
      ['10e-3', 10n], ['1e-30', 1n], ['.5', 500n], ['5.', 5000n], ['0e99', 0n], ['909Ti', 909n * 1024n ** 4n * 1000n],
    ];
    for (const [text, expected] of cases) assert.equal(toMilli(text) ?? -1n, expected, text);
  });

  it('undefined out of the forms both modes take', () => {
    for (const text of ['', '.', '-1', '+1', '1 ', 'abc', '100u', '5n', '1e100', '1.0001Gi', '1000000000000000000', '1P', '910Ti', '1Ei', '7Pi', '999Pi', '1E']) {
      assert.equal(toMilli(text), undefined, text);
    }
  });

  it('the exact value rounded up to 1m, for every text of the grammar within 18 digits and the bound', () => {
    const suffixes = ['', 'm', 'k', 'M', 'G', 'Ki', 'Mi', 'Gi', 'e3', 'e-2', 'E6'];
    let checked = 0;
    for (let seed = 1; seed < 4000; seed += 1) {
      const whole = String((seed * 7919) % 100_000);
      const decimals = seed % 3 === 0 ? '' : String((seed * 104_729) % 10_000).padStart(seed % 5, '0');
      const suffix = suffixes[seed % suffixes.length] ?? '';
      const text = `${whole}${decimals === '' ? '' : `.${decimals}`}${suffix}`;
      const exact = parseQuantity(text);
      assert.ok(exact !== undefined, text);
      const ceiling = (exact.numerator * 1000n + exact.denominator - 1n) / exact.denominator;
      const binaryTooFine = suffix.endsWith('i') && decimals.length > 3;
      assert.equal(toMilli(text), binaryTooFine || ceiling > MAX_MILLI ? undefined : ceiling, text);
      checked += 1;
    }
    assert.ok(checked > 3000);
  });
});

describe('renderMilli: the canonical text the API server stores', () => {
  it('in the format of the Pod\'s value', () => {
    const cases: [bigint, MilliFormat, string][] = [
      [0n, 'BinarySI', '0'], [1500n, 'DecimalSI', '1500m'], [2000n, 'DecimalSI', '2'], [1_200_000n, 'DecimalSI', '1200'], [1_200_000_000n, 'DecimalSI', '1200k'],
      [1_024_000n, 'BinarySI', '1Ki'], [1_023_000n, 'BinarySI', '1023'], [1_025_000n, 'BinarySI', '1025'], [1_500n, 'BinarySI', '1500m'], [1_048_577_500n, 'BinarySI', '1048577500m'],
      [1_342_177_280_000n, 'BinarySI', '1280Mi'], [2_000_100n, 'DecimalExponent', '2000100e-3'], [1_000_000n, 'DecimalExponent', '1e3'], [5_000n, 'DecimalExponent', '5'],
      [5n * 10n ** 17n, 'DecimalSI', '500T'], [MAX_MILLI, 'DecimalSI', '999999999999999999m'],
    ];
    for (const [value, format, expected] of cases) assert.equal(renderMilli(value, format), expected, `${value} ${format}`);
  });

  it('reads back as the same value, and the text a binary or an exponent value gives keeps its format', () => {
    for (let seed = 1n; seed < 3000n; seed += 1n) {
      const value = (seed * 1_000_003n * seed * 1024n) % MAX_MILLI;
      for (const format of ['DecimalSI', 'BinarySI', 'DecimalExponent'] as const) {
        const text = renderMilli(value, format);
        assert.equal(toMilli(text), value, `${value} ${format}: ${text}`);
        if (format === 'BinarySI' && value % 1000n === 0n && value >= 1_024_000n) assert.equal(milliFormat(text), text.endsWith('i') ? 'BinarySI' : 'DecimalSI', text);
      }
    }
  });
});
