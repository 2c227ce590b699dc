// What services know of outgoing mail: the interface; src/drivers/mail/index.ts is the SMTP one.

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** Resolves once the SMTP server accepted the message; rejects with the server's answer otherwise. */
  send(message: MailMessage): Promise<{ messageId: string }>;
  close(): Promise<void>;
}
