// What the application-services tests share: a document of one application and its services, and the
// `data` of an answer.
import { stringify } from 'yaml';

export const data = <T>(response: { json<U>(): U }): T => response.json<{ data: T }>().data;

/** An application of team `acme` (its repository never fetched) with these services. */
export function appDocument(name: string, services: unknown[]): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team: 'acme' },
    spec: {
      application: {
        name,
        type: 'nodejs',
        repository: { url: `https://example.com/${name}.git`, branch: 'main' },
        commands: { start: 'npm start' },
      },
      services,
    },
  });
}
