import { describe, expect, it } from 'vitest';
import { accepts } from '../../src/http/plugins/protocol.js';

describe('Accept negotiation', () => {
  it.each([
    [undefined, ['application/json'], true],
    ['*/*', ['application/json'], true],
    ['application/*', ['application/json'], true],
    ['application/json;q=0.5, text/html', ['application/json'], true],
    ['text/html', ['application/json'], false],
    ['application/json;q=0', ['application/json'], false],
    ['application/pdf', ['application/pdf', 'application/json'], true],
    ['image/*', ['image/png'], true],
  ])('Accept %s for %j → %s', (accept, produces, expected) => {
    expect(accepts(accept, produces)).toBe(expected);
  });
});
