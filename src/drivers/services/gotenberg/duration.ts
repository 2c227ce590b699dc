// Go's time.ParseDuration, which Gotenberg reads `waitDelay` with: the same accepted forms, the same
// bounds (an int64 of nanoseconds) and the same messages, which Gotenberg answers with. A port of Go's
// own code (src/time/format.go), not a library: the duration parsers on npm accept other forms (spaces,
// days, words) and say other things (docs/decisions/0012-gotenberg-parts.md).

const UNIT_NANOS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n, // U+00B5
  μs: 1_000n, // U+03BC
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};
const LIMIT = 1n << 63n;

/** Go's time.quote: printable ASCII as it is (`"` and `\` escaped), each byte of anything else as \xNN. */
function quote(value: string): string {
  let out = '"';
  for (const char of value) {
    const code = char.codePointAt(0)!;
    if (code >= 0x80 || code < 0x20) {
      for (const byte of Buffer.from(char, 'utf8')) out += `\\x${byte.toString(16).padStart(2, '0')}`;
    } else {
      out += char === '"' || char === '\\' ? `\\${char}` : char;
    }
  }
  return `${out}"`;
}

/** Go's leadingInt: the digits at the start of `s` as a number, undefined past 1<<63. */
function leadingInt(s: string): { value: bigint | undefined; rest: string } {
  let i = 0;
  let value = 0n;
  let overflow = false;
  for (; i < s.length && s[i]! >= '0' && s[i]! <= '9'; i++) {
    if (overflow) continue;
    if (value > LIMIT / 10n) overflow = true;
    else {
      value = value * 10n + BigInt(s.charCodeAt(i) - 48);
      if (value > LIMIT) overflow = true;
    }
  }
  return { value: overflow ? undefined : value, rest: s.slice(i) };
}

/** Go's leadingFraction: the digits after a point as a number and its scale; digits past int64 are dropped. */
function leadingFraction(s: string): { value: bigint; scale: number; rest: string } {
  let i = 0;
  let value = 0n;
  let scale = 1;
  let overflow = false;
  for (; i < s.length && s[i]! >= '0' && s[i]! <= '9'; i++) {
    if (overflow) continue;
    if (value > (LIMIT - 1n) / 10n) {
      overflow = true;
      continue;
    }
    const next = value * 10n + BigInt(s.charCodeAt(i) - 48);
    if (next > LIMIT) {
      overflow = true;
      continue;
    }
    value = next;
    scale *= 10;
  }
  return { value, scale, rest: s.slice(i) };
}

/** Go's time.ParseDuration, in milliseconds; a string is Go's error message. */
export function goDuration(value: string): number | string {
  const invalid = `time: invalid duration ${quote(value)}`;
  let s = value;
  let negative = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    negative = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') return invalid;
  let total = 0n;
  while (s !== '') {
    // The next character must be [0-9.].
    if (!(s[0] === '.' || (s[0]! >= '0' && s[0]! <= '9'))) return invalid;
    const before = s.length;
    const whole = leadingInt(s);
    if (whole.value === undefined) return invalid;
    let v = whole.value;
    s = whole.rest;
    const pre = before !== s.length;
    let fraction = { value: 0n, scale: 1, rest: s };
    let post = false;
    if (s[0] === '.') {
      s = s.slice(1);
      fraction = leadingFraction(s);
      post = s.length !== fraction.rest.length;
      s = fraction.rest;
    }
    if (!pre && !post) return invalid; // no digits (".s", "-.s")
    let end = 0;
    while (end < s.length && s[end] !== '.' && !(s[end]! >= '0' && s[end]! <= '9')) end++;
    if (end === 0) return `time: missing unit in duration ${quote(value)}`;
    const unitName = s.slice(0, end);
    s = s.slice(end);
    const unit = UNIT_NANOS[unitName];
    if (unit === undefined) return `time: unknown unit ${quote(unitName)} in duration ${quote(value)}`;
    if (v > LIMIT / unit) return invalid;
    v *= unit;
    if (fraction.value > 0n) {
      // As Go: in float64, nanosecond-accurate for fractions of hours.
      v += BigInt(Math.trunc(Number(fraction.value) * (Number(unit) / fraction.scale)));
      if (v > LIMIT) return invalid;
    }
    total += v;
    if (total > LIMIT) return invalid;
  }
  if (!negative && total > LIMIT - 1n) return invalid;
  const ms = Number(total) / 1e6;
  return negative ? -ms : ms;
}
