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

/**
 * Field errors for NUL in any string and for any control character in a name field or an object
 * key; `{}` when there is none. Iterative, so a deeply nested body cannot exhaust the stack.
 */
export function controlCharacterErrors(value: unknown, root: string): FieldErrors {
  const errors: FieldErrors = {};
  const stack: Array<[unknown, string, boolean]> = [[value, root, false]];
  while (stack.length > 0) {
    const [current, path, isName] = stack.pop()!;
    if (typeof current === 'string') {
      if (isName ? NAME_CONTROL.test(current) : current.includes('\u0000')) {
        errors[path] = [
          isName
            ? `The ${path} field must not contain control characters.`
            : `The ${path} field must not contain NUL characters.`,
        ];
      }
    } else if (Array.isArray(current)) {
      current.forEach((item, i) => stack.push([item, `${path}.${i}`, isName]));
    } else if (current !== null && typeof current === 'object') {
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
