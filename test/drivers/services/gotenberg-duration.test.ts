// The gotenberg service reads `waitDelay` as Gotenberg does, with Go's time.ParseDuration: the cases
// of Go's own tests (src/time/time_test.go, parseDurationTests and parseDurationErrorTests) give the
// same value or the same message here.
import { describe, expect, it } from 'vitest';
import { goDuration } from '../../../src/drivers/services/gotenberg/duration.js';

const S = 1_000;
const M = 60 * S;
const H = 60 * M;

describe("Go's time.ParseDuration", () => {
  it.each([
    ['0', 0],
    ['5s', 5 * S],
    ['30s', 30 * S],
    ['1478s', 1478 * S],
    ['-5s', -5 * S],
    ['+5s', 5 * S],
    ['-0', 0],
    ['+0', 0],
    ['5.0s', 5 * S],
    ['5.6s', 5.6 * S],
    ['5.s', 5 * S],
    ['.5s', 500],
    ['1.0s', S],
    ['1.00s', S],
    ['1.004s', 1004],
    ['1.0040s', 1004],
    ['100.00100s', 100_001],
    ['10ns', 10e-6],
    ['11us', 11e-3],
    ['12µs', 12e-3],
    ['12μs', 12e-3],
    ['13ms', 13],
    ['14s', 14 * S],
    ['15m', 15 * M],
    ['16h', 16 * H],
    ['3h30m', 3 * H + 30 * M],
    ['10.5s4m', 4 * M + 10.5 * S],
    ['-2m3.4s', -(2 * M + 3.4 * S)],
    ['1h2m3s4ms5us6ns', 3_723_004.005006],
    ['39h9m14.425s', 39 * H + 9 * M + 14_425],
    ['52763797000ns', 52_763.797],
    ['0.3333333333333333333h', 20 * M],
    ['9223372036854775807ns', 9_223_372_036_854.775807],
    ['9223372036s854ms775us807ns', 9_223_372_036_854.775807],
    ['-9223372036854775808ns', -9_223_372_036_854.775808],
    ['-2562047h47m16.854775808s', -9_223_372_036_854.775808],
    ['0.100000000000000000000h', 6 * M],
    ['0.830103483285477580700h', 49 * M + 48 * S + 372.539827],
  ])('reads %s', (input, ms) => {
    expect(goDuration(input)).toBeCloseTo(ms, 6);
  });

  it.each([
    ['', 'time: invalid duration ""'],
    ['3', 'time: missing unit in duration "3"'],
    ['-', 'time: invalid duration "-"'],
    ['s', 'time: invalid duration "s"'],
    ['.', 'time: invalid duration "."'],
    ['-.', 'time: invalid duration "-."'],
    ['.s', 'time: invalid duration ".s"'],
    ['+.s', 'time: invalid duration "+.s"'],
    ['1d', 'time: unknown unit "d" in duration "1d"'],
    ['1.5', 'time: missing unit in duration "1.5"'],
    ['1s2', 'time: missing unit in duration "1s2"'],
    ['1 s', 'time: unknown unit " s" in duration "1 s"'],
    ['\uFFFD', 'time: invalid duration "\\xef\\xbf\\xbd"'],
    ['1\uFFFD hello', 'time: unknown unit "\\xef\\xbf\\xbd hello" in duration "1\\xef\\xbf\\xbd hello"'],
    ['9223372036854775810ns', 'time: invalid duration "9223372036854775810ns"'],
    ['9223372036854775808ns', 'time: invalid duration "9223372036854775808ns"'],
    ['-9223372036854775809ns', 'time: invalid duration "-9223372036854775809ns"'],
    ['9223372036854776us', 'time: invalid duration "9223372036854776us"'],
    ['3000000h', 'time: invalid duration "3000000h"'],
    ['9223372036854775.808us', 'time: invalid duration "9223372036854775.808us"'],
    ['9223372036854ms775us808ns', 'time: invalid duration "9223372036854ms775us808ns"'],
  ])('refuses %j as Go does', (input, message) => {
    expect(goDuration(input)).toBe(message);
  });
});
