// Small building blocks of the response schemas. Objects stay open (TypeBox's default: no
// additionalProperties), so the response check fails on a missing or mistyped field, never on an
// added one; every field a route sends today is listed all the same.
import { Type, type TLiteral, type TSchema, type TUnion } from 'typebox';

/** `T | null`. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/**
 * One of a fixed set of strings. Typed as a union of one literal of them all: TypeBox's Static reads a
 * union's members as a tuple (an array of them is `never`), and the web and CLI types come from Static.
 */
export const OneOf = <const V extends string>(
  values: readonly V[],
  options: { description?: string } = {},
): TUnion<[TLiteral<V>]> => Type.Union(values.map((value) => Type.Literal(value)) as [TLiteral<V>], options);

/** A time as Berth stores it: ISO 8601 text. */
export const Timestamp = Type.String({ description: 'ISO 8601 time' });

/** `{data: T}`, the platform API's envelope. */
export const Data = <T extends TSchema>(schema: T, description?: string) =>
  Type.Object({ data: schema }, description === undefined ? {} : { description });

/** An answer without a body (204). */
export const NoContent = Type.Null({ description: 'No content' });

/** A file answered as it is (PDF, image, archive), for each media type it can have. */
export function fileResponse(
  mediaTypes: readonly string[],
  description: string,
  headers?: Record<string, { type: string; description: string }>,
) {
  const content: Record<string, { schema: TSchema }> = {};
  for (const type of mediaTypes) content[type] = { schema: Type.String({ format: 'binary' }) };
  return { description, content, ...(headers ? { headers } : {}) };
}

/** Text answered as it is (YAML documents), for each media type it is served as. */
export function textResponse(mediaTypes: readonly string[], description: string) {
  const content: Record<string, { schema: TSchema }> = {};
  for (const type of mediaTypes) content[type] = { schema: Type.String() };
  return { description, content };
}
