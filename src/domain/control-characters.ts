// Control characters in what the store keeps (issue 11, item 8). PostgreSQL cannot store NUL in a
// text column at all (the statement fails, a 500), SQLite stores it: refusing NUL everywhere makes
// both stores answer alike. Names (teams, tokens, labels, keys, …) take no control character at all:
// they are shown, logged and compared, where an invisible or terminal-moving character misleads.
import type { FieldErrors } from './errors.js';

/** C0 controls, DEL and C1 controls. */
export const NAME_CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Fields whose strings (or whose lists' strings) are names, wherever they are in a body. */
const NAME_FIELDS = new Set([
  'name',
  'title',
  'label',
  'labels',
  'team',
  'username',
  'key',
  'zone',
  'plan',
  'tags',
  'domain',
]);

/** Values one body may hold before the walk stops: JSON bodies of every route hold far fewer. */
export const MAX_BODY_VALUES = 100_000;

/** An array or an object made by JSON.parse (or a literal): never a stream, a buffer or a socket. */
export function isPlainJsonContainer(value: unknown): value is object {
  if (Array.isArray(value)) return true;
  if (value === null || typeof value !== 'object') return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** A body with more values than MAX_BODY_VALUES: refused rather than walked for long. */
export class TooManyValuesError extends Error {
  constructor() {
    super(`The body holds more than ${MAX_BODY_VALUES} values.`);
  }
}

/**
 * Field errors for NUL in any string and for any control character in a name field or an object
 * key; `{}` when there is none. Iterative, so a deeply nested body cannot exhaust the stack; it walks
 * plain JSON values only (anything else, a request stream's socket above all, is not looked into),
 * each object once, and throws TooManyValuesError past MAX_BODY_VALUES values.
 */
export function controlCharacterErrors(value: unknown, root: string): FieldErrors {
  const errors: FieldErrors = {};
  const seen = new WeakSet<object>();
  const stack: Array<[unknown, string, boolean]> = [[value, root, false]];
  let visited = 0;
  while (stack.length > 0) {
    const [current, path, isName] = stack.pop()!;
    if ((visited += 1) > MAX_BODY_VALUES) throw new TooManyValuesError();
    if (typeof current === 'string') {
      if (isName ? NAME_CONTROL.test(current) : current.includes('\u0000')) {
        errors[path] = [
          isName
            ? `The ${path} field must not contain control characters.`
            : `The ${path} field must not contain NUL characters.`,
        ];
      }
      continue;
    }
    if (!isPlainJsonContainer(current) || seen.has(current)) continue;
    seen.add(current);
    if (Array.isArray(current)) {
      current.forEach((item, i) => stack.push([item, `${path}.${i}`, isName]));
    } else {
      for (const [key, item] of Object.entries(current)) {
        const at = path === '' ? key : `${path}.${key}`;
        if (NAME_CONTROL.test(key)) {
          errors[path === '' ? '(key)' : `${path}.(key)`] = [
            `The keys of ${path === '' ? 'the body' : `the ${path} field`} must not contain control characters.`,
          ];
          continue;
        }
        stack.push([item, at, isName || NAME_FIELDS.has(key)]);
      }
    }
  }
  return errors;
}
