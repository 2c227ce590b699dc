// The published JSON Schema agrees with the validator on the documents editors will hold: valid
// documents pass it, and the typical mistakes are flagged by it too.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { infrastructureJsonSchema } from '../../src/domain/infrastructure/json-schema.js';
import { checkDocument } from '../../src/domain/infrastructure/validate.js';
import { fullDocument } from './helpers.js';

type Obj = Record<string, unknown>;

describe('infrastructure JSON Schema', () => {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  const validate = ajv.compile(infrastructureJsonSchema());

  it('accepts what the validator accepts', () => {
    const doc = fullDocument(1) as Obj;
    expect(checkDocument(doc).ok).toBe(true);
    expect(validate(doc), JSON.stringify(validate.errors)).toBe(true);
    const teamOnly = {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'acme', team: 'acme' },
      spec: {
        managed_databases: [
          { name: 'c', type: 'redis', plan: '1x1xCPU-2GB', zone: 'fi-hel1', password: '${DB_C_PASSWORD}' },
        ],
        object_storage: [
          {
            name: 's',
            zone: 'us-1',
            secret_key: '${STORAGE_S_SECRET_KEY}',
            users: [{ username: 'u', policies: [] }],
          },
        ],
      },
    };
    expect(checkDocument(teamOnly).ok).toBe(true);
    expect(validate(teamOnly), JSON.stringify(validate.errors)).toBe(true);
  });

  it('flags unknown fields, wrong zones and plans of another engine', () => {
    const doc = structuredClone(fullDocument(1)) as Obj;
    const spec = doc.spec as Obj;
    (spec.application as Obj).typo = true;
    expect(validate(doc)).toBe(false);
    const wrongPlan = structuredClone(fullDocument(1)) as Obj;
    ((wrongPlan.spec as Obj).managed_databases as Obj[])[0]!.plan = '1x1xCPU-2GB';
    expect(validate(wrongPlan)).toBe(false);
    expect(checkDocument(wrongPlan).ok).toBe(false);
  });
});
