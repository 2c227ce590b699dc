// Tools: the month's credits, usage per day as a chart, and a try-it form that converts HTML or a URL
// to a PDF or a screenshot, spending credits as the API does.
import { useState } from 'preact/hooks';
import { api, request, type Balance, type UsageEntry } from '../api';
import { Button, Empty, ErrorBox, Form, useAction, useLoad, when } from '../ui';

function UsageChart({ entries }: { entries: UsageEntry[] }) {
  const days = new Map<string, number>();
  for (const e of entries) {
    const day = e.created_at.slice(0, 10);
    days.set(day, (days.get(day) ?? 0) + e.amount);
  }
  const rows = [...days.entries()].sort(([a], [b]) => a.localeCompare(b)).slice(-31);
  if (rows.length === 0) return <Empty>No credits spent this month yet: try the form below.</Empty>;
  const max = Math.max(1, ...rows.map(([, n]) => n));
  const width = 24;
  return (
    <svg
      class="chart"
      viewBox={`0 0 ${rows.length * width} 110`}
      role="img"
      aria-label="Credits spent per day"
    >
      {rows.map(([day, n], i) => {
        const h = Math.max(1, (n / max) * 90);
        return (
          <g key={day}>
            <title>{`${day}: ${n} credits`}</title>
            <rect x={i * width + 4} y={95 - h} width={width - 8} height={h} class="bar" />
            <text x={i * width + width / 2} y={108} text-anchor="middle" class="tick">
              {day.slice(8)}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

export function ToolsPage() {
  const balance = useLoad(() => api.get<{ data: Balance }>('/api/v1/user/tools/balance').then((r) => r.data));
  const usage = useLoad(() =>
    api.get<{ data: UsageEntry[] }>('/api/v1/user/tools/usage?limit=500').then((r) => r.data),
  );
  const [source, setSource] = useState<'html' | 'url'>('html');
  const [output, setOutput] = useState<'pdf' | 'screenshot'>('pdf');
  const [input, setInput] = useState('<h1>Hello from Berth</h1>');
  const [result, setResult] = useState<{ url: string; type: string; size: number } | null>(null);
  const [run, busy, error] = useAction(async () => {
    const path =
      output === 'pdf'
        ? `/api/v1/user/tools/pdf/convert/${source}`
        : `/api/v1/user/tools/screenshot/${source}`;
    const response = await request('POST', path, source === 'html' ? { html: input } : { url: input }, {
      accept: '*/*',
    });
    const blob = await response.blob();
    if (result) URL.revokeObjectURL(result.url);
    setResult({ url: URL.createObjectURL(blob), type: blob.type, size: blob.size });
    balance.reload();
    usage.reload();
  });
  const b = balance.data;
  return (
    <>
      <h1>Tools</h1>
      <ErrorBox error={balance.error} />
      {b && (
        <dl class="facts">
          <dt>Credits left</dt>
          <dd data-testid="balance">{b.remaining}</dd>
          <dt>Used this month</dt>
          <dd>
            {b.used} of {b.allowance}
          </dd>
          <dt>Resets</dt>
          <dd>{when(b.resets_at)}</dd>
        </dl>
      )}
      <section aria-labelledby="usage-heading">
        <h2 id="usage-heading">Usage per day</h2>
        <ErrorBox error={usage.error} />
        {usage.data && <UsageChart entries={usage.data} />}
      </section>
      <section aria-labelledby="try-heading">
        <h2 id="try-heading">Try it</h2>
        <p class="help">Each conversion spends one credit, as the API does.</p>
        <Form onSubmit={run}>
          <fieldset class="row">
            <legend>From</legend>
            <label>
              <input
                type="radio"
                name="source"
                checked={source === 'html'}
                onChange={() => setSource('html')}
              />{' '}
              HTML
            </label>
            <label>
              <input
                type="radio"
                name="source"
                checked={source === 'url'}
                onChange={() => {
                  setSource('url');
                  setInput('https://example.com');
                }}
              />{' '}
              URL
            </label>
          </fieldset>
          <fieldset class="row">
            <legend>To</legend>
            <label>
              <input
                type="radio"
                name="output"
                checked={output === 'pdf'}
                onChange={() => setOutput('pdf')}
              />{' '}
              PDF
            </label>
            <label>
              <input
                type="radio"
                name="output"
                checked={output === 'screenshot'}
                onChange={() => setOutput('screenshot')}
              />{' '}
              Screenshot
            </label>
          </fieldset>
          <label>
            {source === 'html' ? 'HTML to convert' : 'URL to convert'}
            {source === 'html' ? (
              <textarea rows={6} value={input} onInput={(e) => setInput(e.currentTarget.value)} />
            ) : (
              <input type="url" value={input} onInput={(e) => setInput(e.currentTarget.value)} />
            )}
          </label>
          <Button type="submit" busy={busy}>
            {busy ? 'Converting…' : 'Convert'}
          </Button>
        </Form>
        <ErrorBox error={error} />
        {result && (
          <div role="status" class="result">
            <p>
              Done: {result.type}, {Math.round(result.size / 1024)} KiB.{' '}
              <a
                href={result.url}
                download={result.type === 'application/pdf' ? 'berth.pdf' : 'screenshot.png'}
              >
                Download
              </a>
            </p>
            {result.type.startsWith('image/') && (
              <img src={result.url} alt="Screenshot preview" class="preview" />
            )}
          </div>
        )}
      </section>
    </>
  );
}
