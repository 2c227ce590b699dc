// Helpers for the scheduled-deletion tests: a real SMTP server on loopback that keeps what it receives,
// and applications written straight into the store, as apply (another writer) would leave them.
import { SMTPServer } from 'smtp-server';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema/index.js';
import { freePort } from '../helpers/processes.js';

export interface DeliveredMail {
  from: string;
  to: string[];
  subject: string;
  text: string;
  raw: string;
}

export interface SmtpSink {
  port: number;
  url: string;
  mails: DeliveredMail[];
  /** Mails whose subject contains the text, per recipient. */
  to(recipient: string): DeliveredMail[];
  clear(): void;
  close(): Promise<void>;
}

function decodeQuotedPrintable(body: string): string {
  const bytes = body
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return Buffer.from(bytes, 'latin1').toString('utf8');
}

/** RFC 2047 encoded words (nodemailer encodes subjects with quotes or long runs). */
function decodeHeader(value: string): string {
  return value
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_m, _charset: string, enc: string, text: string) =>
      enc.toUpperCase() === 'B'
        ? Buffer.from(text, 'base64').toString('utf8')
        : decodeQuotedPrintable(text.replace(/_/g, ' ')),
    );
}

/** Enough MIME to read what nodemailer sends: unfolded headers and a text/plain body. */
export function parseMail(raw: string, envelope: { from: string; to: string[] }): DeliveredMail {
  const split = raw.indexOf('\r\n\r\n');
  const headerText = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const headers = new Map<string, string>();
  for (const line of headerText.split('\r\n')) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
  }
  const body = raw.slice(split + 4);
  const encoding = (headers.get('content-transfer-encoding') ?? '7bit').toLowerCase();
  const text =
    encoding === 'quoted-printable'
      ? decodeQuotedPrintable(body)
      : encoding === 'base64'
        ? Buffer.from(body, 'base64').toString('utf8')
        : body;
  return {
    ...envelope,
    subject: decodeHeader(headers.get('subject') ?? ''),
    text: text.replace(/\r\n/g, '\n').replace(/\n$/, ''),
    raw,
  };
}

export async function startSmtpSink(port?: number): Promise<SmtpSink> {
  const mails: DeliveredMail[] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
        };
        mails.push(parseMail(Buffer.concat(chunks).toString('utf8'), envelope));
        callback();
      });
    },
  });
  const listenPort = port ?? (await freePort());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, '127.0.0.1', () => resolve());
  });
  return {
    port: listenPort,
    url: `smtp://127.0.0.1:${listenPort}`,
    mails,
    to: (recipient) => mails.filter((m) => m.to.includes(recipient)),
    clear: () => {
      mails.length = 0;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface NewApplication {
  teamId: number;
  name: string;
  scheduledDeletionAt?: string | null;
  domains?: string[];
  at?: string;
}

/** An application with one of each child, inserted directly (as apply would leave it). */
export async function insertApplication(db: Kysely<Database>, input: NewApplication): Promise<number> {
  const at = input.at ?? '2026-01-01T00:00:00.000Z';
  const row = await db
    .insertInto('applications')
    .values({
      team_id: input.teamId,
      name: input.name,
      type: 'nodejs',
      version: null,
      label: null,
      tags: '[]',
      repository: '{}',
      runtime: '{}',
      commands: '{}',
      health_check_enabled: 1,
      health_check_path: null,
      scheduler_enabled: null,
      replicas: null,
      memory: null,
      php: '{}',
      scheduled_deletion_at: input.scheduledDeletionAt ?? null,
      created_at: at,
      updated_at: at,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const id = row.id;
  for (const domain of input.domains ?? [`${input.name}.example.com`]) {
    await db.insertInto('domains').values({ application_id: id, domain, created_at: at }).execute();
  }
  await db
    .insertInto('secrets')
    .values({
      application_id: id,
      key: 'APP_KEY',
      value_encrypted: 'sealed',
      value_hash: 'hash',
      created_at: at,
      updated_at: at,
    })
    .execute();
  await db
    .insertInto('volumes')
    .values({
      application_id: id,
      name: 'storage',
      mount_path: '/data',
      volume_size: 5,
      created_at: at,
      updated_at: at,
    })
    .execute();
  await db
    .insertInto('services')
    .values({
      application_id: id,
      name: 'mysql',
      type: 'mysql',
      version: '8',
      memory: null,
      volume_size: null,
      settings: '{}',
      secret_settings: null,
      secret_settings_hash: null,
      command: null,
      created_at: at,
      updated_at: at,
    })
    .execute();
  await db
    .insertInto('deployments')
    .values({ application_id: id, status: 'success', reason: 'apply', created_at: at, updated_at: at })
    .execute();
  return id;
}

/** Rows left in every table that hangs off an application. */
export async function childRows(db: Kysely<Database>, applicationId: number): Promise<number> {
  let total = 0;
  for (const table of [
    'domains',
    'secrets',
    'volumes',
    'services',
    'container_services',
    'deployments',
  ] as const) {
    const rows = await db
      .selectFrom(table)
      .select('id')
      .where('application_id', '=', applicationId)
      .execute();
    total += rows.length;
  }
  return total;
}

export const DAY = 24 * 60 * 60 * 1000;
export const HOUR = 60 * 60 * 1000;
export const MINUTE = 60 * 1000;
