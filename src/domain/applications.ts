// The kinds of application Berth runs (the spec's application `type`).
export type ApplicationType = 'laravel' | 'nodejs' | 'wordpress';
