// Apply: a YAML editor checked against /schemas/infrastructure.json as you type, a dry run that lists
// the changes, then the apply itself; the team's export as a download.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, type ApplyResult } from '../api';
import { checkYaml } from '../schema-check';
import { owns, team } from '../state';
import { Button, download, ErrorBox, useAction } from '../ui';

const STARTER = `apiVersion: v1
kind: Infrastructure
metadata:
  name: my-app
  team: TEAM
spec:
  application:
    name: my-app
    type: nodejs
    repository:
      url: https://github.com/owner/repository
      branch: main
`;

let schemaCache: Promise<unknown> | undefined;
const loadSchema = () => (schemaCache ??= api.get<unknown>('/schemas/infrastructure.json'));

export function ApplyPage() {
  const current = team.value;
  const [text, setText] = useState(() => STARTER.replace('TEAM', current?.name ?? 'default'));
  const [schema, setSchema] = useState<unknown>(null);
  const [plan, setPlan] = useState<ApplyResult | null>(null);
  const [applied, setApplied] = useState<ApplyResult | null>(null);
  const gutter = useRef<HTMLDivElement>(null);
  useEffect(() => {
    void loadSchema().then(setSchema, () => setSchema(null));
  }, []);
  const problems = useMemo(() => (schema ? checkYaml(text, schema) : []), [text, schema]);
  const lines = text.split('\n').length;
  const send = (dry: boolean) =>
    api.post<ApplyResult>(`/api/v1/infrastructure/apply${dry ? '?dry_run=true' : ''}`, text, {
      contentType: 'application/yaml',
    });
  const [preview, previewing, previewError] = useAction(async () => {
    setApplied(null);
    setPlan(await send(true));
  });
  const [apply, applying, applyError] = useAction(async () => {
    setApplied(await send(false));
    setPlan(null);
  });
  const [exportTeam, exporting, exportError] = useAction(async () => {
    if (!current) return;
    download(await api.blob('GET', `/api/v1/teams/${current.id}/export-yaml`), `${current.name}.yaml`);
  });
  return (
    <>
      <h1>Apply a document</h1>
      <p>
        Describe the application and what it uses; the document is checked as you type. Preview the changes,
        then apply them. <a href="/docs">API reference</a>.
      </p>
      {/* The document names its team, maybe another one of the user's: the API decides, and says why. */}
      {current && !owns() && (
        <p class="note">
          You are a member of {current.name}: applying a document to it, and previewing one, is for its
          owners.
        </p>
      )}
      <div class="editor">
        <div class="gutter" ref={gutter} aria-hidden="true">
          {Array.from({ length: lines }, (_, i) => (
            <div key={i} class={problems.some((p) => p.line === i + 1) ? 'bad' : undefined}>
              {i + 1}
            </div>
          ))}
        </div>
        <textarea
          aria-label="Infrastructure document (YAML)"
          spellcheck={false}
          value={text}
          rows={Math.max(16, Math.min(lines + 2, 40))}
          onInput={(e) => {
            setText(e.currentTarget.value);
            setPlan(null);
          }}
          onScroll={(e) => {
            if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop;
          }}
        />
      </div>
      <div role="status" aria-live="polite" class="problems" data-testid="problems">
        {schema === null ? (
          'Loading the schema…'
        ) : problems.length === 0 ? (
          <span class="ok">The document matches the schema.</span>
        ) : (
          <ul>
            {problems.slice(0, 20).map((p, i) => (
              <li key={i}>
                Line {p.line}: {p.message}
              </li>
            ))}
          </ul>
        )}
      </div>
      <div class="row">
        <Button busy={previewing} onClick={() => void preview()}>
          Preview changes
        </Button>
        <Button busy={applying} disabled={!plan || plan.errors.length > 0} onClick={() => void apply()}>
          Apply
        </Button>
        <Button kind="secondary" busy={exporting} onClick={() => void exportTeam()}>
          Export {current?.name ?? 'team'} YAML
        </Button>
      </div>
      <ErrorBox error={previewError ?? applyError ?? exportError} />
      {plan && (
        <section aria-labelledby="plan-heading">
          <h2 id="plan-heading">Changes (dry run, nothing applied yet)</h2>
          {plan.changes.length === 0 ? (
            <p>Nothing would change.</p>
          ) : (
            <ul class="changes">
              {plan.changes.map((c, i) => (
                <li key={i}>{c}</li>
              ))}
            </ul>
          )}
        </section>
      )}
      {applied && (
        <section aria-labelledby="applied-heading">
          <h2 id="applied-heading">Applied</h2>
          <ul class="changes">
            {applied.changes.map((c, i) => (
              <li key={i}>{c}</li>
            ))}
          </ul>
          {applied.application_id !== null && (
            <p>
              <a href={`/apps/${applied.application_id}`}>Open {applied.application_name}</a>
              {applied.deployment_id !== null && ' and follow its deployment'}
            </p>
          )}
        </section>
      )}
    </>
  );
}
