// Shared pieces: error display (message and fields), forms that stay in the page, busy buttons, empty
// states, typed confirmation, secrets shown once, reveal-and-copy, dates.
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api';

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  const e =
    error instanceof ApiError
      ? error
      : new ApiError(
          0,
          error instanceof Error
            ? error.message
            : typeof error === 'string'
              ? error
              : 'Something went wrong.',
        );
  const fields = Object.entries(e.fields);
  return (
    <div class="error" role="alert">
      <strong>{e.message}</strong>
      {fields.length > 0 && (
        <ul>
          {fields.map(([field, messages]) => (
            <li key={field}>
              <code>{field}</code>: {messages.join(' ')}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Runs an action with a busy state and its error; returns [run, busy, error, setError]. */
export function useAction<A extends unknown[]>(
  action: (...args: A) => Promise<unknown>,
): [(...args: A) => Promise<boolean>, boolean, unknown] {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (...args: A) => {
    setBusy(true);
    setError(null);
    try {
      await action(...args);
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy(false);
    }
  };
  return [run, busy, error];
}

/** Loads something on mount (and when `deps` change); reload() again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setError(null);
    load().then(
      (value) => live && setData(value),
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

/** A form whose submission stays in the page: `onSubmit` runs instead of the browser's navigation. */
export function Form({
  onSubmit,
  children,
  ...rest
}: Omit<JSX.FormHTMLAttributes<HTMLFormElement>, 'onSubmit'> & { onSubmit: () => unknown }) {
  return (
    <form
      {...rest}
      onSubmit={(e) => {
        e.preventDefault();
        void onSubmit();
      }}
    >
      {children}
    </form>
  );
}

export function Busy({ label = 'Loading…' }: { label?: string }) {
  return (
    <p class="busy" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" /> {label}
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

export function Button(
  props: JSX.ButtonHTMLAttributes<HTMLButtonElement> & { busy?: boolean; kind?: 'danger' | 'secondary' },
) {
  const { busy, kind, children, disabled, ...rest } = props;
  return (
    <button
      type="button"
      {...rest}
      class={[kind ?? '', typeof props.class === 'string' ? props.class : ''].join(' ').trim() || undefined}
      disabled={Boolean(disabled) || busy}
      aria-busy={busy ? 'true' : undefined}
    >
      {busy && <span class="spinner" aria-hidden="true" />} {children}
    </button>
  );
}

/** A destructive action that asks for the name to be typed first. */
export function TypedConfirm(props: { name: string; action: string; onConfirm: () => Promise<unknown> }) {
  const [open, setOpen] = useState(false);
  const [typed, setTyped] = useState('');
  const [run, busy, error] = useAction(props.onConfirm);
  if (!open) {
    return (
      <Button kind="danger" onClick={() => setOpen(true)}>
        {props.action}…
      </Button>
    );
  }
  return (
    <Form
      class="confirm"
      onSubmit={() => {
        if (typed === props.name) void run();
      }}
    >
      <label>
        Type <strong>{props.name}</strong> to {props.action.toLowerCase()}
        <input value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" />
      </label>
      <div class="row">
        <button type="submit" class="danger" disabled={typed !== props.name || busy}>
          {props.action}
        </button>
        <Button kind="secondary" onClick={() => setOpen(false)}>
          Cancel
        </Button>
      </div>
      <ErrorBox error={error} />
    </Form>
  );
}

/** A secret shown this once, with a copy button. */
export function ShownOnce({ label, value }: { label: string; value: string }) {
  return (
    <div class="once" role="status">
      <p>
        {label} — <strong>shown this once</strong>; copy it now.
      </p>
      <Secret value={value} label={label} revealed />
    </div>
  );
}

/** A secret value hidden until revealed, with copy (a read-only field: easy to select by hand too). */
export function Secret({
  value,
  label,
  revealed = false,
}: {
  value: string;
  label: string;
  revealed?: boolean;
}) {
  const [shown, setShown] = useState(revealed);
  const [copied, setCopied] = useState(false);
  return (
    <span class="secret">
      <input
        readOnly
        aria-label={label}
        value={shown ? value : '••••••••••••'}
        size={40}
        onFocus={(e) => shown && e.currentTarget.select()}
      />
      {!revealed && (
        <button
          type="button"
          class="small secondary"
          onClick={() => setShown(!shown)}
          aria-label={`${shown ? 'Hide' : 'Reveal'} ${label}`}
        >
          {shown ? 'Hide' : 'Reveal'}
        </button>
      )}
      <button
        type="button"
        class="small secondary"
        aria-label={`Copy ${label}`}
        onClick={() => {
          void navigator.clipboard?.writeText(value).then(() => setCopied(true));
        }}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
    </span>
  );
}

export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function Badge({ value }: { value: string }) {
  return <span class={`badge badge-${value.replace(/[^a-z]/gi, '-').toLowerCase()}`}>{value}</span>;
}

export function download(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
