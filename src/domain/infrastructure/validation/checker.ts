// The Checker collects every problem of a document with its path, and the helpers the block
// validators share to read fields, lists and named entries.
import { FieldErrorCollector } from '../../errors.js';
import { DEFAULT_LIST_LIMIT, HOST_LABEL, ISO_8601, isObj, LIST_LIMITS, type Obj } from './rules.js';

/** A short, safe rendering of a value for a message. */
export function repr(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'string') return `'${value.length > 60 ? `${value.slice(0, 57)}...` : value}'`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'a list';
  return 'a mapping';
}

export const oneOf = (values: readonly string[]): string => `one of ${values.join(', ')}`;

/** A version written as a YAML number (8.4, 24) is read as the string the author meant. */
export function versionText(value: unknown, decimals: boolean): string | undefined {
  if (typeof value === 'string') return value.trim() === '' ? undefined : value;
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
    return decimals && Number.isInteger(value) ? value.toFixed(1) : String(value);
  }
  return undefined;
}

export function isIso8601(text: string): boolean {
  const m = ISO_8601.exec(text);
  if (!m) return false;
  const [, y, mo, d, h, mi, s] = m;
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12 || day < 1 || day > 31) return false;
  if (h !== undefined && (Number(h) > 23 || Number(mi) > 59 || Number(s ?? 0) > 59)) return false;
  const date = new Date(Date.UTC(Number(y), month - 1, day));
  if (date.getUTCDate() !== day) return false;
  return !Number.isNaN(Date.parse(h === undefined ? `${text}T00:00:00Z` : text.replace(' ', 'T')));
}

/** ISO 8601 text → the instant as `toISOString()`; a bare date is midnight UTC. */
export function normalizeTimestamp(text: string): string {
  const m = ISO_8601.exec(text);
  const value = m?.[4] === undefined ? `${text}T00:00:00Z` : text.replace(' ', 'T');
  return new Date(Date.parse(value)).toISOString();
}

export function isHostName(text: string): boolean {
  if (text.length > 253 || !text.includes('.')) return false;
  return text.split('.').every((label) => HOST_LABEL.test(label));
}

export function isAbsolutePath(text: string): boolean {
  return (
    text.startsWith('/') &&
    text.length <= 4096 &&
    !text.includes('\0') &&
    !text.split('/').some((segment) => segment === '..' || segment === '.')
  );
}

export class Checker {
  readonly errors = new FieldErrorCollector();

  add(path: string, message: string): void {
    this.errors.add(path, message);
  }

  unknownFields(obj: Obj, allowed: readonly string[], path: string, resource: string): void {
    for (const key of Object.keys(obj)) {
      if (!allowed.includes(key)) {
        this.add(
          path === '' ? key : `${path}.${key}`,
          `${resource}: field '${key}' is not a known field; accepted fields: ${allowed.join(', ')}.`,
        );
      }
    }
  }

  /** Reads one field with `read`; reports a missing required field or a value `read` refuses. */
  field<T>(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    expected: string,
    read: (value: unknown) => T | undefined,
    required = false,
  ): T | undefined {
    const value = obj[key];
    const at = path === '' ? key : `${path}.${key}`;
    if (value === undefined || value === null) {
      if (required) this.add(at, `${resource}: field '${key}' is required; expected ${expected}.`);
      return undefined;
    }
    const result = read(value);
    if (result === undefined) {
      this.add(at, `${resource}: field '${key}' must be ${expected}; got ${repr(value)}.`);
    }
    return result;
  }

  string(obj: Obj, key: string, path: string, resource: string, required = false, max = 255) {
    return this.field(
      obj,
      key,
      path,
      resource,
      `a string of at most ${max} characters`,
      (v) => (typeof v === 'string' && v.length <= max ? v : undefined),
      required,
    );
  }

  pattern(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    re: RegExp,
    expected: string,
    required = false,
  ): string | undefined {
    return this.field(
      obj,
      key,
      path,
      resource,
      expected,
      (v) => (typeof v === 'string' && re.test(v) ? v : undefined),
      required,
    );
  }

