// The client's own error kinds, in a module of their own: the profile store (config.ts) and the HTTP
// client (http.ts) both use them, and http.ts uses the profile store's types.

/** The user's mistake rather than the server's (exit code 2). */
export class UsageError extends Error {}
