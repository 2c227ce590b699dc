// Outgoing e-mail over SMTP (nodemailer). The one place that knows about SMTP.
import nodemailer from 'nodemailer';
import type { Mailer } from './types.js';

export type { MailMessage, Mailer } from './types.js';

export interface SmtpOptions {
  /** smtp://user:pass@host:port or smtps://…; a `from` query parameter sets the sender. */
  url: string;
  /** Sender when the URL has no `from` parameter. */
  defaultFrom: string;
  /** Connection and greeting timeouts (ms): a dead relay fails the attempt instead of hanging the job. */
  timeoutMs?: number;
}

/** Splits Berth's own `from` parameter off the URL; nodemailer reads the rest (e.g. ignoreTLS=true). */
export function parseSmtpUrl(url: string, defaultFrom: string): { transportUrl: string; from: string } {
  const parsed = new URL(url);
  const from = parsed.searchParams.get('from') ?? defaultFrom;
  parsed.searchParams.delete('from');
  return { transportUrl: parsed.toString(), from };
}

export function createSmtpMailer(options: SmtpOptions): Mailer {
  const { transportUrl, from } = parseSmtpUrl(options.url, options.defaultFrom);
  const timeout = options.timeoutMs ?? 30_000;
  // URL settings win over these; timeouts are ours unless the operator sets them in the URL.
  const transport = nodemailer.createTransport({
    url: transportUrl,
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
  });
  return {
    async send(message) {
      const info = (await transport.sendMail({ from, ...message })) as { messageId?: string };
      return { messageId: info.messageId ?? '' };
    },
    close() {
      transport.close();
      return Promise.resolve();
    },
  };
}

/** The sender address used when the operator names none: no-reply at the public host. */
export function defaultSender(publicUrl: string): string {
  let host = 'localhost';
  try {
    host = new URL(publicUrl).hostname || host;
  } catch {
    // publicUrl is validated by the config; keep the fallback for safety.
  }
  // A bare IP or a dotless name is not a valid mail domain for most relays; .local marks it as internal.
  const domain = /^[\d.]+$|^\[|^[^.]+$/.test(host) ? 'berth.local' : host;
  return `Berth <no-reply@${domain}>`;
}