  enumeration<T extends string>(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    values: readonly T[],
    required = false,
    note = '',
  ): T | undefined {
    return this.field(
      obj,
      key,
      path,
      resource,
      `${oneOf(values)}${note}`,
      (v) => (typeof v === 'string' && (values as readonly string[]).includes(v) ? (v as T) : undefined),
      required,
    );
  }

  boolean(obj: Obj, key: string, path: string, resource: string): boolean | undefined {
    return this.field(obj, key, path, resource, 'true or false', (v) =>
      typeof v === 'boolean' ? v : undefined,
    );
  }

  /** Refuses a list longer than its limit (LIST_LIMITS), before any of its items is looked at. */
  private tooLong(value: unknown[], key: string, at: string, resource: string): boolean {
    const limit = LIST_LIMITS[key] ?? DEFAULT_LIST_LIMIT;
    if (value.length <= limit) return false;
    this.add(at, `${resource}: field '${key}' has ${value.length} items; at most ${limit} are accepted.`);
    return true;
  }

  /** A list of strings, each checked with `item`; bad items are reported at their index. */
  stringList(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    itemExpected: string,
    item: (text: string) => boolean = (s) => s.length <= 1000,
  ): string[] | undefined {
    const value = obj[key];
    const at = path === '' ? key : `${path}.${key}`;
    if (value === undefined || value === null) return undefined;
    if (!Array.isArray(value)) {
      this.add(at, `${resource}: field '${key}' must be a list of ${itemExpected}; got ${repr(value)}.`);
      return undefined;
    }
    if (this.tooLong(value, key, at, resource)) return undefined;
    let ok = true;
    value.forEach((entry, index) => {
      if (typeof entry !== 'string' || !item(entry)) {
        ok = false;
        this.add(
          `${at}.${index}`,
          `${resource}: item ${index} of field '${key}' must be ${itemExpected}; got ${repr(entry)}.`,
        );
      }
    });
    return ok ? (value as string[]) : undefined;
  }

  /** A mapping field; reports a non-mapping and returns undefined for it. */
  mapping(obj: Obj, key: string, path: string, resource: string, expected: string): Obj | undefined {
    return this.field(obj, key, path, resource, `a mapping with ${expected}`, (v) =>
      isObj(v) ? v : undefined,
    );
  }

  /** A list of mappings; entries that are not mappings are reported at their index. */
  list(obj: Obj, key: string, path: string, resource: string, expected: string): Array<[Obj, number]> {
    const value = obj[key];
    const at = path === '' ? key : `${path}.${key}`;
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) {
      this.add(at, `${resource}: field '${key}' must be a list of ${expected}; got ${repr(value)}.`);
      return [];
    }
    if (this.tooLong(value, key, at, resource)) return [];
    const entries: Array<[Obj, number]> = [];
    value.forEach((entry, index) => {
      if (isObj(entry)) entries.push([entry, index]);
      else
        this.add(
          `${at}.${index}`,
          `${resource}: entry ${index} of '${key}' must be a mapping with ${expected}; got ${repr(entry)}.`,
        );
    });
    return entries;
  }
}

/** Where an entry of a named list is reported: by its name when it has a usable one, else by index. */
export function entryPath(listPath: string, entry: Obj, index: number): string {
  const name = entry.name;
  return typeof name === 'string' && name !== '' && !name.includes('.')
    ? `${listPath}.${name}`
    : `${listPath}.${index}`;
}

export function entryLabel(kind: string, entry: Obj, index: number): string {
  const name = entry.name;
  return typeof name === 'string' && name !== '' ? `${kind} '${name}'` : `${kind} #${index}`;
}

/** Reports names used twice in one list. */
export function checkUnique(c: Checker, names: Array<[string, string]>, kind: string, field = 'name'): void {
  const seen = new Set<string>();
  for (const [name, path] of names) {
    if (seen.has(name))
      c.add(
        `${path}.${field}`,
        `${kind} ${field} '${name}' is used more than once in the document; ${field}s must be unique.`,
      );
    seen.add(name);
  }
}
